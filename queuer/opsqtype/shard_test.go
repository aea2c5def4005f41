package opsqtype

import (
	"math/rand/v2"
	"testing"
)

func TestShardOfSpreadsEverySubmissionEvenly(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 7, 64} {
		for _, chunks := range []int{1, 5, 63, 64, 65, 1000} {
			id := rand.Int64()
			perShard := make([]int, shards)
			for i := range chunks {
				s := ShardOf(id, i, shards)
				if s < 0 || s >= shards {
					t.Fatalf("ShardOf(%d, %d, %d) = %d; want 0 ≤ shard < %d", id, i, shards, s, shards)
				}
				perShard[s]++
			}
			lo, hi := chunks, 0
			for _, n := range perShard {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Errorf("%d chunks over %d shards: per shard between %d and %d; want a difference ≤ 1", chunks, shards, lo, hi)
			}
		}
	}
}

func TestShardOfSpreadsSmallSubmissions(t *testing.T) {
	t.Parallel()
	// Consecutive snowflake ids (one-chunk submissions made in a row) must not pile up.
	perShard := make([]int, 64)
	base := int64(123456789) << 22
	for i := range int64(6400) {
		perShard[ShardOf(base+i, 0, 64)]++
	}
	for s, n := range perShard {
		if n < 50 || n > 150 {
			t.Errorf("shard %d got %d of 6400 one-chunk submissions; want about 100", s, n)
		}
	}
}

func TestRandomOrderRunsSpreadOverTheRing(t *testing.T) {
	t.Parallel()
	id := rand.Int64()
	last := map[int]int{}
	seen := map[int]bool{}
	for i := range 64 * 4096 {
		s, r := ShardOf(id, i, 64), RandomOrder(id, i, 64)
		if r < 0 || r > 0xFFFF {
			t.Fatalf("RandomOrder = %d; want a 16-bit value", r)
		}
		pos := i / 64
		if prev, ok := last[s]; ok && pos%randomRun != 0 && r != (prev+1)&0xFFFF {
			t.Fatalf("chunk %d on shard %d: random_order %d after %d; want runs of consecutive values", i, s, r, prev)
		}
		last[s] = r
		if s == 0 {
			seen[r] = true
		}
	}
	// 4096 chunks per shard in 64 runs: a big submission must reach every part of the ring,
	// so that a random cut is never far from one of its chunks.
	gap, longest := 0, 0
	for r := range 2 << 16 { // twice around, for the gap that wraps
		if seen[r&0xFFFF] {
			gap = 0
			continue
		}
		gap++
		longest = max(longest, gap)
	}
	if longest > 4096 {
		t.Errorf("a 262 144-chunk submission leaves a gap of %d positions on one shard's ring; want under 4096 (1/16 of it)", longest)
	}
}
