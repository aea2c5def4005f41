package handout

import (
	"errors"
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

// TestRetryThenCancelAnswersInProgress (issue 31, finding 13): the other way round, a
// cancel that lands the instant after a retry commits (submissions.Config.AfterRetry)
// cancels the submission; the retry still answers what it did, the submission in
// progress, not the cancelled the cancel made.
func TestRetryThenCancelAnswersInProgress(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var target atomic.Int64
	var e *engine
	var cancelled submissions.Status
	var cancelErr error
	e = startEngineWith(t, pool, func(c *submissions.Config) {
		c.AfterRetry = func(id int64) {
			if target.CompareAndSwap(id, 0) {
				cancelled, cancelErr = e.Cancel(t.Context(), id)
			}
		}
	})
	id := submitN(t, e, 3, submissions.NewSubmission{})
	if _, err := e.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	target.Store(id)
	st, err := e.subs.Retry(t.Context(), id, submissions.RetryOptions{Unfinished: true})
	if target.Load() != 0 {
		t.Fatal("the retry called no AfterRetry")
	}
	if cancelErr != nil || cancelled.State != opsqtype.StateCancelled {
		t.Fatalf("the cancel right after the retry: %s, %v; want cancelled", cancelled.State, cancelErr)
	}
	if err != nil || st.State != opsqtype.StateInProgress || st.ChunksSkipped != 0 {
		t.Errorf("the retry answered %s with %d skipped, %v; want in progress with 0 skipped (what it did)", st.State, st.ChunksSkipped, err)
	}
}

// TestRetryKeepsThePause (issue 31, finding 13): a paused submission stays paused through
// a cancel and a retry, whether the retry comes after the cancel or wins the race between
// two of its slices: nothing of it is handed out until it is resumed, and then every chunk.
func TestRetryKeepsThePause(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 2500
	var onSlice atomic.Pointer[func(done int64)]
	pool := pgtest.NewPool(t)
	e := startEngineWith(t, pool, func(c *submissions.Config) {
		c.SliceRows = slice
		c.AfterSlice = func(done int64) {
			if f := onSlice.Load(); f != nil {
				(*f)(done)
			}
		}
	})
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		chunks int
		midway bool
	}{{"retried after the cancel", 10, false}, {"retried between two slices of the cancel", total, true}} {
		id := submitN(t, e, tc.chunks, submissions.NewSubmission{})
		if _, err := e.subs.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
		if tc.midway {
			f := func(int64) {
				onSlice.Store(nil)
				if _, err := e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: true}); err != nil {
					t.Errorf("%s: retry: %v", tc.name, err)
				}
			}
			onSlice.Store(&f)
		}
		_, err := e.Cancel(ctx, id)
		onSlice.Store(nil)
		if tc.midway != errors.Is(err, submissions.ErrRetriedWhileCancelled) || (!tc.midway && err != nil) {
			t.Fatalf("%s: cancel: %v", tc.name, err)
		}
		if !tc.midway {
			if _, err := e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: true}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := e.subs.Status(ctx, id)
		if err != nil || st.State != opsqtype.StateInProgress || !st.Paused {
			t.Fatalf("%s: %s, paused %v (%v); want in progress and still paused", tc.name, st.State, st.Paused, err)
		}
		if got := reserveN(t, e, Request{Max: 10}); len(got) != 0 {
			t.Errorf("%s: a reserve got %d chunks of the paused submission; want none", tc.name, len(got))
		}
		if _, err := e.subs.Resume(ctx, id); err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < tc.chunks {
			got := reserveN(t, e, Request{Max: 500})
			if len(got) == 0 {
				t.Fatalf("%s: %d of %d chunks handed out after the resume, then none", tc.name, n, tc.chunks)
			}
			n += len(got)
		}
	}
}
