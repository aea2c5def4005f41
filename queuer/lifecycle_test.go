package queuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// The failure lifecycle's submission operations (results in any state, follow, failures,
// retry, pause, resume). Until the engine's own paths write them (a chunk failing under
// on_failure "continue", errors in chunk_errors, the fail of a submission that writes its
// skipped chunks with their inputs), the tests set those states up with plain SQL, as
// those paths will leave them (failContinue, failSubmission).

// oldestFirst reserves up to max chunks of the oldest submission, in chunk order.
func oldestFirst(t *testing.T, q *Queuer, max int) []Chunk {
	t.Helper()
	return reserveN(t, q, ReserveRequest{Max: max, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
}

// complete completes chunks with output "out-<index>".
func complete(t *testing.T, q *Queuer, chunks ...Chunk) {
	t.Helper()
	items := make([]Completion, len(chunks))
	for i, c := range chunks {
		items[i] = Completion{Token: c.Token, Output: fmt.Appendf(nil, "out-%d", c.ChunkIndex)}
	}
	status, err := q.Complete(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range status {
		if st != opsqtype.StatusCompleted {
			t.Fatalf("completing chunk %d: %s; want completed", chunks[i].ChunkIndex, st)
		}
	}
}

// failContinue fails chunks idxs of in-progress submission id for good, as a fail under
// on_failure "continue" will: each into chunks_failed with its shard, random order and
// input and the error "boom <index>", with two failed attempts in chunk_errors
// ("attempt 0", "attempt 1"), counted in chunks_failed; the submission goes on.
func failContinue(t *testing.T, pool *pgxpool.Pool, id int64, idxs ...int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
WITH gone AS (
    DELETE FROM opsq.chunks WHERE submission_id = $1 AND chunk_index = ANY($2::int[])
    RETURNING submission_id, chunk_index, shard, random_order, input
), failed AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input)
    SELECT submission_id, chunk_index, 1, 'boom ' || chunk_index, false, shard, random_order, input FROM gone
), errs AS (
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer, at)
    SELECT submission_id, chunk_index, a, 'attempt ' || a, 'consumer-' || a, now() - (2 - a) * interval '1 minute'
    FROM gone, generate_series(0, 1) AS a
)
UPDATE opsq.submissions SET chunks_failed = chunks_failed + (SELECT count(*) FROM gone) WHERE id = $1`, id, idxs)
	if err != nil {
		t.Fatalf("failing chunks %v of %d: %v", idxs, id, err)
	}
}

// failSubmission fails in-progress submission id as the fail path will: its pending chunks
// skipped (into chunks_failed with their inputs), the row to submissions_failed naming
// chunk failedAt. Then it drops the submission here, as the fail path does.
func failSubmission(t *testing.T, q *Queuer, pool *pgxpool.Pool, id int64, failedAt int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
WITH gone AS (
    DELETE FROM opsq.chunks WHERE submission_id = $1
    RETURNING submission_id, chunk_index, shard, random_order, retries, input
), skipped AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input)
    SELECT submission_id, chunk_index, retries, '', true, shard, random_order, input FROM gone
), sub AS (
    DELETE FROM opsq.submissions WHERE id = $1 RETURNING *
)
INSERT INTO opsq.submissions_failed
    (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
     strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error)
SELECT id, chunks_total, chunks_done, chunks_failed, chunks_skipped + (SELECT count(*) FROM gone), priority,
       max_retries, metadata, strategic_metadata, prefix, created_at, now(), $2::int, 'boom ' || $2::int
FROM sub`, id, failedAt)
	if err != nil {
		t.Fatalf("failing submission %d: %v", id, err)
	}
	q.bus.Raise(notify.SubmissionDropped{ID: id})
}

