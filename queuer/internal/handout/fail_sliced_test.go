package handout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

// sliceWait bounds each wait for a slice of a fail's move: generous, as other tests share
// the machine.
const sliceWait = 30 * time.Second

// sliceGate is a submissions store's AfterSlice for the tests of a fail's slices, which run
// on the recorder's goroutine: it reports each slice committed, and holds the move after
// it until the test opens the gate (or the test ends).
type sliceGate struct {
	ctx    context.Context
	slices chan int64    // each slice committed: the chunk indexes done so far
	open   chan struct{} // closed: the slices go on
}

func newSliceGate(t *testing.T) *sliceGate {
	return &sliceGate{ctx: t.Context(), slices: make(chan int64, 1000), open: make(chan struct{})}
}

func (g *sliceGate) after(done int64) {
	g.slices <- done
	select {
	case <-g.open:
	case <-g.ctx.Done():
	}
}

// next waits for the next slice to commit.
func (g *sliceGate) next(t *testing.T, why string) int64 {
	t.Helper()
	select {
	case done := <-g.slices:
		return done
	case <-time.After(sliceWait):
		t.Fatalf("no slice of the move committed within %s: %s", sliceWait, why)
		return 0
	}
}

// failSliced inserts a submission of total inline chunks (the default on_failure,
// fail_submission) on an engine whose slices are of slice chunk indexes, and fails it:
// of three chunks reserved, one waits out a backoff, one stays in flight, and the third
// fails for good ("boom"). It returns the submission, the chunk that failed it, and the
// one in flight; the move of its chunks is held after its first slice (gate).
func failSliced(t *testing.T, slice, total int) (e *engine, gate *sliceGate, id int64, failed, inFlight Chunk) {
	t.Helper()
	gate = newSliceGate(t)
	pool := pgtest.NewPool(t)
	e = startEngineWith(t, pool, func(c *submissions.Config) {
		c.SliceRows = slice
		c.AfterSlice = gate.after
	})
	ctx := t.Context()
	id = submitN(t, e, total, submissions.NewSubmission{})
	held := reserveN(t, e, Request{Max: 3})
	if len(held) != 3 {
		t.Fatalf("reserved %d chunks; want 3", len(held))
	}
	res, err := e.Fail(ctx, []outcome.Failure{{Token: held[0].Token, Error: "later", Retry: true, RetryAfter: time.Hour}})
	if err != nil || res[0] != opsqtype.StatusRetrying {
		t.Fatalf("failing a chunk with a retry: %v, %v; want %s", res, err, opsqtype.StatusRetrying)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1", id); n != 1 {
		t.Fatalf("%d chunks waiting out a backoff; want 1", n)
	}
	res, err = e.Fail(ctx, []outcome.Failure{{Token: held[2].Token, Error: "boom"}})
	if err != nil || res[0] != opsqtype.StatusFailed {
		t.Fatalf("failing a chunk for good: %v, %v; want %s", res, err, opsqtype.StatusFailed)
	}
	return e, gate, id, held[2], held[1]
}

