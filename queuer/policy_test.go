package queuer

import (
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// failAll reserves every chunk of the queue and fails those of indexes with retry false,
// completing the others (those skipped by then answer already_finished); it returns how
// many it completed.
func failAll(t *testing.T, q *Queuer, fail map[int32]bool) int {
	t.Helper()
	completed := 0
	for _, c := range reserveN(t, q, ReserveRequest{Max: 100, Strategy: strategy.Node{Kind: strategy.OldestFirst}}) {
		if fail[c.ChunkIndex] {
			st, err := q.Fail(t.Context(), []Failure{{Token: c.Token, Error: "bad input " + string(rune('a'+c.ChunkIndex))}})
			if err != nil || st[0] != opsqtype.StatusFailed {
				t.Fatalf("failing chunk %d: %v, %v; want failed", c.ChunkIndex, st, err)
			}
			continue
		}
		st, err := q.Complete(t.Context(), []Completion{{Token: c.Token, Output: []byte("ok")}})
		switch {
		case err != nil:
			t.Fatalf("completing chunk %d: %v", c.ChunkIndex, err)
		case st[0] == opsqtype.StatusCompleted:
			completed++
		case st[0] != opsqtype.StatusAlreadyFinished: // skipped when the submission failed
			t.Fatalf("completing chunk %d: %v; want completed or already_finished", c.ChunkIndex, st)
		}
	}
	return completed
}

// mustStatusOf reads a submission's status.
func mustStatusOf(t *testing.T, q *Queuer, id int64) Status {
	t.Helper()
	st, err := q.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFailurePolicies: the default fails the submission at its first failed chunk and
// skips the rest; "continue" lets the others finish and ends failed; fail_after K fails it
// once more than K chunks failed.
func TestFailurePolicies(t *testing.T) {
	t.Parallel()
	one := int64(1)
	for _, tc := range []struct {
		name       string
		policy     submissions.FailurePolicy
		fail       map[int32]bool
		wantDone   int64
		wantFailed int64
		wantSkip   int64
		wantLast   int64 // the chunk the failure names
	}{
		{name: "fail_submission", fail: map[int32]bool{1: true}, wantDone: 1, wantFailed: 1, wantSkip: 2, wantLast: 1},
		{name: "continue", policy: submissions.FailurePolicy{Continue: true}, fail: map[int32]bool{1: true, 2: true},
			wantDone: 2, wantFailed: 2, wantLast: 2},
		{name: "fail_after 1 chunk", policy: submissions.FailurePolicy{AfterChunks: &one}, fail: map[int32]bool{0: true, 1: true},
			wantDone: 0, wantFailed: 2, wantSkip: 2, wantLast: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, pool := setup(t)
			none := 0
			id := submitN(t, q, 4, NewSubmission{MaxRetries: &none, Lifecycle: Lifecycle{Policy: tc.policy}})
			// oldest_first hands the chunks out in order: chunk 0's outcome first.
			failAll(t, q, tc.fail)
			st := mustStatusOf(t, q, id)
			if st.State != opsqtype.StateFailed || st.ChunksDone != tc.wantDone || st.ChunksFailed != tc.wantFailed || st.ChunksSkipped != tc.wantSkip {
				t.Fatalf("status %s, %d done, %d failed, %d skipped; want failed, %d, %d, %d",
					st.State, st.ChunksDone, st.ChunksFailed, st.ChunksSkipped, tc.wantDone, tc.wantFailed, tc.wantSkip)
			}
			if st.FailedChunkIndex == nil || *st.FailedChunkIndex != tc.wantLast || st.Error == nil {
				t.Errorf("failure names chunk %v (%v); want chunk %d", st.FailedChunkIndex, st.Error, tc.wantLast)
			}
			if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1 AND input IS NOT NULL", id); n != tc.wantFailed+tc.wantSkip {
				t.Errorf("%d failed or skipped chunks keep their input; want %d", n, tc.wantFailed+tc.wantSkip)
			}
			if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunk_errors WHERE submission_id = $1", id); n != tc.wantFailed {
				t.Errorf("%d errors recorded; want %d", n, tc.wantFailed)
			}
		})
	}
}

