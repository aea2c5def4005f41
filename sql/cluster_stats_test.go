package sql_test

import (
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestClusterStatsOldestIsRunning: the oldest age of the cluster's figures is that of the
// oldest running submission, as a user means "in progress" — not a paused one, nor one
// whose not_before is ahead — counted from when it started (issue 33, point 4).
func TestClusterStatsOldestIsRunning(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	ctx := t.Context()
	age := func() time.Duration {
		t.Helper()
		r, err := db.ClusterStats(ctx, opsqsql.ClusterStatsParams{HeartbeatTimeout: "10s"})
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(r.OldestAgeSeconds * float64(time.Second))
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO opsq.submissions (id, chunks_total, max_retries, created_at, paused) VALUES
			(1, 1, 0, now() - interval '3 hours', true),    -- paused
			(2, 1, 0, now() - interval '2 hours', false),   -- scheduled: not_before ahead
			(3, 1, 0, now() - interval '90 minutes', false), -- started 10 minutes ago
			(4, 1, 0, now() - interval '5 minutes', false);  -- running, no not_before
		INSERT INTO opsq.submission_lifecycle (id, not_before) VALUES
			(2, now() + interval '1 hour'), (3, now() - interval '10 minutes')`); err != nil {
		t.Fatal(err)
	}
	if got := age(); got < 9*time.Minute || got > 11*time.Minute {
		t.Errorf("oldest age %s; want about 10m, since submission 3 started (the paused one is 3h old, the scheduled one 2h)", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE opsq.submissions SET paused = true WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	if got := age(); got < 4*time.Minute || got > 6*time.Minute {
		t.Errorf("oldest age %s with submission 3 paused; want about 5m, submission 4's", got)
	}
}
