package bench

import (
	"math"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestShareDeviation(t *testing.T) {
	t.Parallel()
	w := map[string]int{"1": 3, "2": 1, "3": 1}
	for _, tt := range []struct {
		name   string
		counts map[string]int
		want   float64
	}{
		{"exact", map[string]int{"1": 300, "2": 100, "3": 100}, 0},
		{"one value 10 % short", map[string]int{"1": 300, "2": 90, "3": 110}, 10},
		{"others left out", map[string]int{"1": 300, "2": 100, "3": 100, "": 1000}, 0},
		{"one value starved", map[string]int{"1": 300, "2": 100}, 100},
		{"nothing", map[string]int{}, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := shareDeviation(tt.counts, w); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("shareDeviation(%v) = %v; want %v", tt.counts, got, tt.want)
			}
		})
	}
}

func TestMaxInWindow(t *testing.T) {
	t.Parallel()
	at := []time.Duration{0, ms(100), ms(999), ms(1000), ms(1500), ms(1600), ms(1700)}
	if got := maxInWindow(at, time.Second); got != 5 { // 1000 … 1700 and 999: [999, 1999)
		t.Errorf("maxInWindow = %d; want 5", got)
	}
	if got := maxInWindow(nil, time.Second); got != 0 {
		t.Errorf("maxInWindow(nil) = %d; want 0", got)
	}
}

func TestRateExcess(t *testing.T) {
	t.Parallel()
	// 10/s, burst 2: one chunk every 100 ms, each reserve answered 10 ms after it was sent.
	var steady []handout
	for i := range 30 {
		steady = append(steady, handout{value: "a", sent: ms(100 * i), at: ms(100*i + 10)})
	}
	if got := rateExcess(steady, "a", 10, 2); got > 0 {
		t.Errorf("a steady 10/s: %v chunks beyond the bound; want none", got)
	}
	// 6 chunks answered within 50 ms: 10 × 0.05 + 2 = 2.5 at most.
	burst := append([]handout{}, steady...)
	for i := range 6 {
		burst = append(burst, handout{value: "a", sent: ms(5000 + i), at: ms(5040 + i)})
	}
	if got := rateExcess(burst, "a", 10, 2); got <= 0 {
		t.Errorf("6 chunks in 50 ms at 10/s burst 2: %v beyond the bound; want some", got)
	}
	// The same 6 from long-polls sent a second earlier: they may have been handed out a
	// second apart, so nothing is proven.
	for i := range 6 {
		burst[30+i].sent -= time.Second
	}
	if got := rateExcess(burst, "a", 10, 2); got > 0 {
		t.Errorf("6 chunks whose reserves were sent a second earlier: %v beyond the bound; want none proven", got)
	}
	if got := rateExcess(steady, "b", 10, 2); got > 0 {
		t.Errorf("another value: %v; want none", got)
	}
}

func TestThrottleLeaks(t *testing.T) {
	t.Parallel()
	recs := []handout{
		{value: "x", sent: ms(900), at: ms(1010)},  // sent before the answer: not proven
		{value: "x", sent: ms(1100), at: ms(1200)}, // a leak
		{value: "y", sent: ms(1100), at: ms(1200)}, // another value
		{value: "x", sent: ms(2900), at: ms(3100)}, // after until
	}
	if got := throttleLeaks(recs, "x", ms(1000), ms(3000)); got != 1 {
		t.Errorf("throttleLeaks = %d; want 1", got)
	}
	if at, ok := firstAfter(recs, "x", ms(3000)); !ok || at != ms(3100) {
		t.Errorf("firstAfter = %v, %v; want 3.1s, true", at, ok)
	}
}

// TestHandOutExcess: the exact bound on hand-out times, per_second × span + burst: a
// steady 20/s with a burst of 5 at the start is within 20/s burst 5; one more chunk in the
// burst is one beyond.
func TestHandOutExcess(t *testing.T) {
	var steady []time.Duration
	for range 5 {
		steady = append(steady, 0) // the burst
	}
	for i := 1; i <= 40; i++ {
		steady = append(steady, time.Duration(i)*50*time.Millisecond) // 20/s for 2 s
	}
	if got := handOutExcess(steady, 20, 5); got > 0 {
		t.Errorf("a burst of 5 then 20/s: excess %v; want none", got)
	}
	if got := maxInWindow(steady, time.Second); got != 5+19 {
		t.Errorf("most in 1 s: %d; want 24", got)
	}
	over := append([]time.Duration{0}, steady...)
	if got := handOutExcess(over, 20, 5); got != 1 {
		t.Errorf("a burst of 6 then 20/s: excess %v; want 1", got)
	}
}

// TestProvenMostInWindow: chunks count together in a window only when their latest arrival
// less their earliest start (the later of sending and the run's start) is under it.
func TestProvenMostInWindow(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	recs := []handout{
		{value: "a", sent: ms(0), handed: ms(100), at: ms(150)},
		{value: "a", sent: ms(0), handed: ms(900), at: ms(950)},
		{value: "a", sent: ms(0), handed: ms(1050), at: ms(1200)}, // with the first: 1.1 s apart at most
		{value: "b", sent: ms(0), handed: ms(0), at: ms(10)},
	}
	if got := provenMostInWindow(recs, "a", time.Second); got != 2 {
		t.Errorf("most of a in 1 s: %d; want 2 (the first two, or the last two)", got)
	}
	recs[0].handed = 0 // started with the sending: proves less
	recs[2].at = ms(1100)
	if got := provenMostInWindow(recs, "a", time.Second); got != 2 {
		t.Errorf("most of a in 1 s: %d; want 2", got)
	}
	recs[0].handed, recs[0].sent = ms(150), ms(150)
	recs[2].at = ms(1140)
	if got := provenMostInWindow(recs, "a", time.Second); got != 3 {
		t.Errorf("most of a in 1 s: %d; want 3 (990 ms from the first start to the last arrival)", got)
	}
}

// TestPossibleMostInWindow: a chunk may share a window with another when their intervals
// (start, arrival) come within the window's length; the upper bound counts those.
func TestPossibleMostInWindow(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	recs := []handout{
		{value: "a", handed: ms(0), at: ms(10)},
		{value: "a", handed: ms(900), at: ms(1010)}, // may be at 1 000 ms, within 1 s of the first? no: [t, t+1s) holds 10 and 1009 at most
		{value: "a", handed: ms(2500), at: ms(2600)},
		{value: "b", handed: ms(0), at: ms(1)},
	}
	if got := possibleMostInWindow(recs, "a", time.Second); got != 2 {
		t.Errorf("most of a possibly in 1 s: %d; want 2", got)
	}
	recs[1].handed = ms(1010) // only at 1 010 ms: 1 000 ms after the first's latest
	if got := possibleMostInWindow(recs, "a", time.Second); got != 1 {
		t.Errorf("most of a possibly in 1 s: %d; want 1 (1 s apart at least)", got)
	}
	if got := possibleMostInWindow(recs, "a", 2*time.Second); got != 2 {
		t.Errorf("most of a possibly in 2 s: %d; want 2", got)
	}
}
