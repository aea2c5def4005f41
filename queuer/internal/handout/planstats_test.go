package handout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
)

// TestPlanStatsRefreshesChunksVacuumedMidIngest sets the trap of a large ingest: rows
// COPYed into the chunk table in a transaction that a VACUUM visits before it commits,
// which leaves the table's reltuples at 0 with its pages and rows there. With autovacuum
// off for the table, only the instance's planner-statistics job can mend it, and must
// within a few of its turns.
func TestPlanStatsRefreshesChunksVacuumedMidIngest(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	const shard, rows = 5, 20_000
	const table = "opsq.chunks"
	if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	ingest, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Release()
	tx, err := ingest.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, input)
		SELECT 1, i, $1, i, 'x' FROM generate_series(0, $2 - 1) i`, shard, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM "+table); err != nil { // the ingest still open
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var reltuples float64
	var live int64
	pgtest.WaitFor(t, 10*time.Second, "the inserts counted as live rows", func() string {
		if err := pool.QueryRow(ctx, `SELECT c.reltuples, s.n_live_tup FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
			WHERE c.oid = $1::regclass`, table).Scan(&reltuples, &live); err != nil {
			t.Fatal(err)
		}
		if live < rows {
			return fmt.Sprintf("n_live_tup %d", live)
		}
		return ""
	})
	if reltuples != 0 {
		// The job may already have run; what matters is that the trap was set before.
		t.Logf("reltuples %v when the live rows were counted (the job may have been quicker)", reltuples)
	}
	pgtest.WaitFor(t, 30*time.Second, "the table's reltuples near its rows", func() string {
		if err := pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = $1::regclass", table).Scan(&reltuples); err != nil {
			t.Fatal(err)
		}
		if reltuples < rows/2 {
			return fmt.Sprintf("reltuples %v with %d live rows", reltuples, live)
		}
		return ""
	})
	if q.path.planStats.refresh(ctx) {
		t.Error("a refresh right after found the table still stale; want it mended")
	}
}

// TestPlanStatsAfterLargeIngest: a submit of more chunks than the planner believes the
// chunk table holds ANALYZEs it before it answers, so that the table's reltuples counts
// them the moment the submit returns, with autovacuum off for the table and before the
// cumulative statistics can have counted the rows (the job waits for those). A small
// submit does not.
func TestPlanStatsAfterLargeIngest(t *testing.T) {
	t.Parallel()
	e, pool := setup(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "ALTER TABLE opsq.chunks SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	reltuples := func() float64 {
		var r float64
		if err := pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'opsq.chunks'::regclass").Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := reltuples()
	if before >= planStatsMinRows/2 {
		t.Fatalf("reltuples %v before any submit; want the planner to believe the table small", before)
	}
	if _, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/small/", ChunkCount: planStatsMinRows - 1}, nil); err != nil {
		t.Fatal(err)
	}
	if got := reltuples(); got != before {
		t.Errorf("reltuples %v after a submit of %d chunks, was %v; want a small submit left to the job", got, planStatsMinRows-1, before)
	}
	const n = 3 * planStatsMinRows
	if _, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/large/", ChunkCount: n}, nil); err != nil {
		t.Fatal(err)
	}
	if got := reltuples(); got < n {
		t.Errorf("reltuples %v the moment a submit of %d chunks (and %d before) returned; want them counted", got, n, planStatsMinRows-1)
	}
}
