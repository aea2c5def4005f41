package queuer

import (
	"encoding/json"
	"errors"
	"testing"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
)

// TestRetryOfAFailedPausedSubmissionStaysPaused (issue 31, finding 13's rest): a submission
// that fails while paused — by a fail for good of a chunk in flight, or, under "continue",
// by the completion of its last chunk in flight — keeps its pause through a retry: the
// retry answers it in progress and paused, nothing of it is handed out, and a resume hands
// out every chunk retried. Before, the pause was lost with the move to submissions_failed
// and the retry un-paused it.
func TestRetryOfAFailedPausedSubmissionStaysPaused(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		sub      NewSubmission
		chunks   int
		retried  int // chunks handed out after the resume
		finishBy string
	}{
		{"failed by a fail for good", NewSubmission{}, 3, 3, "fail"},
		{"failed by its last completion (continue)", NewSubmission{Lifecycle: Lifecycle{OnFailure: json.RawMessage(`"continue"`),
			Policy: submissions.FailurePolicy{Continue: true}}}, 2, 1, "complete"},
	} {
		id := submitN(t, q, tc.chunks, tc.sub)
		inFlight := oldestFirst(t, q, 2)
		if len(inFlight) != 2 {
			t.Fatalf("%s: reserved %d chunks; want 2", tc.name, len(inFlight))
		}
		if _, err := q.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Fail(ctx, []Failure{{Token: inFlight[0].Token, Error: "bad input", Retry: false}}); err != nil {
			t.Fatal(err)
		}
		if tc.finishBy == "complete" {
			complete(t, q, inFlight[1])
		}
		st, err := q.Status(ctx, id)
		if err != nil || st.State != opsqtype.StateFailed {
			t.Fatalf("%s: %s (%v); want failed", tc.name, st.State, err)
		}
		st, err = q.Retry(ctx, id, RetryOptions{Unfinished: true})
		if err != nil {
			t.Fatal(err)
		}
		if st.State != opsqtype.StateInProgress || !st.Paused {
			t.Fatalf("%s: the retry answered %s, paused %v; want in progress and still paused", tc.name, st.State, st.Paused)
		}
		if got := oldestFirst(t, q, 10); len(got) != 0 {
			t.Fatalf("%s: a reserve got %d chunks of the paused submission after its retry; want none", tc.name, len(got))
		}
		if _, err := q.Resume(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got := oldestFirst(t, q, 10); len(got) != tc.retried {
			t.Errorf("%s: after the resume a reserve got %d chunks; want %d", tc.name, len(got), tc.retried)
		}
	}
}

// TestRetryChunkSelection (issue 33, point 6): a retry names the chunks it retries: only
// those, failed or skipped, get a fresh attempt; the others stay failed (or skipped), and
// the submission, in progress again, ends failed once the retried ones are done. A
// selection of chunks none of which failed retries nothing.
func TestRetryChunkSelection(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx := t.Context()
	id := submitN(t, q, 4, NewSubmission{Lifecycle: Lifecycle{OnFailure: json.RawMessage(`"continue"`),
		Policy: submissions.FailurePolicy{Continue: true}}})
	got := oldestFirst(t, q, 4)
	fails := make([]Failure, 3)
	for i := range fails {
		fails[i] = Failure{Token: got[i].Token, Error: "bad", Retry: false}
	}
	if _, err := q.Fail(ctx, fails); err != nil {
		t.Fatal(err)
	}
	complete(t, q, got[3])
	if st, err := q.Status(ctx, id); err != nil || st.State != opsqtype.StateFailed || st.ChunksFailed != 3 {
		t.Fatalf("%+v (%v); want failed with 3 chunks failed", st, err)
	}
	if _, err := q.Retry(ctx, id, RetryOptions{ChunkIndexes: []int32{3}}); !errors.Is(err, ErrNothingToRetry) {
		t.Errorf("a retry of chunk 3, completed: %v; want ErrNothingToRetry", err)
	}
	st, err := q.Retry(ctx, id, RetryOptions{ChunkIndexes: []int32{2, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.ChunksFailed != 1 {
		t.Fatalf("after retrying chunks 0 and 2: %s with %d failed; want in progress with 1 failed (chunk 1)", st.State, st.ChunksFailed)
	}
	again := oldestFirst(t, q, 10)
	if len(again) != 2 || again[0].ChunkIndex != 0 || again[1].ChunkIndex != 2 {
		t.Fatalf("handed out after the retry: %+v; want chunks 0 and 2", again)
	}
	complete(t, q, again...)
	if st, err := q.Status(ctx, id); err != nil || st.State != opsqtype.StateFailed || st.ChunksFailed != 1 || st.ChunksDone != 3 {
		t.Errorf("%+v (%v); want failed again, 3 done and chunk 1 still failed", st, err)
	}
}
