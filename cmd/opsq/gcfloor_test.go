package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{1 << 10, gcPercentMax},     // a tiny heap: bounded
		{4 << 20, 1500},             // 4 MiB live: goal 64 MiB
		{16 << 20, 300},             // 16 MiB: goal 64 MiB
		{30 << 20, 113},             // just under half the floor
		{32 << 20, 100},             // half the floor: Go's default from here on
		{500 << 20, 100},            // a large heap: as Go paces it
		{gcFloorBytes - 1<<20, 100}, // never under 100
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TestGCFloorPacesAfterACollection: with the floor installed (the test's environment sets
// neither GOGC nor GOMEMLIMIT), a collection leaves GOGC at the floor's value for the live
// heap, not at Go's 100.
func TestGCFloorPacesAfterACollection(t *testing.T) {
	t.Setenv("GOGC", "") // as a plain environment has it
	t.Setenv("GOMEMLIMIT", "")
	if !gcFloor() {
		t.Fatal("gcFloor() = false with neither GOGC nor GOMEMLIMIT set")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	debug.SetGCPercent(100)
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC() // the sentinel's finalizer runs after it, on the finalizer goroutine
		time.Sleep(10 * time.Millisecond)
		p := debug.SetGCPercent(100)
		if p > 100 {
			return // the test binary's live heap is a few MB: the floor raised GOGC
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d 30 s after collections: the floor did not pace them", p)
		}
	}
}
