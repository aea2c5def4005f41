package claims

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// target is how many shards an instance should hold: ceil(enabled / live) — 64 shards over
// 3 live instances give 22/22/20 — or 0 for an instance that is draining.
func target(enabled, live int, draining bool) int {
	if draining {
		return 0
	}
	live = max(live, 1) // this instance heartbeated just before, so it counts itself
	return (enabled + live - 1) / live
}

// chooseSurplus picks the n active shards to drain: those off the home node first (home.go;
// isHome is false for all without a home), then those with the least in flight, which are
// released soonest; ties at random, so that the same shards do not always move.
func chooseSurplus(active []heldShard, n int, isHome func(int) bool) []int {
	return choose(active, n, func(a, b heldShard) int {
		if c := cmp.Compare(b2i(isHome(a.shard)), b2i(isHome(b.shard))); c != 0 {
			return c
		}
		return cmp.Compare(a.inflight, b.inflight)
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// chooseReactivate picks up to n draining shards to serve again when the target rose: those
// with the most in flight, which would take longest to release.
func chooseReactivate(draining []heldShard, n int) []int {
	return choose(draining, n, func(a, b heldShard) int { return cmp.Compare(b.inflight, a.inflight) })
}

func choose(hs []heldShard, n int, order func(a, b heldShard) int) []int {
	hs = slices.Clone(hs)
	rand.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	slices.SortStableFunc(hs, order)
	return heldShards(hs[:min(n, len(hs))])
}
