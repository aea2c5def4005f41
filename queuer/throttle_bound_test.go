package queuer

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// TestThrottleFloodKeepsOtherTenantsThrottles (issue 31, finding 5): a consumer of tenant
// tb that sets throttle after throttle (more than an instance used to cache, 10 000, each
// ending after tenant ta's) is refused past its tenant's bound, and ta's throttle stays in
// force on every instance: none of ta's throttled chunks is handed out.
func TestThrottleFloodKeepsOtherTenantsThrottles(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	q1 := startQueuer(t, pool)
	others := []*Queuer{startQueuer(t, pool), startQueuer(t, pool)}
	all := append([]*Queuer{q1}, others...)
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range all {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	ctx := t.Context()
	id := submitN(t, q1, 8, NewSubmission{Tenant: "ta", StrategicMetadata: json.RawMessage(`{"company_id": 7}`)})
	if _, err := q1.Throttle(ctx, "company_id", "7", []string{"ta"}, 20*time.Minute); err != nil {
		t.Fatal(err)
	}

	// tb's flood: one-hour throttles of values of its own, 8 at a time, until refused.
	const flood = 10_300
	var next, set atomic.Int64
	var refused error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > flood {
					return
				}
				_, err := q1.Throttle(ctx, "company_id", fmt.Sprint(1_000_000+i), []string{"tb"}, time.Hour)
				if err != nil {
					once.Do(func() { refused = err })
					next.Store(flood) // stop the others
					return
				}
				set.Add(1)
			}
		})
	}
	wg.Wait()
	var limit *ThrottleLimitError
	switch {
	case refused == nil:
		t.Errorf("tb set %d throttles, all accepted; want a refusal at its tenant's bound (%d)", set.Load(), MaxThrottlesPerTenant)
	case !errors.As(refused, &limit) || limit.Scope != "tenant" || limit.Name != "tb" || limit.Max != MaxThrottlesPerTenant:
		t.Fatalf("tb's throttle after %d: %v; want a ThrottleLimitError of tenant tb at %d", set.Load(), refused, MaxThrottlesPerTenant)
	case set.Load() != MaxThrottlesPerTenant:
		t.Errorf("tb set %d throttles before the refusal; want %d", set.Load(), MaxThrottlesPerTenant)
	}

	// Every instance reads the throttles in force again (as it does every 5 s), and
	// holds ta's back: none of its chunks is handed out, through any instance.
	for i, q := range all {
		if err := q.throttle.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if !q.throttle.Blocks(map[string]string{"company_id": "7"}, "ta") {
			t.Errorf("instance %d: ta's throttle of company_id = 7 is not in force after tb's flood", i+1)
		}
		if got := reserveN(t, q, ReserveRequest{Max: 8, Tenants: []string{"ta"}}); len(got) > 0 {
			t.Errorf("instance %d handed out %d of ta's throttled chunks (submission %d); want none", i+1, len(got), id)
		}
	}
}