// counters reads a submission's done, failed and skipped counters wherever it is.
func counters(t *testing.T, pool *pgxpool.Pool, id int64) [3]int64 {
	t.Helper()
	var c [3]int64
	err := pool.QueryRow(t.Context(), `
SELECT chunks_done, chunks_failed, chunks_skipped FROM opsq.submissions WHERE id = $1
UNION ALL SELECT chunks_done, chunks_failed, chunks_skipped FROM opsq.submissions_failed WHERE id = $1
UNION ALL SELECT chunks_done, chunks_failed, chunks_skipped FROM opsq.submissions_cancelled WHERE id = $1
UNION ALL SELECT chunks_done, chunks_failed, chunks_skipped FROM opsq.submissions_completed WHERE id = $1`, id).Scan(&c[0], &c[1], &c[2])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lines returns a submission's results lines as "index:state[:output or error]".
func lines(t *testing.T, q *Queuer, id int64) []string {
	t.Helper()
	var out []string
	err := q.Results(t.Context(), id, func(r Result) error {
		out = append(out, line(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func line(r Result) string {
	switch r.State {
	case submissions.ResultCompleted:
		return fmt.Sprintf("%d:%s:%s", r.ChunkIndex, r.State, r.Output)
	case submissions.ResultFailed:
		return fmt.Sprintf("%d:%s:%s", r.ChunkIndex, r.State, r.Error)
	}
	return fmt.Sprintf("%d:%s", r.ChunkIndex, r.State)
}

func TestResultsInAnyState(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if err := q.Results(t.Context(), 12345, func(Result) error {
		t.Fatal("fn called for an unknown submission")
		return nil
	}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Results of an unknown id: err = %v; want ErrNotFound", err)
	}

	id := submitN(t, q, 8, NewSubmission{})
	c := oldestFirst(t, q, 8)
	complete(t, q, c[0], c[1], c[4])
	failContinue(t, pool, id, 2, 6)
	want := []string{"0:completed:out-0", "1:completed:out-1", "2:failed:boom 2", "3:pending",
		"4:completed:out-4", "5:pending", "6:failed:boom 6", "7:pending"}
	if got := lines(t, q, id); !reflect.DeepEqual(got, want) {
		t.Errorf("results of an in-progress submission:\n got %q\nwant %q", got, want)
	}

	failSubmission(t, q, pool, id, 2)
	want = []string{"0:completed:out-0", "1:completed:out-1", "2:failed:boom 2", "3:skipped",
		"4:completed:out-4", "5:skipped", "6:failed:boom 6", "7:skipped"}
	if got := lines(t, q, id); !reflect.DeepEqual(got, want) {
		t.Errorf("results of a failed submission:\n got %q\nwant %q", got, want)
	}

	cancelled := submitN(t, q, 4, NewSubmission{})
	complete(t, q, oldestFirst(t, q, 1)...)
	if _, err := q.Cancel(t.Context(), cancelled); err != nil {
		t.Fatal(err)
	}
	want = []string{"0:completed:out-0", "1:skipped", "2:skipped", "3:skipped"}
	if got := lines(t, q, cancelled); !reflect.DeepEqual(got, want) {
		t.Errorf("results of a cancelled submission:\n got %q\nwant %q", got, want)
	}
}

// TestResultsLarge: results of many chunks, most completed in batches, stream in order.
func TestResultsLarge(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	const n = 20_000
	id := submitN(t, q, n, NewSubmission{})
	failContinue(t, pool, id, 7, 12_345)
	// Complete every chunk but the last 100 behind the engine's back, in batches of 1000.
	if _, err := pool.Exec(t.Context(), `
WITH c AS (DELETE FROM opsq.chunks WHERE submission_id = $1 AND chunk_index < $2 RETURNING submission_id, chunk_index)
INSERT INTO opsq.completed_batches (submission_id, first_index, chunk_indexes, outputs)
SELECT submission_id, min(chunk_index), array_agg(chunk_index), array_agg(convert_to('out-' || chunk_index, 'UTF8'))
FROM c GROUP BY submission_id, chunk_index / 1000`, id, n-100); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	err := q.Results(t.Context(), id, func(r Result) error {
		if r.ChunkIndex != next {
			return fmt.Errorf("line of chunk %d; want %d", r.ChunkIndex, next)
		}
		want := submissions.ResultCompleted
		switch {
		case next == 7 || next == 12_345:
			want = submissions.ResultFailed
		case next >= n-100:
			want = submissions.ResultPending
		}
		if r.State != want {
			return fmt.Errorf("chunk %d is %s; want %s", next, r.State, want)
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != n {
		t.Fatalf("%d lines; want %d", next, n)
	}
}

func TestFollowResults(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if err := q.FollowResults(t.Context(), 12345, func(Result) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FollowResults of an unknown id: err = %v; want ErrNotFound", err)
	}
	id := submitN(t, q, 6, NewSubmission{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan string, 10)
	ended := make(chan error, 1)
	go func() {
		ended <- q.FollowResults(ctx, id, func(r Result) error {
			got <- line(r)
			return nil
		})
	}()
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case l := <-got:
				if l != w {
					t.Fatalf("followed line %q; want %q", l, w)
				}
			case err := <-ended:
				// The lines are buffered: one written before the end may still wait.
				select {
				case l := <-got:
					if l != w {
						t.Fatalf("followed line %q; want %q", l, w)
					}
					ended <- err
					continue
				default:
				}
				t.Fatalf("FollowResults ended (%v) before line %q", err, w)
			case <-ctx.Done():
				t.Fatalf("no line %q", w)
			}
		}
	}
	// The completer sends the progress NOTIFY itself; failContinue (plain SQL) does not, so
	// the test sends it after each change too, from another connection.
	progress := func() {
		t.Helper()
		if err := notify.SendProgress(ctx, opsqsql.New(pool), id); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Eventually(t, 20*time.Second, "the follower waits", func() bool { return q.waiting.Waiting() > 0 })
	c := oldestFirst(t, q, 6)
	complete(t, q, c[1]) // chunk 0 still pending: nothing may be written yet
	progress()
	complete(t, q, c[0])
	progress()
	expect("0:completed:out-0", "1:completed:out-1")
	failContinue(t, pool, id, 2)
	progress()
	expect("2:failed:boom 2")
	// The last completions finish the submission (failed: one chunk failed), and the
	// completer announces it: the follower writes the last lines, then ends.
	complete(t, q, c[3], c[4], c[5])
	expect("3:completed:out-3", "4:completed:out-4", "5:completed:out-5")
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("FollowResults: %v; want nil at the end of the submission", err)
		}
	case <-ctx.Done():
		t.Fatal("FollowResults did not end with the submission")
	}
	select {
	case l := <-got:
		t.Fatalf("a line more: %q", l)
	default:
	}
	if st, err := q.Status(ctx, id); err != nil || st.State != opsqtype.StateFailed {
		t.Fatalf("status after the last chunk: %+v, %v; want failed", st, err)
	}
	// A finished submission is followed to its end at once.
	var n int
	if err := q.FollowResults(ctx, id, func(Result) error { n++; return nil }); err != nil || n != 6 {
		t.Fatalf("following a finished submission: %d lines, %v; want 6, nil", n, err)
	}
}

func TestFailuresPages(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if _, _, err := q.Failures(t.Context(), 12345, -1, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Failures of an unknown id: err = %v; want ErrNotFound", err)
	}
	id := submitN(t, q, 10, NewSubmission{})
	failContinue(t, pool, id, 1, 3, 5, 7)
	// Chunk 8 failed one attempt and waits to be tried again (the fail path's retry).
	if _, err := pool.Exec(t.Context(), `
WITH r AS (UPDATE opsq.chunks SET retries = 1 WHERE submission_id = $1 AND chunk_index = 8)
INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer) VALUES ($1, 8, 0, 'once', 'c')`, id); err != nil {
		t.Fatal(err)
	}
	var pages [][]int64
	after := int64(-1)
	for range 10 {
		page, more, err := q.Failures(t.Context(), id, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		var idxs []int64
		for _, f := range page {
			idxs = append(idxs, f.ChunkIndex)
			switch f.ChunkIndex {
			case 8:
				if f.State != submissions.FailedChunkRetrying || f.Retries != 1 || len(f.Errors) != 1 || f.Errors[0].Error != "once" {
					t.Errorf("chunk 8: %+v; want retrying, 1 retry, the error \"once\"", f)
				}
			default:
				if f.State != submissions.FailedChunkFailed || f.Retries != 1 || len(f.Errors) != 2 ||
					f.Errors[0].Error != "attempt 1" || f.Errors[0].Consumer != "consumer-1" || f.Errors[1].Error != "attempt 0" ||
					!f.Errors[0].At.After(f.Errors[1].At) {
					t.Errorf("chunk %d: %+v; want failed, 1 retry, errors attempt 1 then attempt 0", f.ChunkIndex, f)
				}
			}
		}
		pages = append(pages, idxs)
		if !more {
			break
		}
		after = idxs[len(idxs)-1]
	}
	if want := [][]int64{{1, 3}, {5, 7}, {8}}; !reflect.DeepEqual(pages, want) {
		t.Errorf("pages %v; want %v", pages, want)
	}
	page, more, err := q.Failures(t.Context(), id, 8, 100)
	if err != nil || len(page) != 0 || more || page == nil {
		t.Errorf("page after the last: %v, %v, %v; want an empty list, no more", page, more, err)
	}
}

func TestRetryFailedSubmission(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 6, NewSubmission{})
	c := oldestFirst(t, q, 6)
	complete(t, q, c[0], c[1])
	failContinue(t, pool, id, 2)
	failSubmission(t, q, pool, id, 2)
	if st, err := q.Status(t.Context(), id); err != nil || st.State != opsqtype.StateFailed {
		t.Fatalf("before the retry: %+v, %v; want failed", st, err)
	}

	maxRetries := 7
	st, err := q.Retry(t.Context(), id, RetryOptions{MaxRetries: &maxRetries})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.FinishedAt != nil || st.Error != nil || st.FailedChunkIndex != nil {
		t.Fatalf("after the retry: %+v; want in progress, without finished_at nor failure", st)
	}
	if got, want := counters(t, pool, id), [3]int64{2, 0, 3}; got != want {
		t.Errorf("counters done, failed, skipped: %v; want %v", got, want)
	}
	if n := pgtest.Count(t, pool, "SELECT max_retries FROM opsq.submissions WHERE id = $1", id); n != 7 {
		t.Errorf("max_retries %d; want 7", n)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunk_errors WHERE submission_id = $1", id); n != 2 {
		t.Errorf("%d errors kept of the chunk retried; want its 2: a retry keeps them", n)
	}
	want := []string{"0:completed:out-0", "1:completed:out-1", "2:pending", "3:skipped", "4:skipped", "5:skipped"}
	if got := lines(t, q, id); !reflect.DeepEqual(got, want) {
		t.Errorf("results after the retry:\n got %q\nwant %q", got, want)
	}
	got := oldestFirst(t, q, 10)
	if len(got) != 1 || got[0].SubmissionID != id || got[0].ChunkIndex != 2 || got[0].Retries != 0 || string(got[0].Input) != "chunk-2" {
		t.Fatalf("reserve after the retry: %+v; want chunk 2 with its input, retries 0", got)
	}
	// Its new attempt fails too: its error comes after the two before the retry, and its
	// next attempt then completes.
	if st, err := q.Fail(t.Context(), []Failure{{Token: got[0].Token, Error: "after the retry", Retry: true}}); err != nil || st[0] != opsqtype.StatusRetrying {
		t.Fatalf("fail after the retry: %v, %v; want retrying", st, err)
	}
	failures := func() submissions.FailedChunk {
		t.Helper()
		page, _, err := q.Failures(t.Context(), id, -1, 10)
		if err != nil || len(page) != 1 {
			t.Fatalf("failures: %+v, %v; want chunk 2", page, err)
		}
		return page[0]
	}
	if f := failures(); f.State != submissions.FailedChunkRetrying || len(f.Errors) != 3 ||
		f.Errors[0].Error != "after the retry" || f.Errors[1].Error != "attempt 1" || f.Errors[2].Error != "attempt 0" {
		t.Errorf("chunk 2 after failing again: %+v; want retrying, with the new error before the two older ones", f)
	}
	pgtest.Eventually(t, 20*time.Second, "chunk 2 reservable after its backoff", func() bool {
		if again := reserveN(t, q, ReserveRequest{Max: 10, Strategy: strategy.Node{Kind: strategy.OldestFirst}}); len(again) == 1 {
			got = again
			return true
		}
		return false
	})
	if got[0].ChunkIndex != 2 || got[0].Retries != 1 {
		t.Fatalf("after the backoff: %+v; want chunk 2, retries 1", got)
	}
	complete(t, q, got[0])
	if f := failures(); f.State != submissions.FailedChunkCompleted || len(f.Errors) != 3 {
		t.Errorf("chunk 2 once completed: %+v; want completed, its 3 errors kept", f)
	}
	// Every chunk is finished, three of them skipped: the submission failed again.
	pgtest.Eventually(t, 20*time.Second, "the submission finished", func() bool {
		st, err := q.Status(t.Context(), id)
		return err == nil && st.State != opsqtype.StateInProgress
	})
	if st, _ := q.Status(t.Context(), id); st.State != opsqtype.StateFailed || st.Error == nil || *st.Error != "3 chunks skipped" {
		t.Errorf("after its retried chunk completed: %+v; want failed, \"3 chunks skipped\"", st)
	}

	// Nothing failed now: a retry of the failed chunks has nothing to do; of the
	// unfinished ones, the skipped chunks come back.
	if _, err := q.Retry(t.Context(), id, RetryOptions{}); !errors.Is(err, ErrNothingToRetry) {
		t.Errorf("retry with nothing failed: err = %v; want ErrNothingToRetry", err)
	}
	if _, err := q.Retry(t.Context(), id, RetryOptions{Unfinished: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := counters(t, pool, id), [3]int64{3, 0, 0}; got != want {
		t.Errorf("counters after retrying the unfinished: %v; want %v", got, want)
	}
	var idxs []int
	for _, ch := range oldestFirst(t, q, 10) {
		idxs = append(idxs, int(ch.ChunkIndex))
	}
	if !reflect.DeepEqual(idxs, []int{3, 4, 5}) {
		t.Errorf("reserve after retrying the unfinished: chunks %v; want [3 4 5]", idxs)
	}
	complete(t, q, c[3:]...) // the old tokens of 3-5 were dropped with the submission
}

func TestRetryCancelledAndNothingToRetry(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if _, err := q.Retry(t.Context(), 12345, RetryOptions{Unfinished: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("retry of an unknown id: err = %v; want ErrNotFound", err)
	}
	done := submitN(t, q, 3, NewSubmission{})
	pgtest.CompleteSubmission(t, pool, done)
	if _, err := q.Retry(t.Context(), done, RetryOptions{Unfinished: true}); !errors.Is(err, ErrNothingToRetry) {
		t.Errorf("retry of a completed submission: err = %v; want ErrNothingToRetry", err)
	}
	running := submitN(t, q, 3, NewSubmission{})
	if _, err := q.Retry(t.Context(), running, RetryOptions{Unfinished: true}); !errors.Is(err, ErrNothingToRetry) {
		t.Errorf("retry of a submission with nothing failed: err = %v; want ErrNothingToRetry", err)
	}

	id := submitN(t, q, 4, NewSubmission{})
	if _, err := q.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// The cancel wrote its 4 skipped chunks; rows failed before migration 00007 have no
	// shard, random order nor input, as these are made to, which the retry places itself.
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1 AND skipped", id); n != 4 {
		t.Fatalf("%d skipped chunks after the cancel; want 4", n)
	}
	if _, err := pool.Exec(t.Context(), `UPDATE opsq.chunks_failed SET shard = NULL, random_order = NULL, input = NULL WHERE submission_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Retry(t.Context(), id, RetryOptions{}); !errors.Is(err, ErrNothingToRetry) {
		t.Errorf("retry of the failed chunks of a cancelled submission: err = %v; want ErrNothingToRetry", err)
	}
	st, err := q.Retry(t.Context(), id, RetryOptions{Unfinished: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.FinishedAt != nil {
		t.Fatalf("after retrying a cancelled submission's unfinished chunks: %+v; want in progress", st)
	}
	if got, want := counters(t, pool, id), [3]int64{0, 0, 0}; got != want {
		t.Errorf("counters: %v; want %v", got, want)
	}
	for i := range 4 {
		shard, order := opsqtype.ShardOf(id, i, q.shardCount), opsqtype.RandomOrder(id, i, q.shardCount)
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1 AND chunk_index = $2 AND shard = $3 AND random_order = $4",
			id, i, shard, order); n != 1 {
			t.Errorf("chunk %d not back on shard %d at random order %d", i, shard, order)
		}
	}
	n := 0
	for _, c := range oldestFirst(t, q, 20) {
		if c.SubmissionID == id {
			n++
		}
	}
	if n != 4 {
		t.Errorf("reserve after the retry: %d chunks of it; want 4", n)
	}
}

func TestRetryManyByMetadata(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	var ids []int64
	for i := range 4 {
		sm := fmt.Sprintf(`{"company_id": %d}`, 1+i%2)
		id := submitN(t, q, 2, NewSubmission{StrategicMetadata: json.RawMessage(sm)})
		ids = append(ids, id)
		if i < 3 {
			failContinue(t, pool, id, 0)
			failSubmission(t, q, pool, id, 0)
		}
	}
	// ids[0] and ids[2] are company 1 and failed; ids[1] company 2, failed; ids[3] company 2, running.
	retried, err := q.RetryMany(t.Context(), ListOptions{Key: "company_id", Value: json.RawMessage(`1`), Limit: 10}, RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{ids[2], ids[0]}; !reflect.DeepEqual(retried, want) {
		t.Errorf("retried %v; want %v (company 1, newest first)", retried, want)
	}
	for i, id := range ids {
		st, err := q.Status(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		want := opsqtype.StateInProgress
		if i == 1 {
			want = opsqtype.StateFailed
		}
		if st.State != want {
			t.Errorf("submission %d: %s; want %s", i, st.State, want)
		}
	}
	retried, err = q.RetryMany(t.Context(), ListOptions{Limit: 10}, RetryOptions{})
	if err != nil || !reflect.DeepEqual(retried, []int64{ids[1]}) {
		t.Errorf("retry of every failed one: %v, %v; want [%d]", retried, err, ids[1])
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 5, NewSubmission{})
	inFlight := oldestFirst(t, q, 1)
	paused := func() bool {
		t.Helper()
		return pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submissions WHERE id = $1 AND paused", id) == 1
	}
	for range 2 { // idempotent
		if _, err := q.Pause(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if !paused() {
			t.Fatal("not paused after Pause")
		}
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != 0 {
			t.Errorf("%d chunks reservable while paused; want 0", n)
		}
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1 AND ready_at = 'infinity'", id); n != 5 {
			t.Errorf("%d chunks held by the pause; want 5", n)
		}
	}
	if got := oldestFirst(t, q, 10); len(got) != 0 {
		t.Fatalf("reserve while paused: %+v; want nothing", got)
	}

	// A reserve that waits is woken by the resume, and gets a chunk.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan []Chunk, 1)
	go func() {
		c, _ := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 20 * time.Second, Strategy: strategy.Default})
		got <- c
	}()
	pgtest.Eventually(t, 20*time.Second, "the reserve waits", func() bool { return q.waiting.Waiting() > 0 })
	for range 2 { // idempotent
		if _, err := q.Resume(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if paused() {
			t.Fatal("paused after Resume")
		}
	}
	select {
	case c := <-got:
		if len(c) != 1 || c[0].SubmissionID != id {
			t.Fatalf("the waiting reserve got %+v; want a chunk of %d", c, id)
		}
	case <-ctx.Done():
		t.Fatal("a waiting reserve was not woken by the resume")
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != 5 {
		t.Errorf("%d chunks in opsq.chunks after the resume; want 5 (two of them reserved)", n)
	}

	// The chunk reserved before the pause completes as usual.
	if st, err := q.Complete(t.Context(), []Completion{{Token: inFlight[0].Token, Output: []byte("late")}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Errorf("completing the chunk reserved before the pause: %v, %v; want completed", st, err)
	}

	if _, err := q.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func(context.Context, int64) (Status, error){"Pause": q.Pause, "Resume": q.Resume} {
		if _, err := op(t.Context(), id); !errors.Is(err, ErrFinished) {
			t.Errorf("%s of a cancelled submission: err = %v; want ErrFinished", name, err)
		}
		if _, err := op(t.Context(), 12345); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of an unknown id: err = %v; want ErrNotFound", name, err)
		}
	}
}

// TestPausedInFlightCompletes: a chunk reserved before its submission was paused completes
// while the submission is paused.
func TestPausedInFlightCompletes(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 2, NewSubmission{})
	inFlight := oldestFirst(t, q, 1)
	if _, err := q.Pause(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	st, err := q.Complete(t.Context(), []Completion{{Token: inFlight[0].Token, Output: []byte("out")}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0] != opsqtype.StatusCompleted {
		t.Fatalf("completing a chunk reserved before a pause: %s; want completed (the completer completes chunks of opsq.chunks_waiting)", st[0])
	}
	if got := lines(t, q, id); !slices.Equal(got, []string{"0:completed:out", "1:pending"}) {
		t.Errorf("results: %q; want chunk 0 completed", got)
	}
}

// TestPausedInFlightFails: a chunk reserved before its submission was paused can still
// fail while the submission is paused. A fail with a retry counts the attempt and keeps
// the chunk held by the pause; a fail for good fails it. Neither answers
// already_finished, which would lose the attempt (issue 19).
func TestPausedInFlightFails(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 3, NewSubmission{Lifecycle: Lifecycle{OnFailure: json.RawMessage(`"continue"`), Policy: submissions.FailurePolicy{Continue: true}}})
	inFlight := oldestFirst(t, q, 2)
	if _, err := q.Pause(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	st, err := q.Fail(t.Context(), []Failure{
		{Token: inFlight[0].Token, Error: "later", Retry: true},
		{Token: inFlight[1].Token, Error: "bad input", Retry: false},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st, []opsqtype.TokenStatus{opsqtype.StatusRetrying, opsqtype.StatusFailed}) {
		t.Fatalf("fails of chunks reserved before the pause: %v; want [retrying failed]", st)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1 AND chunk_index = 0 AND retries = 1 AND ready_at = 'infinity'", id); n != 1 {
		t.Errorf("chunk 0 after its retry while paused: %d rows held by the pause with retries 1; want 1", n)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunk_errors WHERE submission_id = $1", id); n != 2 {
		t.Errorf("%d errors recorded; want 2", n)
	}
	s, err := q.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != opsqtype.StateInProgress || s.ChunksFailed != 1 || !s.Paused {
		t.Errorf("status %+v; want in progress, paused, 1 chunk failed", s)
	}
	if _, err := q.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	got := oldestFirst(t, q, 10)
	if len(got) != 2 || got[0].ChunkIndex != 0 || got[0].Retries != 1 || got[1].ChunkIndex != 2 {
		t.Fatalf("after the resume: %+v; want chunk 0 (its second attempt) and chunk 2", got)
	}
}
