package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// An instance's live heap is small (a few MB in a burn-down: reservations, buffers of
// candidates) while it allocates fast (a request's body, its answer, a batch's arrays),
// so Go's default pacing (GOGC=100: collect when the heap has doubled) collects every few
// tens of milliseconds and spends a seventh of the instance's CPU on it. gcFloor lets the
// heap grow to gcFloorBytes before a collection while the live heap is small, and keeps
// Go's default once it is large: after every collection it sets GOGC so that the next
// goal is max(gcFloorBytes, 2 × the live heap). What it costs is memory, at most
// gcFloorBytes of garbage, and only while the live heap is under half of it; an instance
// holding 100 000 reservations or 10 000 parked consumers is above that and paced as
// before. An operator who sets GOGC or GOMEMLIMIT keeps exactly what they set.
const gcFloorBytes = 64 << 20

// gcPercentMax bounds the GOGC the floor sets (a live heap of a few hundred KB would ask
// for tens of thousands).
const gcPercentMax = 2000

// gcFloor installs the floor, once per process, unless the environment sets GOGC or
// GOMEMLIMIT, and says whether the floor paces the collector.
var gcFloor = sync.OnceValue(func() bool {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var rearm func(*gcSentinel)
	rearm = func(s *gcSentinel) {
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(gcPercentFor(live[0].Value.Uint64()))
		}
		runtime.SetFinalizer(s, rearm) // runs again after the next collection
	}
	runtime.SetFinalizer(&gcSentinel{}, rearm)
	return true
})

// gcSentinel is garbage as soon as it is made: its finalizer runs after each collection.
type gcSentinel struct{ _ *byte } // a pointer: never batched by the tiny allocator

// gcPercentFor is the GOGC whose goal, for a live heap of live bytes, is gcFloorBytes, or
// Go's default 100 when that is larger.
func gcPercentFor(live uint64) int {
	if live == 0 || live*2 >= gcFloorBytes {
		return 100
	}
	p := int((gcFloorBytes - live) * 100 / live)
	return min(max(p, 100), gcPercentMax)
}
