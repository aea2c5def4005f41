package queuer

import (
	"fmt"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// TestThrottleInForceEverywhereWhenAnswered: a throttle set through one instance is in
// force on every other instance that holds shards by the time Set returns (each
// acknowledges it once loaded), not a NOTIFY's delivery and a reload later: a reserve sent
// to another instance right after the answer gets none of its chunks.
func TestThrottleInForceEverywhereWhenAnswered(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	// The setter waits as long as the acknowledgements take on a busy machine, not its 2 s:
	// the test checks that it waits for them, not how fast they come.
	q1 := startQueuerWith(t, pool, func(cfg *Config) { cfg.ThrottleAckWait = time.Minute })
	others := []*Queuer{startQueuer(t, pool), startQueuer(t, pool)}
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range append([]*Queuer{q1}, others...) {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	values := map[string]string{"company_id": "7"}
	for i := range 5 {
		value := fmt.Sprint(100 + i) // a new throttle each time: none is in force anywhere before
		values["company_id"] = value
		start := time.Now()
		if _, err := q1.Throttle(t.Context(), "company_id", value, nil, time.Minute); err != nil {
			t.Fatal(err)
		}
		for j, q := range others {
			if !q.throttle.Blocks(values, "default") {
				t.Fatalf("round %d: instance %d does not have the throttle of company_id = %s in force when Set returned (after %s)",
					i, j+2, value, time.Since(start))
			}
		}
	}
}
