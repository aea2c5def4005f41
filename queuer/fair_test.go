package queuer

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// companyOf is the company of a chunk's strategic metadata ({"company": …}). Safe to
// call from the consumers' goroutines.
func companyOf(t *testing.T, c Chunk) string {
	t.Helper()
	var m struct{ Company string }
	if err := json.Unmarshal(c.StrategicMetadata, &m); err != nil {
		t.Error(err)
	}
	return m.Company
}

// fairReserve reserves n chunks in requests of 1 to 4 with tree and counts them by
// company; it stops early when a reserve finds nothing.
func fairReserve(t *testing.T, q *Queuer, tree string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	s := parseStrategy(t, tree)
	for taken, i := 0, 0; taken < n; i++ {
		chunks := reserveN(t, q, ReserveRequest{Max: min(1+i%4, n-taken), Strategy: s, Lease: time.Minute})
		if len(chunks) == 0 {
			break
		}
		for _, c := range chunks {
			got[companyOf(t, c)]++
		}
		taken += len(chunks)
	}
	return got
}

// TestWeightedFairShares: with acme (3) and globex (1) both backlogged, 400 chunks go
// 3:1 within ±10 %; initech, named with weight 5 but with nothing to do, takes nothing
// and its share goes to the others; hooli, a value the weights do not name (default 1)
// that arrives late, is served at once, and at its share.
func TestWeightedFairShares(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 600, sm(`{"company": "acme"}`))
	submitN(t, q, 600, sm(`{"company": "globex"}`))
	const tree = `weighted_fair(company, {acme: 3, globex: 1, initech: 5}, 1, random)`

	got := fairReserve(t, q, tree, 400)
	t.Logf("first 400: %v", got)
	if got["initech"] != 0 {
		t.Errorf("initech, with nothing to do, got %d chunks; want 0", got["initech"])
	}
	if got["acme"]+got["globex"] != 400 {
		t.Errorf("got %d chunks of acme and globex; want 400 (initech's share goes to them)", got["acme"]+got["globex"])
	}
	if r := float64(got["acme"]) / float64(max(got["globex"], 1)); r < 2.7 || r > 3.3 {
		t.Errorf("acme:globex = %d:%d = %.2f; want 3 ± 10%%", got["acme"], got["globex"], r)
	}

	submitN(t, q, 100, sm(`{"company": "hooli"}`))
	first := fairReserve(t, q, tree, 10)
	if first["hooli"] == 0 {
		t.Errorf("hooli, arriving late, got nothing of the next 10 chunks (%v); want it served at once", first)
	}
	got = fairReserve(t, q, tree, 200)
	t.Logf("200 after hooli arrived: %v", got)
	// Shares 3:1:1 of 200: acme 120, globex 40, hooli 40, each within ±10 %.
	for company, want := range map[string]float64{"acme": 120, "globex": 40, "hooli": 40} {
		if n := float64(got[company]); n < want*0.9 || n > want*1.1 {
			t.Errorf("%s got %d of 200 chunks; want %.0f ± 10%%", company, got[company], want)
		}
	}
}

// TestWeightedFairAlone: a value alone takes everything, whatever its weight.
func TestWeightedFairAlone(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 50, sm(`{"company": "globex"}`))
	got := fairReserve(t, q, `weighted_fair(company, {acme: 3, globex: 1}, 1, oldest_first)`, 60)
	if got["globex"] != 50 {
		t.Errorf("globex alone got %d chunks; want all 50", got["globex"])
	}
}

// TestWeightedFairAcrossInstances runs 3 instances on one database and 12 consumers
// spread unevenly over them (6, 4 and 2): each instance runs its own ring, and since every
// instance holds a slice of every submission, the 600 chunks handed out together still go
// 3:1 within ±10 %.
func TestWeightedFairAcrossInstances(t *testing.T) {
	t.Parallel()
	q1, pool := setup(t)
	instances := []*Queuer{q1, startQueuer(t, pool), startQueuer(t, pool)}
	submitN(t, q1, 2000, sm(`{"company": "acme"}`))
	submitN(t, q1, 2000, sm(`{"company": "globex"}`))
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range instances {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	tree := parseStrategy(t, `weighted_fair(company, {acme: 3, globex: 1}, 1, random)`)
	var mu sync.Mutex
	got := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	for i := range 12 {
		q := instances[[]int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2}[i]]
		wg.Go(func() {
			for {
				mu.Lock()
				done := total >= 600
				mu.Unlock()
				if done || t.Failed() {
					return
				}
				chunks, err := q.Reserve(t.Context(), ReserveRequest{Max: 1 + i%3, Strategy: tree, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				items := make([]Completion, len(chunks))
				mu.Lock()
				for j, c := range chunks {
					got[companyOf(t, c)]++
					items[j] = Completion{Token: c.Token}
				}
				total += len(chunks)
				mu.Unlock()
				if _, err := q.Complete(t.Context(), items); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("handed out: %v", got)
	if r := float64(got["acme"]) / float64(max(got["globex"], 1)); r < 2.7 || r > 3.3 {
		t.Errorf("acme:globex = %d:%d = %.2f across 3 instances; want 3 ± 10%%", got["acme"], got["globex"], r)
	}
}