// TestFailSliced: a chunk that fails for good under on_failure fail_submission, in a
// submission with more pending chunks than a slice, fails the submission at once, and its
// fail answers without waiting for the move of the other chunks, which go by slices, one
// transaction each. Between two slices the submission is failed already: none of its
// chunks is handed out (another submission's are), a completion of one in flight at the
// fail is already_finished, and its chunks_skipped counts the skipped rows moved so far.
// At the end every chunk is in chunks_failed (the failed one with its error, the others
// skipped, the one waiting out a backoff too), inputs kept, and the counts are those of a
// fail in one statement; a retry of the unfinished chunks hands each out once again.
func TestFailSliced(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 5500
	e, gate, id, failed, inFlight := failSliced(t, slice, total)
	ctx, pool := t.Context(), e.pool

	// The fail answered; its chunks move by slices, held after the first.
	first := gate.next(t, "want a submission with more pending chunks than a slice to leave them to slices")
	if first != slice {
		t.Errorf("first slice up to %d; want %d", first, slice)
	}
	st, err := e.subs.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateFailed || st.ChunksFailed != 1 || st.Error == nil || *st.Error != "boom" ||
		st.FailedChunkIndex == nil || *st.FailedChunkIndex != int64(failed.ChunkIndex) {
		t.Errorf("between two slices: %s, %d failed, error %v at %v; want failed, 1, boom at %d",
			st.State, st.ChunksFailed, st.Error, st.FailedChunkIndex, failed.ChunkIndex)
	}
	skipped := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE skipped AND submission_id = $1", id)
	if st.ChunksSkipped != skipped {
		t.Errorf("between two slices: chunks_skipped %d; want %d, the skipped rows moved so far", st.ChunksSkipped, skipped)
	}
	pending := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + "+
		"(SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1)", id)
	if pending != total-1-skipped || pending <= int64(slice) {
		t.Errorf("between two slices: %d chunks pending; want %d, more than a slice", pending, total-1-skipped)
	}
	other := submitN(t, e, 50, submissions.NewSubmission{})
	otherHanded := 0
	for _, c := range reserveN(t, e, Request{Max: 100}) {
		if c.SubmissionID == id {
			t.Errorf("between two slices: chunk %d of the failed submission handed out", c.ChunkIndex)
		} else {
			otherHanded++
		}
	}
	if otherHanded == 0 {
		t.Errorf("between two slices: no chunk of the other submission handed out; want some")
	}
	res, err := e.Complete(ctx, []outcome.Completion{{Token: inFlight.Token}})
	if err != nil || res[0] != opsqtype.StatusAlreadyFinished {
		t.Errorf("completing a chunk of the failed submission: %v, %v; want %s", res, err, opsqtype.StatusAlreadyFinished)
	}

	close(gate.open)
	pgtest.Eventually(t, sliceWait, "every chunk of the failed submission moved", func() bool {
		st, err = e.subs.Status(ctx, id)
		return err == nil && st.ChunksDone+st.ChunksFailed+st.ChunksSkipped == total
	})
	if st.State != opsqtype.StateFailed || st.ChunksDone != 0 || st.ChunksFailed != 1 || st.ChunksSkipped != total-1 {
		t.Errorf("after the slices: %s, %d done, %d failed, %d skipped; want failed, 0, 1, %d",
			st.State, st.ChunksDone, st.ChunksFailed, st.ChunksSkipped, total-1)
	}
	moved := []int64{first}
	for len(moved) < 6 {
		moved = append(moved, gate.next(t, "want the move to go on to the end"))
	}
	if want := []int64{1000, 2000, 3000, 4000, 5000, 5500}; !slices.Equal(moved, want) {
		t.Errorf("slices moved up to %v; want %v", moved, want)
	}
	for q, want := range map[string]int64{
		"SELECT count(*) FROM opsq.chunks WHERE submission_id = $1":                                       0,
		"SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1":                               0,
		"SELECT count(*) FROM opsq.chunks_failed WHERE skipped AND submission_id = $1":                    total - 1,
		"SELECT count(*) FROM opsq.chunks_failed WHERE skipped AND error = 'boom' AND submission_id = $1": total - 1,
		"SELECT count(*) FROM opsq.chunks_failed WHERE NOT skipped AND error = 'boom' AND submission_id = $1 " +
			fmt.Sprintf("AND chunk_index = %d", failed.ChunkIndex): 1,
		"SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1 " +
			"AND input = convert_to('chunk-' || chunk_index, 'UTF8')": total,
	} {
		if n := pgtest.Count(t, pool, q, id); n != want {
			t.Errorf("%s: %d; want %d", q, n, want)
		}
	}
	for _, c := range reserveN(t, e, Request{Max: 100}) {
		if c.SubmissionID == id {
			t.Errorf("after the slices: chunk %d of the failed submission handed out", c.ChunkIndex)
		}
	}
	if st, err := e.subs.Status(ctx, other); err != nil || st.State != opsqtype.StateInProgress {
		t.Errorf("the other submission: %+v, %v; want in progress", st.State, err)
	}

	st, err = e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: true})
	if err != nil {
		t.Fatalf("retrying the unfinished chunks: %v", err)
	}
	if st.State != opsqtype.StateInProgress || st.ChunksFailed != 0 || st.ChunksSkipped != 0 {
		t.Errorf("retried: %s, %d failed, %d skipped; want in progress, 0, 0", st.State, st.ChunksFailed, st.ChunksSkipped)
	}
	handOutAllOnce(t, e, id, total)
	pgtest.Eventually(t, sliceWait, "the retried submission completed", func() bool {
		st, err := e.subs.Status(ctx, id)
		return err == nil && st.State == opsqtype.StateCompleted
	})
}

