//go:build citus

// An instance homed on a Citus worker (Config.CitusHome) reads its candidates on that
// worker: `make test-citus` (OPSQ_TEST_CITUS=1, -tags citus) runs this.

package queuer

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// The one instance, homed on worker 1, hands out every chunk of a submission once (those
// of worker 2's shards too: the worker plans the query, Citus's query from any node), and
// its candidate queries ran on connections of its own to worker 1 (handout.Config.ScanNode),
// not through the coordinator: worker 1 has client sessions that are not Citus's.
func TestHomedInstanceScansOnItsWorker(t *testing.T) {
	if !pgtest.Citus() {
		t.Fatalf("built with -tags citus but %s is not 1: run make test-citus", pgtest.EnvCitus)
	}
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	workers := pgtest.CitusWorkerURLs(t, pool.Config().ConnString())
	if len(workers) == 0 {
		t.Fatal("no Citus worker: the tests run on one PostgreSQL")
	}
	wcfg, err := pgx.ParseConfig(workers[0])
	if err != nil {
		t.Fatal(err)
	}
	home := fmt.Sprintf("%s:%d", wcfg.Host, wcfg.Port)
	rows, err := opsqsql.New(pool).ClaimsPlacements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onHome := 0
	for _, r := range rows {
		if r.Node == home {
			onHome++
		}
	}
	if onHome == 0 {
		t.Fatalf("no shard placed on %s (placements %v)", home, rows)
	}

	worker, err := pgx.ConnectConfig(ctx, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close(ctx)
	const instanceSessions = `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'
		  AND pid <> pg_backend_pid() AND application_name NOT LIKE 'citus%'`
	var before int
	if err := worker.QueryRow(ctx, instanceSessions).Scan(&before); err != nil {
		t.Fatal(err)
	}

	q := startQueuerWith(t, pool, func(c *Config) { c.CitusHome = home })
	pgtest.Eventually(t, 60*time.Second, "the homed instance holds shards", func() bool { return len(q.claims.Reservable()) > 0 })
	id := submitN(t, q, 400, NewSubmission{})
	seen := map[int32]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 400 && time.Now().Before(deadline) {
		for _, c := range reserveN(t, q, ReserveRequest{Max: 50, Wait: time.Second}) {
			if c.SubmissionID != id || seen[c.ChunkIndex] {
				t.Fatalf("chunk %d/%d handed out twice or not of submission %d", c.SubmissionID, c.ChunkIndex, id)
			}
			seen[c.ChunkIndex] = true
		}
	}
	if len(seen) != 400 {
		t.Fatalf("%d of 400 chunks handed out in 60 s", len(seen))
	}
	var after int
	if err := worker.QueryRow(ctx, instanceSessions).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("worker %s has %d client sessions not Citus's own after the homed instance reserved, %d before: its candidate queries did not run there", home, after, before)
	}
}
