package handout

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestCancelSliced: a cancel of a submission with more pending chunks than a slice moves
// them by slices, one transaction each. Between two slices the submission is cancelled
// already: no reserve hands out any of its chunks (the other submission's go on being
// handed out), and a completion or a fail of one of its chunks reserved before the cancel
// records nothing. At the end its counters and rows are those of a cancel in one
// transaction.
func TestCancelSliced(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 5500
	var cancelling atomic.Bool
	var onSlice func(done int64)
	pool := pgtest.NewPool(t)
	e := startEngineWith(t, pool, func(c *submissions.Config) {
		c.SliceRows = slice
		c.AfterSlice = func(done int64) {
			if cancelling.Load() {
				onSlice(done)
			}
		}
	})
	ctx := t.Context()
	created, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: total}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	// 5 in flight at the cancel, 2 of them completed before it.
	held := reserveN(t, e, Request{Max: 5})
	if len(held) != 5 {
		t.Fatalf("reserved %d chunks; want 5", len(held))
	}
	if _, err := e.Complete(ctx, []outcome.Completion{{Token: held[0].Token}, {Token: held[1].Token}}); err != nil {
		t.Fatal(err)
	}
	other := submitN(t, e, 200, submissions.NewSubmission{})

	var slices []int64
	var otherHanded int
	onSlice = func(done int64) {
		slices = append(slices, done)
		st, err := e.subs.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != opsqtype.StateCancelled {
			t.Errorf("after a slice up to %d: the submission is %s; want cancelled", done, st.State)
		}
		skipped := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE skipped AND submission_id = $1", id)
		if st.ChunksSkipped != skipped {
			t.Errorf("after a slice up to %d: chunks_skipped %d; want %d, the skipped rows moved so far", done, st.ChunksSkipped, skipped)
		}
		for _, c := range reserveN(t, e, Request{Max: 20}) {
			if c.SubmissionID == id {
				t.Errorf("after a slice up to %d: chunk %d of the cancelled submission handed out", done, c.ChunkIndex)
			} else {
				otherHanded++
			}
		}
		if len(slices) == 1 { // the chunks in flight at the cancel: their outcomes come late
			res, err := e.Complete(ctx, []outcome.Completion{{Token: held[2].Token}})
			if err != nil || res[0] != opsqtype.StatusAlreadyFinished {
				t.Errorf("completing a chunk of the cancelled submission: %v, %v; want %s", res, err, opsqtype.StatusAlreadyFinished)
			}
			res, err = e.Fail(ctx, []outcome.Failure{{Token: held[3].Token, Error: "late"}})
			if err != nil || (res[0] != opsqtype.StatusAlreadyFinished && res[0] != opsqtype.StatusLost) {
				t.Errorf("failing a chunk of the cancelled submission: %v, %v; want %s or %s", res, err, opsqtype.StatusAlreadyFinished, opsqtype.StatusLost)
			}
			res, err = e.Fail(ctx, []outcome.Failure{{Token: held[4].Token, Error: "late", Retry: true}})
			if err != nil || (res[0] != opsqtype.StatusAlreadyFinished && res[0] != opsqtype.StatusLost) {
				t.Errorf("failing (retry) a chunk of the cancelled submission: %v, %v; want %s or %s", res, err, opsqtype.StatusAlreadyFinished, opsqtype.StatusLost)
			}
		}
	}
	cancelling.Store(true)
	st, err := e.Cancel(ctx, id)
	cancelling.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1000, 2000, 3000, 4000, 5000, 5500}; len(slices) != len(want) {
		t.Errorf("slices moved up to %v; want %v", slices, want)
	}
	if otherHanded == 0 {
		t.Errorf("no chunk of the other submission handed out during the cancel; want some")
	}
	if st.State != opsqtype.StateCancelled || st.ChunksDone != 2 || st.ChunksFailed != 0 || st.ChunksSkipped != total-2 {
		t.Errorf("after the cancel: %s, %d done, %d failed, %d skipped; want cancelled, 2, 0, %d", st.State, st.ChunksDone, st.ChunksFailed, st.ChunksSkipped, total-2)
	}
	for q, want := range map[string]int64{
		"SELECT count(*) FROM opsq.chunks WHERE submission_id = $1":                        0,
		"SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1":                0,
		"SELECT count(*) FROM opsq.chunks_failed WHERE skipped AND submission_id = $1":     total - 2,
		"SELECT count(*) FROM opsq.chunks_failed WHERE NOT skipped AND submission_id = $1": 0,
	} {
		if n := pgtest.Count(t, pool, q, id); n != want {
			t.Errorf("%s: %d; want %d", q, n, want)
		}
	}
	if st, err := e.subs.Status(ctx, other); err != nil || st.State != opsqtype.StateInProgress {
		t.Errorf("the other submission: %+v, %v; want in progress", st.State, err)
	}
}

