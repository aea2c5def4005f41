package pgtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/migrations"
)

// pollEvery is how often WaitFor asks its condition again.
const pollEvery = 5 * time.Millisecond

// WaitFor asks cond every few milliseconds until it returns "" (the condition holds), and
// returns how long that took. cond returns why the condition does not hold yet; when it
// still does not after timeout, the test fails with what, the timeout and that reason.
// Call it from the test's goroutine. Pick a timeout in seconds, which a busy CI machine
// meets: a passing test does not wait it out.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		why := cond()
		if why == "" {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(pollEvery)
	}
}

// Eventually is WaitFor for a condition that gives no reason: the test fails with what
// and the timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return WaitFor(t, timeout, what, func() string {
		if cond() {
			return ""
		}
		return "still false"
	})
}

// Logger returns a logger that writes records of level and above to the test's output,
// so that they show beside the test's own log when it fails or runs with -v.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// Timings are the cluster-wide timing settings (opsq.settings) a test sets, most often
// far shorter than the defaults so that claims move in seconds. A zero field leaves its
// setting as it is.
type Timings struct {
	Renew     time.Duration // claim_renew_interval
	Soft      time.Duration // claim_soft_expiry
	Hard      time.Duration // claim_hard_expiry
	Heartbeat time.Duration // instance_heartbeat_timeout
	Drain     time.Duration // drain_timeout
}

// SetTimings writes tm's non-zero fields to opsq.settings of pool's database, in one
// statement (the settings are checked against each other). Instances started afterwards
// run with them.
func SetTimings(t testing.TB, pool *pgxpool.Pool, tm Timings) {
	t.Helper()
	var keys, values []string
	for _, s := range []struct {
		key string
		d   time.Duration
	}{
		{"claim_renew_interval", tm.Renew},
		{"claim_soft_expiry", tm.Soft},
		{"claim_hard_expiry", tm.Hard},
		{"instance_heartbeat_timeout", tm.Heartbeat},
		{"drain_timeout", tm.Drain},
	} {
		if s.d != 0 {
			keys, values = append(keys, s.key), append(values, s.d.String())
		}
	}
	const update = `UPDATE opsq.settings AS s SET value = v.value
		FROM unnest($1::text[], $2::text[]) AS v (key, value) WHERE s.key = v.key`
	if _, err := pool.Exec(context.Background(), update, keys, values); err != nil {
		t.Fatalf("pgtest: setting the timings %+v: %v", tm, err)
	}
}

// Count runs a query that returns one number, such as a count(*), and returns it.
func Count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// CompleteSubmission finishes submission id behind the engine's back, the way completing
// every chunk would leave it: every chunk moves to completed_batches with output "out-<i>",
// the submission to submissions_completed. For tests of what reads finished submissions
// (status, results, retention) without consuming them.
func CompleteSubmission(t testing.TB, pool *pgxpool.Pool, id int64) {
	t.Helper()
	CompleteSubmissionWith(t, pool, id, "convert_to('out-' || chunk_index, 'UTF8')")
}

// CompleteSubmissionWith is CompleteSubmission with each chunk's output given by output, an
// SQL expression over chunk_index (a test's own text, never a caller's input). The outputs
// go a thousand chunks to a row, as the completer writes them.
func CompleteSubmissionWith(t testing.TB, pool *pgxpool.Pool, id int64, output string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
WITH c AS (DELETE FROM opsq.chunks WHERE submission_id = $1 RETURNING submission_id, chunk_index),
     i AS (INSERT INTO opsq.completed_batches (submission_id, first_index, chunk_indexes, outputs)
           SELECT submission_id, min(chunk_index), array_agg(chunk_index), array_agg(`+output+`)
           FROM c GROUP BY submission_id, chunk_index / 1000),
     s AS (DELETE FROM opsq.submissions WHERE id = $1 RETURNING *)
INSERT INTO opsq.submissions_completed
      (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata, prefix, created_at)
SELECT id, chunks_total, chunks_total, priority, max_retries, metadata, strategic_metadata, prefix, created_at FROM s`, id)
	if err != nil {
		t.Fatalf("pgtest: completing submission %d: %v", id, err)
	}
}

// Migrator returns a migrator of the database at dbURL and a connection to it, both closed
// when t ends: for the tests that take migrations down and up again.
func Migrator(t testing.TB, dbURL string) (*migrations.Migrator, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	m, err := migrations.New(ctx, dbURL, migrations.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("pgtest: a migrator of %s: %v", dbURL, err)
	}
	t.Cleanup(func() { m.Close() })
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", dbURL, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return m, conn
}
