package handout

import (
	"errors"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestRunTimeoutIsNamed (issue 31, finding 8): a reserve whose candidate reads outlast the
// shared run's bound — here, behind a lock that holds opsq.chunks — gets ErrRunTimeout,
// which the API answers 503 with Retry-After, not an unnamed error (500); once the
// database answers again, the same reserve gets its chunks.
func TestRunTimeoutIsNamed(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	e := startEngine(t, pool)
	e.path.cfg.RunTimeout = 300 * time.Millisecond // before any run: no run reads it yet
	submitN(t, e, 3, submissions.NewSubmission{})

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE opsq.chunks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = e.Reserve(t.Context(), Request{Max: 3, Lease: time.Minute, Strategy: strategy.Default})
	if !errors.Is(err, ErrRunTimeout) {
		t.Errorf("a reserve whose candidate read waits past the run's bound: %v; want ErrRunTimeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("it answered after %s; want about the bound, 300ms", took.Round(time.Millisecond))
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := reserveN(t, e, Request{Max: 3}); len(got) != 3 {
		t.Errorf("after the lock: %d chunks; want 3", len(got))
	}
}
