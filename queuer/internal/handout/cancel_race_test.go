package handout

import (
	"sync/atomic"
	"testing"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

// TestCancelThenRetryAnswersCancelled (issue 31, finding 13): a retry of the unfinished
// chunks that lands the instant after a cancel commits (submissions.Config.AfterCancel)
// reopens the submission, and says so; the cancel still answers what it did, the
// submission cancelled, not the in_progress the retry made.
func TestCancelThenRetryAnswersCancelled(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var target atomic.Int64
	var e *engine
	var retried submissions.Status
	var retryErr error
	e = startEngineWith(t, pool, func(c *submissions.Config) {
		c.AfterCancel = func(id int64) {
			if target.CompareAndSwap(id, 0) {
				retried, retryErr = e.subs.Retry(t.Context(), id, submissions.RetryOptions{Unfinished: true})
			}
		}
	})
	id := submitN(t, e, 3, submissions.NewSubmission{})
	target.Store(id)
	st, err := e.Cancel(t.Context(), id)
	if target.Load() != 0 {
		t.Fatal("the cancel called no AfterCancel")
	}
	if retryErr != nil || retried.State != opsqtype.StateInProgress {
		t.Fatalf("the retry right after the cancel: %s, %v; want in progress", retried.State, retryErr)
	}
	if err != nil || st.State != opsqtype.StateCancelled || st.ChunksSkipped != 3 {
		t.Errorf("the cancel answered %s with %d skipped, %v; want cancelled with 3 skipped (what it did)", st.State, st.ChunksSkipped, err)
	}
}