// TestCancelSlicedRetriedMidway: a retry of the unfinished chunks of a submission whose
// cancel is still moving its chunks happens between two slices (both lock the submission's
// row); it makes the submission in progress again with every chunk not done pending, and
// the slices stop: no chunk is left skipped, and every one is handed out once. The retry
// won: the cancel answers ErrRetriedWhileCancelled (issue 31, finding 13), not a status.
func TestCancelSlicedRetriedMidway(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 4500
	var cancelling atomic.Bool
	var onSlice func(done int64)
	pool := pgtest.NewPool(t)
	e := startEngineWith(t, pool, func(c *submissions.Config) {
		c.SliceRows = slice
		c.AfterSlice = func(done int64) {
			if cancelling.Load() {
				onSlice(done)
			}
		}
	})
	ctx := t.Context()
	created, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: total}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	var slices []int64
	onSlice = func(done int64) {
		slices = append(slices, done)
		if len(slices) != 2 {
			return
		}
		st, err := e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: true})
		if err != nil {
			t.Fatalf("retrying the unfinished chunks between two slices of the cancel: %v", err)
		}
		if st.State != opsqtype.StateInProgress || st.ChunksSkipped != 0 {
			t.Errorf("retried between two slices: %s, %d skipped; want in progress, 0", st.State, st.ChunksSkipped)
		}
	}
	cancelling.Store(true)
	_, err = e.Cancel(ctx, id)
	cancelling.Store(false)
	if !errors.Is(err, submissions.ErrRetriedWhileCancelled) {
		t.Fatalf("the cancel whose slices a retry stopped: %v; want ErrRetriedWhileCancelled (the retry won)", err)
	}
	if len(slices) != 2 {
		t.Errorf("slices moved up to %v; want 2, then none once retried", slices)
	}
	st, err := e.subs.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.ChunksDone != 0 || st.ChunksFailed != 0 || st.ChunksSkipped != 0 {
		t.Errorf("after the cancel, retried midway: %s, %d done, %d failed, %d skipped; want in progress, 0, 0, 0",
			st.State, st.ChunksDone, st.ChunksFailed, st.ChunksSkipped)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1", id); n != 0 {
		t.Errorf("%d chunks left failed or skipped; want 0", n)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != total {
		t.Errorf("%d chunks pending; want %d", n, total)
	}
	seen := map[int32]bool{}
	for len(seen) < total {
		chunks := reserveN(t, e, Request{Max: 500})
		if len(chunks) == 0 {
			t.Fatalf("%d of %d chunks handed out, then none", len(seen), total)
		}
		items := make([]outcome.Completion, len(chunks))
		for i, c := range chunks {
			if seen[c.ChunkIndex] {
				t.Fatalf("chunk %d handed out twice", c.ChunkIndex)
			}
			seen[c.ChunkIndex], items[i] = true, outcome.Completion{Token: c.Token}
		}
		if _, err := e.Complete(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Eventually(t, 10*time.Second, "the submission completed", func() bool {
		st, err := e.subs.Status(ctx, id)
		return err == nil && st.State == opsqtype.StateCompleted && st.ChunksDone == total
	})
}

// TestCancelSlicedCutRetried: an instance that died after moving a large submission to
// submissions_cancelled, before its first slice, left every chunk pending where it was: a
// retry of the unfinished chunks makes the submission in progress again, and every chunk is
// handed out.
func TestCancelSlicedCutRetried(t *testing.T) {
	t.Parallel()
	const total = 3000
	pool := pgtest.NewPool(t)
	e := startEngineWith(t, pool, func(c *submissions.Config) { c.SliceRows = 1000 })
	ctx := t.Context()
	created, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: total}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	// The cancel's first transaction alone, as a cancel with slices of 1000 runs it.
	if _, err := opsqsql.New(pool).SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: id, SkipNow: 1000}); err != nil {
		t.Fatal(err)
	}
	if chunks := reserveN(t, e, Request{Max: 10}); len(chunks) != 0 {
		t.Fatalf("%d chunks of the cancelled submission handed out; want none", len(chunks))
	}
	st, err := e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: true})
	if err != nil {
		t.Fatalf("retrying the unfinished chunks of a cancel cut before its first slice: %v", err)
	}
	if st.State != opsqtype.StateInProgress || st.ChunksSkipped != 0 {
		t.Errorf("retried: %s, %d skipped; want in progress, 0", st.State, st.ChunksSkipped)
	}
	handed := 0
	for handed < total {
		chunks := reserveN(t, e, Request{Max: 500})
		if len(chunks) == 0 {
			t.Fatalf("%d of %d chunks handed out after the retry, then none", handed, total)
		}
		handed += len(chunks)
	}
}

// TestDroppedSubmissionForgottenAtOnce: the SubmissionDropped a cancel raises here at once
// forgets the submission's info too, not only the NOTIFY's SubmissionFinished after it:
// until that comes back (late on a busy machine), a reserve would take the chunks a cancel
// by slices has not moved yet for chunks of a submission in progress (TestCancelSliced
// caught it so under load).
func TestDroppedSubmissionForgottenAtOnce(t *testing.T) {
	t.Parallel()
	e, _ := setup(t)
	id := submitN(t, e, 10, submissions.NewSubmission{})
	if got := reserveN(t, e, Request{Max: 1}); len(got) != 1 || got[0].SubmissionID != id {
		t.Fatalf("reserved %+v; want a chunk of %d", got, id)
	}
	cached := func() bool {
		e.path.infos.mu.Lock()
		defer e.path.infos.mu.Unlock()
		return e.path.infos.mu.byID[id] != nil
	}
	if !cached() {
		t.Fatalf("submission %d's info not cached after a reserve of its chunk", id)
	}
	e.path.Handle(notify.SubmissionDropped{ID: id})
	if cached() {
		t.Errorf("submission %d's info still cached after it was dropped; want it forgotten at once", id)
	}
}
