package ui

import (
	"strings"
	"testing"
	"time"

	"opsq/queuer"
)

// TestRateRing: the completion rate between overviews, counting the submissions that
// finished in between, at most one sample per rateInterval, and the chart of it.
func TestRateRing(t *testing.T) {
	t.Parallel()
	r := newRateRing()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if s := r.since(); s != nil {
		t.Fatalf("since of an empty ring = %v; want nil", s)
	}
	r.add(queuer.Overview{Now: t0, DoneInProgress: 100}, nil)
	// 10 s later: a submission that had 30 done at t0 finished with 60 done, and the ones
	// still in progress went from 70 to 70: (70 + 60) - 100 = 30 completions.
	since := r.since()
	if since == nil || !since.Equal(t0) {
		t.Fatalf("since = %v; want %v", since, t0)
	}
	r.add(queuer.Overview{Now: t0.Add(time.Second), DoneInProgress: 500}, since) // too soon: ignored
	r.add(queuer.Overview{Now: t0.Add(10 * time.Second), DoneInProgress: 70, DoneFinishedSince: 60}, since)
	points, top, latest := r.chart(t0.Add(10 * time.Second))
	if latest != 3 || top != 3 {
		t.Errorf("rate = %v (top %v); want 3/s (30 completions in 10 s)", latest, top)
	}
	if !strings.HasPrefix(points, "600.0,") {
		t.Errorf("chart points %q; want one point at the right edge (x 600)", points)
	}
	if got, want := area("1.0,5.0 3.0,7.0"), "1.0,5.0 3.0,7.0 3.0,120 1.0,120"; got != want {
		t.Errorf("area = %q; want %q", got, want)
	}
	for i := range rateSamples + 10 {
		s := r.since()
		r.add(queuer.Overview{Now: s.Add(rateInterval), DoneInProgress: 70 + int64(i)}, s)
	}
	r.mu.Lock()
	n := len(r.mu.samples)
	r.mu.Unlock()
	if n != rateSamples {
		t.Errorf("%d samples kept; want at most %d", n, rateSamples)
	}
}
