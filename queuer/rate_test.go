package queuer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// TestRateLimitAcrossInstances runs 3 instances on one database and 24 consumers, each
// waiting up to 5 s for work, against rate_limit(company_id, 20/s, 5, random) for 3 s: each
// company's chunks are handed out, cluster-wide, never faster than 20 per second after a
// burst of 5 (with a margin for the time a reserve takes to answer), close to that rate,
// and chunks without the key are not limited at all.
func TestRateLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	q1, pool := setup(t)
	instances := []*Queuer{q1, startQueuer(t, pool), startQueuer(t, pool)}
	const perSecond, burst, run = 20, 5, 3 * time.Second
	for c := range 2 {
		submitN(t, q1, 300, sm(fmt.Sprintf(`{"company_id": %d}`, c)))
	}
	free := submitN(t, q1, 60, sm(`{"mode": "full"}`))
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range instances {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	tree := parseStrategy(t, fmt.Sprintf("rate_limit(company_id, %d/s, %d, random)", perSecond, burst))
	var mu sync.Mutex
	handedOut := map[string][]time.Duration{} // company -> when each chunk was handed out
	freeDone := 0
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), run)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 24 {
		q := instances[i%len(instances)]
		wg.Go(func() {
			for ctx.Err() == nil {
				chunks, err := q.Reserve(ctx, ReserveRequest{Max: 1 + i%3, Strategy: tree, Lease: time.Minute, Wait: 5 * time.Second})
				at := time.Since(start)
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				items := make([]Completion, len(chunks))
				mu.Lock()
				for j, c := range chunks {
					if c.SubmissionID == free {
						freeDone++
					} else {
						k := string(c.StrategicMetadata)
						handedOut[k] = append(handedOut[k], at)
					}
					items[j] = Completion{Token: c.Token}
				}
				mu.Unlock()
				if _, err := q.Complete(context.WithoutCancel(ctx), items); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for company, times := range handedOut {
		t.Logf("company %s: %d chunks in %s", company, len(times), elapsed)
	}
	if freeDone != 60 {
		t.Errorf("%d chunks without company_id handed out; want all 60 (not limited)", freeDone)
	}
	if len(handedOut) != 2 {
		t.Fatalf("chunks of %d companies handed out; want 2", len(handedOut))
	}
	// A chunk is timed when its reserve answered, up to a reserve's time after its token
	// was taken: the margin.
	const margin = 250 * time.Millisecond
	for company, times := range handedOut {
		slices.Sort(times)
		for _, w := range []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second} {
			most := int(perSecond*(w+margin).Seconds()) + burst
			for i := range times {
				j := i
				for j < len(times) && times[j]-times[i] < w {
					j++
				}
				if n := j - i; n > most {
					t.Fatalf("company %s: %d chunks handed out within %s from %s; want at most %d (%d/s, burst %d)",
						company, n, w, times[i], most, perSecond, burst)
				}
			}
		}
		if most := int(perSecond*elapsed.Seconds()) + burst; len(times) > most {
			t.Errorf("company %s: %d chunks in %s; want at most %d", company, len(times), elapsed, most)
		}
		if least := int(0.6 * perSecond * run.Seconds()); len(times) < least {
			t.Errorf("company %s: %d chunks in %s; want about %d/s, at least %d ",
				company, len(times), elapsed, perSecond, least)
		}
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.rate_buckets"); n != 2 {
		t.Errorf("%d rate buckets; want one per company, 2", n)
	}
}

// TestRateLimitWakesWaitingReserve: a reserve that waits while its value's bucket is empty
// is answered when the next token is due, not at the end of its wait.
func TestRateLimitWakesWaitingReserve(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 10, sm(`{"company_id": 1}`))
	tree := parseStrategy(t, "rate_limit(company_id, 2/s, 1, oldest_first)")
	if got := reserveN(t, q, ReserveRequest{Max: 5, Strategy: tree}); len(got) != 1 {
		t.Fatalf("first reserve: %d chunks; want the burst, 1", len(got))
	}
	if got := reserveN(t, q, ReserveRequest{Max: 5, Strategy: tree}); len(got) != 0 {
		t.Fatalf("reserve right after the burst: %d chunks; want none (2/s)", len(got))
	}
	start := time.Now()
	got := reserveN(t, q, ReserveRequest{Max: 5, Strategy: tree, Wait: 10 * time.Second})
	if took := time.Since(start); len(got) != 1 || took > 5*time.Second {
		t.Fatalf("a waiting reserve: %d chunks after %s; want 1 within about 0.5s (the next token), not at the end of its 10s wait", len(got), took)
	}
}