// TestContinueGoesOnWhileChunksFail: under "continue" a failed chunk leaves the submission
// in progress, and the others are still handed out.
func TestContinueGoesOnWhileChunksFail(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	none := 0
	id := submitN(t, q, 3, NewSubmission{MaxRetries: &none, Lifecycle: Lifecycle{Policy: submissions.FailurePolicy{Continue: true}}})
	c := reserveN(t, q, ReserveRequest{Max: 1, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if st, err := q.Fail(t.Context(), []Failure{{Token: c[0].Token, Error: "x"}}); err != nil || st[0] != opsqtype.StatusFailed {
		t.Fatalf("fail: %v, %v", st, err)
	}
	if st := mustStatusOf(t, q, id); st.State != opsqtype.StateInProgress || st.ChunksFailed != 1 {
		t.Fatalf("after one failed chunk: %s with %d failed; want in_progress with 1", st.State, st.ChunksFailed)
	}
	if rest := reserveN(t, q, ReserveRequest{Max: 10}); len(rest) != 2 {
		t.Fatalf("reserved %d chunks after the failure; want the other 2", len(rest))
	}
	if q.reserver.Len() != 2 {
		t.Errorf("%d reservations; want the 2 others (the failed chunk's dropped)", q.reserver.Len())
	}
}

// TestRetryBackoff: a retried chunk waits out its backoff (here 1.5 s, ±20 %) out of the
// table the reserves read, then is handed out again, woken by the promoter's NOTIFY; a
// fail's retry_after sets the wait instead.
func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	// Long enough that a machine under heavy load still counts both chunks waiting before
	// the first comes back (at initial −20 %), and short of the other's retry_after by more
	// than the promoter's tick.
	initial := 3 * time.Second
	id := submitN(t, q, 2, NewSubmission{Lifecycle: Lifecycle{Backoff: submissions.Backoff{Initial: initial, Factor: 2, Max: time.Minute}}})
	chunks := reserveN(t, q, ReserveRequest{Max: 2, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(chunks) != 2 {
		t.Fatalf("reserved %d chunks; want 2", len(chunks))
	}
	failed := time.Now()
	st, err := q.Fail(t.Context(), []Failure{
		{Token: chunks[0].Token, Error: "slow down", Retry: true},
		{Token: chunks[1].Token, Error: "later", Retry: true, RetryAfter: 6 * time.Second},
	})
	if err != nil || st[0] != opsqtype.StatusRetrying || st[1] != opsqtype.StatusRetrying {
		t.Fatalf("fail: %v, %v; want retrying twice", st, err)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1", id); n != 2 {
		t.Fatalf("%d chunks waiting; want 2", n)
	}
	if c := reserveN(t, q, ReserveRequest{Max: 2}); len(c) != 0 {
		t.Fatalf("a reserve right after the failures got %d chunks; want none (both wait)", len(c))
	}
	got := reserveN(t, q, ReserveRequest{Max: 1, Wait: 20 * time.Second})
	took := time.Since(failed)
	if len(got) != 1 || got[0].ChunkIndex != chunks[0].ChunkIndex || got[0].Retries != 1 {
		t.Fatalf("a waiting reserve got %+v; want chunk %d with 1 retry", got, chunks[0].ChunkIndex)
	}
	// The lower bound only: a busy machine may be late, never early.
	if took < initial*8/10 {
		t.Errorf("the retried chunk came back after %s; want its backoff, %s −20 %%, at least", took, initial)
	}
	got = reserveN(t, q, ReserveRequest{Max: 1, Wait: 20 * time.Second})
	if took := time.Since(failed); len(got) != 1 || got[0].ChunkIndex != chunks[1].ChunkIndex || took < 6*time.Second {
		t.Fatalf("the chunk with retry_after 6s came back as %+v after %s; want chunk %d after 6s at least", got, took, chunks[1].ChunkIndex)
	}
}

// TestNotBefore: nothing of a submission is handed out before its not_before; then it is,
// to a reserve that waited for it.
func TestNotBefore(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	at := time.Now().Add(1500 * time.Millisecond)
	id := submitN(t, q, 5, NewSubmission{Lifecycle: Lifecycle{NotBefore: at}})
	if st := mustStatusOf(t, q, id); st.NotBefore == nil || !st.NotBefore.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("status not_before %v; want %v", st.NotBefore, at)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != 0 {
		t.Fatalf("%d chunks reservable before not_before; want 0", n)
	}
	if c := reserveN(t, q, ReserveRequest{Max: 5}); len(c) != 0 {
		t.Fatalf("a reserve before not_before got %d chunks; want none", len(c))
	}
	got := reserveN(t, q, ReserveRequest{Max: 5, Wait: 20 * time.Second})
	if len(got) == 0 || time.Now().Before(at) {
		t.Fatalf("a waiting reserve got %d chunks at %s; want some, not before %s", len(got), time.Now().Format(time.StampMilli), at.Format(time.StampMilli))
	}
}

// TestCancelSkipsWhatIsLeft: a cancel skips every pending chunk, reservable or waiting,
// keeping its input for a retry of the unfinished ones, and counts them.
func TestCancelSkipsWhatIsLeft(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 4, NewSubmission{})
	c := reserveN(t, q, ReserveRequest{Max: 2, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if _, err := q.Complete(t.Context(), []Completion{{Token: c[0].Token}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fail(t.Context(), []Failure{{Token: c[1].Token, Error: "wait", Retry: true}}); err != nil { // waits 1 s
		t.Fatal(err)
	}
	st, err := q.Cancel(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateCancelled || st.ChunksDone != 1 || st.ChunksSkipped != 3 {
		t.Fatalf("after cancel: %s, %d done, %d skipped; want cancelled, 1, 3", st.State, st.ChunksDone, st.ChunksSkipped)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1 AND skipped AND input IS NOT NULL", id); n != 3 {
		t.Errorf("%d skipped chunks with their input; want 3", n)
	}
	if n := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + (SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1)", id); n != 0 {
		t.Errorf("%d chunks still pending; want 0", n)
	}
}