// TestFailSlicedRetriedMidway: a retry of a failed submission whose chunks are still
// moving by slices happens between two slices (both lock the submission's row), as for a
// cancel; the slices stop. Of its unfinished chunks, every one is then pending once, none
// left skipped; of its failed chunks only, the chunk that failed it and those not moved
// yet (never skipped) are pending, and those skipped so far stay skipped.
func TestFailSlicedRetriedMidway(t *testing.T) {
	t.Parallel()
	for name, unfinished := range map[string]bool{"unfinished": true, "failed": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const slice, total = 1000, 4500
			e, gate, id, _, inFlight := failSliced(t, slice, total)
			ctx, pool := t.Context(), e.pool
			gate.next(t, "the first slice") // the move waits after it
			// Its consumer gives up the chunk in flight at the fail, which a retry does not end.
			if res, err := e.Complete(ctx, []outcome.Completion{{Token: inFlight.Token}}); err != nil || res[0] != opsqtype.StatusAlreadyFinished {
				t.Errorf("completing a chunk of the failed submission: %v, %v; want %s", res, err, opsqtype.StatusAlreadyFinished)
			}
			st, err := e.subs.Retry(ctx, id, submissions.RetryOptions{Unfinished: unfinished})
			if err != nil {
				t.Fatalf("retrying between two slices of the fail's move: %v", err)
			}
			skipped := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1", id)
			if st.State != opsqtype.StateInProgress || st.ChunksFailed != 0 || st.ChunksSkipped != skipped {
				t.Errorf("retried between two slices: %s, %d failed, %d skipped; want in progress, 0, %d",
					st.State, st.ChunksFailed, st.ChunksSkipped, skipped)
			}
			if unfinished && skipped != 0 {
				t.Errorf("retried its unfinished chunks: %d left skipped; want 0", skipped)
			}
			if !unfinished && skipped == 0 {
				t.Errorf("retried its failed chunks after a slice: none left skipped; want those the slice skipped")
			}
			close(gate.open) // the next slice finds the submission in progress, and the move stops
			// Every chunk not skipped is pending once: the chunk waiting out its backoff at the
			// fail still waits if no slice moved it (pending where it was, as after a cancel),
			// and the others are reservable.
			pending := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + "+
				"(SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1)", id)
			if pending != total-skipped {
				t.Errorf("retried between two slices: %d chunks pending; want %d", pending, total-skipped)
			}
			reservable := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id)
			handOutAllOnce(t, e, id, int(reservable))
			if len(gate.slices) != 0 {
				t.Errorf("a slice up to %d moved after the retry; want none", <-gate.slices)
			}
			if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1", id); n != skipped {
				t.Errorf("%d chunks skipped once the others completed; want %d", n, skipped)
			}
		})
	}
}

// TestFailNotSlicedAtSliceRows: a submission with exactly SliceRows chunks pending fails
// with all of them moved in the fail's own statement: no slice.
func TestFailNotSlicedAtSliceRows(t *testing.T) {
	t.Parallel()
	const slice = 1000
	e, gate, id, _, _ := failSliced(t, slice, slice)
	st, err := e.subs.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateFailed || st.ChunksFailed != 1 || st.ChunksSkipped != slice-1 {
		t.Errorf("after the fail: %s, %d failed, %d skipped; want failed, 1, %d", st.State, st.ChunksFailed, st.ChunksSkipped, slice-1)
	}
	if len(gate.slices) != 0 {
		t.Errorf("%d slices; want none", len(gate.slices))
	}
}

// handOutAllOnce reserves and completes until the n reservable chunks of submission id
// have been handed out, each once, and counted done.
func handOutAllOnce(t *testing.T, e *engine, id int64, n int) {
	t.Helper()
	ctx := t.Context()
	seen := map[int32]bool{}
	for len(seen) < n {
		chunks := reserveN(t, e, Request{Max: 500})
		if len(chunks) == 0 {
			t.Fatalf("%d of %d chunks handed out, then none", len(seen), n)
		}
		var items []outcome.Completion
		for _, c := range chunks {
			if c.SubmissionID != id {
				continue
			}
			if seen[c.ChunkIndex] {
				t.Fatalf("chunk %d handed out twice", c.ChunkIndex)
			}
			seen[c.ChunkIndex] = true
			items = append(items, outcome.Completion{Token: c.Token})
		}
		if _, err := e.Complete(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Eventually(t, sliceWait, "the chunks handed out counted done", func() bool {
		st, err := e.subs.Status(ctx, id)
		return err == nil && st.ChunksDone == int64(n)
	})
}
