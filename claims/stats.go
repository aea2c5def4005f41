package claims

import (
	"sync"
	"sync/atomic"
	"time"
)

// RenewBuckets are the upper bounds, in seconds, of the renewal latency histogram of
// Stats: a renewal is one short serializable transaction, and one near the soft expiry
// (10 s) is an outage.
var RenewBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Stats are the claims loop's counters since Start, for metrics.
type Stats struct {
	// Acquired counts the shards this instance took; each took a new generation.
	Acquired int64
	// Lost counts the shards a renewal found taken by another instance or an operator.
	Lost int64
	// Released counts the shards this instance gave back (drained, or at Stop).
	Released int64
	// RenewFailures counts the cycles whose renewal of the held shards did not succeed:
	// the renewal failed, or a step before it did (the heartbeat, when the database is
	// unreachable). Each is a renew interval in which the shards' deadlines did not move.
	RenewFailures int64
	// CycleFailures counts the cycles that failed at any step: those of RenewFailures, and
	// those whose renewal succeeded but whose balancing (release, acquire) failed.
	CycleFailures int64
	// LastRenewal is when the last successful renewal began; zero before the first.
	LastRenewal time.Time
	// Renewals is the latency of the successful renewals.
	Renewals Histogram
}

// Histogram is a snapshot of a latency histogram: Counts[i] is the number of
// observations at most Bounds[i] seconds (cumulative, as Prometheus has it).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64 // seconds
}

// stats are the Manager's counters. Safe for concurrent use.
type stats struct {
	acquired, lost, released, renewFailures, cycleFailures atomic.Int64

	mu struct {
		sync.Mutex
		last   time.Time
		counts []uint64 // per bucket of RenewBuckets, not cumulative; one more for +Inf
		sum    float64
	}
}

// renewed records a successful renewal that began at began and took d.
func (s *stats) renewed(began time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.counts == nil {
		s.mu.counts = make([]uint64, len(RenewBuckets)+1)
	}
	i := 0
	for i < len(RenewBuckets) && d.Seconds() > RenewBuckets[i] {
		i++
	}
	s.mu.counts[i]++
	s.mu.sum += d.Seconds()
	s.mu.last = began
}

// Stats returns the claims loop's counters.
func (m *Manager) Stats() Stats {
	s := &m.stats
	out := Stats{
		Acquired: s.acquired.Load(), Lost: s.lost.Load(), Released: s.released.Load(),
		RenewFailures: s.renewFailures.Load(), CycleFailures: s.cycleFailures.Load(),
		Renewals: Histogram{Bounds: RenewBuckets, Counts: make([]uint64, len(RenewBuckets))},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out.LastRenewal, out.Renewals.Sum = s.mu.last, s.mu.sum
	var cum uint64
	for i, n := range s.mu.counts {
		cum += n
		if i < len(RenewBuckets) {
			out.Renewals.Counts[i] = cum
		}
	}
	out.Renewals.Count = cum
	return out
}
