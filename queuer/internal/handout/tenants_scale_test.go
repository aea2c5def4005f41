package handout

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestTenantReserveCost measures DESIGN.md §6's tenants line: over a backlog spread evenly
// over 100 tenants, a reserve (max 1, random) limited to one tenant against an unlimited
// one, p50 and p99, in two layouts: each tenant one large submission (the tenant's few
// submissions are scanned one by one), and each tenant many small ones (the scan of the
// whole backlog filtered by tenant, which reads about 100 rows per chunk it finds). It
// fails when the limited p50 is more than 2× the unlimited one. Set OPSQ_TENANT_BENCH to
// the number of chunks (10000000 is the design's; the test is skipped without it: loading
// the backlog takes minutes).
func TestTenantReserveCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("OPSQ_TENANT_BENCH"))
	if n == 0 {
		t.Skip("set OPSQ_TENANT_BENCH=<chunks> to measure (10000000 is the design's)")
	}
	const tenants = 100
	for _, layout := range []struct {
		name string
		subs int // submissions per tenant
	}{{"one submission per tenant", 1}, {"many submissions per tenant", 200}} {
		t.Run(layout.name, func(t *testing.T) {
			ctx := t.Context()
			pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			e := startEngine(t, pool)
			per := n / tenants / layout.subs
			chunks := make([][]byte, per)
			for i := range chunks {
				chunks[i] = []byte("x")
			}
			count := int64(tenants * layout.subs)
			at := func(i int64) submissions.SmallSubmission {
				// Interleaved: tenant i%100, so that every tenant's submissions are spread
				// over the ids, as over time.
				return submissions.SmallSubmission{ID: 1<<40 + i, Tenant: fmt.Sprintf("t%02d", i%tenants), Chunks: chunks}
			}
			start := time.Now()
			if err := submissions.SubmitMany(ctx, pool, count, at, nil); err != nil {
				t.Fatal(err)
			}
			// And a tenant whose chunks are rare: 100 of them.
			rare := func(int64) submissions.SmallSubmission {
				return submissions.SmallSubmission{ID: 1 << 41, Tenant: "rare", Chunks: chunks[:min(per, 100)]}
			}
			if err := submissions.SubmitMany(ctx, pool, 1, rare, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "ANALYZE opsq.chunks; ANALYZE opsq.submissions; ANALYZE opsq.strategic_metadata"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d chunks in %d submissions loaded in %s", count*int64(per), count, time.Since(start).Round(time.Millisecond))
			measure := func(tenants []string, reserves int) (p50, p99 time.Duration) {
				var took []time.Duration
				for range reserves {
					begin := time.Now()
					got, err := e.path.Reserve(ctx, Request{Max: 1, Strategy: strategy.Node{Kind: strategy.Random}, Lease: time.Hour, Tenants: tenants})
					took = append(took, time.Since(begin))
					if err != nil || len(got) != 1 {
						t.Fatalf("reserve within %v: %d chunks, %v", tenants, len(got), err)
					}
				}
				slices.Sort(took)
				return took[len(took)/2], took[len(took)*99/100]
			}
			measure(nil, 1000) // warm the plans and the caches
			measure([]string{"t07"}, 1000)
			all50, all99 := measure(nil, 1000)
			one50, one99 := measure([]string{"t07"}, 1000)
			rare50, rare99 := measure([]string{"rare"}, min(per, 100))
			t.Logf("unlimited: p50 %s, p99 %s; limited to 1 of %d tenants: p50 %s, p99 %s (%.2f×); to a tenant with 100 chunks: p50 %s, p99 %s",
				all50, all99, tenants, one50, one99, float64(one50)/float64(all50), rare50, rare99)
			if one50 > 2*all50 {
				t.Errorf("limited to one tenant, reserve p50 is %s; want within 2× of the unlimited %s", one50, all50)
			}
			if rare50 > 2*all50+time.Millisecond {
				t.Errorf("limited to a tenant with 100 chunks, reserve p50 is %s; want about the unlimited %s", rare50, all50)
			}
		})
	}
}
