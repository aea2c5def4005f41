package sql_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestRateTake: a bucket starts full, gives whole tokens up to its level, takes back
// unused ones up to its capacity, and refills at its rate; many takers at once, each
// asking for one token at a time for a second, get at most rate × t + capacity together.
func TestRateTake(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	take := func(value string, want, returned int) int {
		t.Helper()
		got, err := db.RateTake(t.Context(), opsqsql.RateTakeParams{Key: "company_id", Value: value, PerSecond: 10, Capacity: 5, Want: want, Returned: returned})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i, step := range []struct{ want, returned, got int }{
		{3, 0, 3}, {3, 0, 2}, {3, 0, 0}, // full, then drained (a few ms refill no whole token)
		{1, 2, 1}, {5, 10, 5}, // returns, capped at the capacity
	} {
		if got := take("1", step.want, step.returned); got != step.got {
			t.Fatalf("take %d (want %d, returned %d): %d tokens; want %d", i, step.want, step.returned, got, step.got)
		}
	}
	if got := take(`"1"`, 5, 0); got != 5 {
		t.Errorf("the string \"1\": %d tokens; want a bucket of its own, full (5)", got)
	}

	// Drained: from now on, only the refill.
	var total atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for time.Since(start) < time.Second {
				got, err := db.RateTake(t.Context(), opsqsql.RateTakeParams{Key: "company_id", Value: "1", PerSecond: 10, Capacity: 5, Want: 1})
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(int64(got))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if most := int64(10*elapsed.Seconds()) + 1; total.Load() > most {
		t.Errorf("6 takers over %s of a drained bucket at 10/s: %d tokens; want at most %d", elapsed, total.Load(), most)
	}
	if total.Load() < 5 {
		t.Errorf("6 takers over %s of a drained bucket at 10/s: %d tokens; want the refill, about 10", elapsed, total.Load())
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.rate_buckets"); n != 2 {
		t.Errorf("%d buckets; want 2", n)
	}
}
