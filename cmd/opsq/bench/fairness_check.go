package bench

import (
	"math"
	"slices"
	"time"
)

// The pure part of the fairness workload (fairness.go): what a consumer saw of each chunk
// handed to it, and the figures computed from those records.

// handout is one chunk as a consumer of the fairness workload saw it: the value of its
// submission's strategic key ("" for none), when the reserve that got it was sent, and
// when its answer arrived, both counted from the phase's start. The chunk was handed out
// between the two; the workload's windows count it at its arrival.
type handout struct {
	value    string
	sent, at time.Duration
	// handed is when the instance handed it out (its lease's expiry less the lease, on the
	// instance's clock: the same host's as the bench's in the bench).
	handed time.Duration
}

// handOutExcess checks sorted hand-out times against a token bucket's bound, per_second × t
// + burst in any window of t seconds: chunks i to j fit in a window as long as their span,
// so it returns the most chunks any such run has beyond per_second × span + burst (0 or
// less: none).
func handOutExcess(sorted []time.Duration, perSecond float64, burst int) float64 {
	worst := -float64(burst)
	for i := range sorted {
		for j := i; j < len(sorted); j++ {
			worst = max(worst, float64(j-i+1)-(perSecond*(sorted[j]-sorted[i]).Seconds()+float64(burst)))
		}
	}
	return worst
}

// handOuts is the hand-out times of value's chunks in recs, sorted.
func handOuts(recs []handout, value string) []time.Duration {
	return timesOf(recs, value, func(h handout) time.Duration { return h.handed })
}

// windowCounts counts the chunks of each value that arrived in [from, to).
func windowCounts(recs []handout, from, to time.Duration) map[string]int {
	counts := map[string]int{}
	for _, h := range recs {
		if h.at >= from && h.at < to {
			counts[h.value]++
		}
	}
	return counts
}

// shareDeviation is the worst relative deviation, in percent, of the share of each value
// of weights among the chunks of counts from its weight's share of them all:
// |share ÷ (weight ÷ Σ weights) − 1| × 100. Chunks of values weights does not name are
// left out of the total. It returns 100 when none of the values had a chunk.
func shareDeviation(counts map[string]int, weights map[string]int) float64 {
	total, sum := 0, 0
	for v, w := range weights {
		total += counts[v]
		sum += w
	}
	if total == 0 || sum == 0 {
		return 100
	}
	worst := 0.0
	for v, w := range weights {
		share, want := float64(counts[v])/float64(total), float64(w)/float64(sum)
		worst = max(worst, math.Abs(share/want-1)*100)
	}
	return worst
}

// arrivals returns the arrival times of value's chunks, in order.
func arrivals(recs []handout, value string) []time.Duration {
	return timesOf(recs, value, func(h handout) time.Duration { return h.at })
}

// timesOf returns one time of each of value's chunks in recs (which), sorted.
func timesOf(recs []handout, value string, which func(handout) time.Duration) []time.Duration {
	var at []time.Duration
	for _, h := range recs {
		if h.value == value {
			at = append(at, which(h))
		}
	}
	slices.Sort(at)
	return at
}

// maxInWindow is the most arrivals (sorted) in any window [t, t + w).
func maxInWindow(sorted []time.Duration, w time.Duration) int {
	most, j := 0, 0
	for i := range sorted {
		for sorted[i]-sorted[j] >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// rateExcess checks value's chunks in recs against a token bucket's bound, per_second × t
// + burst chunks in any window of t seconds, by what proves when each was handed out: at
// its answer's arrival or before, and after both its reserve's sending and the start of
// the instance's run that took it (handed). Chunks i to j (by arrival) were handed out
// within the last one's arrival less the earliest of those starts among them, so more than
// per_second × that + burst of them is a proven breach. It returns how many chunks the
// worst run of them has beyond its bound; 0 or less: none was beyond it.
func rateExcess(recs []handout, value string, perSecond float64, burst int) float64 {
	worst := -float64(burst)
	provenRuns(recs, value, func(n int, span time.Duration) {
		worst = max(worst, float64(n)-(perSecond*span.Seconds()+float64(burst)))
	})
	return worst
}

// provenMostInWindow is the most of value's chunks in recs proven handed out within one
// window of w: n chunks whose latest arrival less their earliest start (rateExcess) is
// less than w.
func provenMostInWindow(recs []handout, value string, w time.Duration) int {
	most := 0
	provenRuns(recs, value, func(n int, span time.Duration) {
		if span < w {
			most = max(most, n)
		}
	})
	return most
}

// possibleMostInWindow is the most of value's chunks in recs that may have been handed out
// within one window of w: each was handed out somewhere in [start, arrival] (the later of
// its reserve's sending and its run's start, and its answer's arrival), and a window [t,
// t + w) may hold it when t lies in (start - w, arrival]; the most such intervals over one
// t. It bounds the truth from above, as provenMostInWindow does from below.
func possibleMostInWindow(recs []handout, value string, w time.Duration) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	var edges []edge
	for _, h := range recs {
		if h.value == value {
			edges = append(edges, edge{max(h.sent, h.handed) - w, +1}, edge{h.at, -1})
		}
	}
	// An interval that closes at x holds x; one that opens at x holds only what is after x:
	// at equal times, closes first.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// provenRuns calls run for each run of value's chunks consecutive by arrival, with its
// length and the span it was proven handed out within (rateExcess).
func provenRuns(recs []handout, value string, run func(n int, span time.Duration)) {
	var mine []handout
	for _, h := range recs {
		if h.value == value {
			mine = append(mine, h)
		}
	}
	slices.SortFunc(mine, func(a, b handout) int { return int(a.at - b.at) })
	for i := range mine {
		earliest := max(mine[i].sent, mine[i].handed)
		for j := i; j < len(mine); j++ {
			earliest = min(earliest, max(mine[j].sent, mine[j].handed))
			run(j-i+1, mine[j].at-earliest)
		}
	}
}

// throttleLeaks counts value's chunks whose reserve was sent once the throttle had
// answered (from) and that arrived before it ended (until): chunks handed out while it
// was in force.
func throttleLeaks(recs []handout, value string, from, until time.Duration) int {
	n := 0
	for _, h := range recs {
		if h.value == value && h.sent >= from && h.at < until {
			n++
		}
	}
	return n
}

// firstAfter is the arrival of value's first chunk at or after from, and whether there is
// one.
func firstAfter(recs []handout, value string, from time.Duration) (time.Duration, bool) {
	first, ok := time.Duration(math.MaxInt64), false
	for _, h := range recs {
		if h.value == value && h.at >= from && h.at < first {
			first, ok = h.at, true
		}
	}
	return first, ok
}
