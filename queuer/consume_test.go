package queuer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/reserver"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// retryAtOnce is the lifecycle of a submission whose failed attempts are retried with no
// backoff: reservable again at once.
var retryAtOnce = Lifecycle{Backoff: submissions.Backoff{Factor: 2, Max: time.Minute}}

func reserveN(t *testing.T, q *Queuer, req ReserveRequest) []Chunk {
	t.Helper()
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Lease == 0 {
		req.Lease = time.Minute
	}
	if req.Strategy.Kind == "" {
		req.Strategy = strategy.Default
	}
	chunks, err := q.Reserve(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

func TestReserveCompleteWholeSubmission(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 300, NewSubmission{Metadata: "meta"})
	seen := map[int32]bool{}
	requests := 0
	for len(seen) < 300 {
		chunks := reserveN(t, q, ReserveRequest{Max: 64})
		if len(chunks) == 0 {
			t.Fatalf("reserve returned nothing with %d of 300 chunks handed out", len(seen))
		}
		var items []Completion
		for _, c := range chunks {
			if seen[c.ChunkIndex] {
				t.Fatalf("chunk %d handed out twice", c.ChunkIndex)
			}
			seen[c.ChunkIndex] = true
			if want := fmt.Sprintf("chunk-%d", c.ChunkIndex); string(c.Input) != want || c.Metadata != "meta" {
				t.Fatalf("chunk %d: input %q metadata %q; want %q, meta", c.ChunkIndex, c.Input, c.Metadata, want)
			}
			items = append(items, Completion{Token: c.Token, Output: fmt.Appendf(nil, "out-%d", c.ChunkIndex)})
		}
		status, err := q.Complete(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		requests++
		for i, st := range status {
			if st != opsqtype.StatusCompleted {
				t.Fatalf("completion %d: %s; want completed", i, st)
			}
		}
	}
	st, err := q.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateCompleted || st.ChunksDone != 300 {
		t.Fatalf("after completing every chunk: %s with %d done; want completed with 300", st.State, st.ChunksDone)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_completed WHERE submission_id = $1", id); n != 300 {
		t.Fatalf("%d completed chunk rows; want 300", n)
	}
	// One request at a time: each is a batch of its own, stored as one row.
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.completed_batches WHERE submission_id = $1", id); n != int64(requests) {
		t.Fatalf("%d rows in completed_batches for %d complete requests; want one per request", n, requests)
	}
	if q.reserver.Len() != 0 {
		t.Fatalf("%d reservations left; want 0", q.reserver.Len())
	}
}

func TestOldestAndNewestFirst(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	old := submitN(t, q, 5, NewSubmission{})
	submitN(t, q, 5, NewSubmission{})
	recent := submitN(t, q, 5, NewSubmission{})
	c := reserveN(t, q, ReserveRequest{Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(c) != 1 || c[0].SubmissionID != old || c[0].ChunkIndex != 0 {
		t.Fatalf("oldest_first gave %+v; want chunk 0 of %d", c, old)
	}
	c = reserveN(t, q, ReserveRequest{Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(c) != 1 || c[0].SubmissionID != old || c[0].ChunkIndex != 1 {
		t.Fatalf("second oldest_first gave %+v; want chunk 1 of %d", c, old)
	}
	c = reserveN(t, q, ReserveRequest{Strategy: strategy.Node{Kind: strategy.NewestFirst}})
	if len(c) != 1 || c[0].SubmissionID != recent {
		t.Fatalf("newest_first gave %+v; want a chunk of %d", c, recent)
	}
}

func TestFailRetriesThenFailsTheSubmission(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	maxRetries := 1
	id := submitN(t, q, 3, NewSubmission{MaxRetries: &maxRetries, Lifecycle: retryAtOnce})
	var target int32 = -1
	for attempt := range 2 {
		var tok string
		for _, c := range reserveN(t, q, ReserveRequest{Max: 3}) {
			if target == -1 {
				target = c.ChunkIndex
			}
			if c.ChunkIndex == target {
				tok = c.Token
				if c.Retries != int32(attempt) {
					t.Fatalf("attempt %d: chunk carries retries %d; want %d", attempt, c.Retries, attempt)
				}
			}
		}
		if tok == "" {
			t.Fatalf("attempt %d: chunk %d not handed out again", attempt, target)
		}
		status, err := q.Fail(t.Context(), []Failure{{Token: tok, Error: "boom", Retry: true}})
		if err != nil {
			t.Fatal(err)
		}
		want := opsqtype.StatusRetrying
		if attempt == 1 {
			want = opsqtype.StatusFailed // max_retries 1: two attempts
		}
		if status[0] != want {
			t.Fatalf("attempt %d: fail → %s; want %s", attempt, status[0], want)
		}
		if again, _ := q.Fail(t.Context(), []Failure{{Token: tok, Error: "boom", Retry: true}}); again[0] != opsqtype.StatusAlreadyFinished {
			t.Fatalf("attempt %d: repeated failure → %s; want already_finished", attempt, again[0])
		}
	}
	st, err := q.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateFailed || st.Error == nil || *st.Error != "boom" || st.FailedChunkIndex == nil || int32(*st.FailedChunkIndex) != target {
		t.Fatalf("status %+v; want failed at chunk %d with error boom", st, target)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1 AND skipped", id); n != 2 {
		t.Fatalf("%d skipped chunks; want the other 2", n)
	}
	if q.reserver.Len() != 0 {
		t.Fatalf("%d reservations left after the submission failed; want 0", q.reserver.Len())
	}
}

func TestFailWithoutRetry(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 1, NewSubmission{})
	c := reserveN(t, q, ReserveRequest{})
	status, err := q.Fail(t.Context(), []Failure{{Token: c[0].Token, Error: "bad input", Retry: false}, {Token: "nonsense"}})
	if err != nil {
		t.Fatal(err)
	}
	if status[0] != opsqtype.StatusFailed || status[1] != opsqtype.StatusUnknown {
		t.Fatalf("statuses %v; want [failed unknown]", status)
	}
	if st, _ := q.Status(t.Context(), id); st.State != opsqtype.StateFailed {
		t.Fatalf("state %s; want failed", st.State)
	}
}

func TestExpiredLeaseCountsAnAttempt(t *testing.T) {
	t.Parallel()
	q, _, clock := setupClock(t)
	zero := 0
	id := submitN(t, q, 1, NewSubmission{})
	doomed := submitN(t, q, 1, NewSubmission{MaxRetries: &zero})
	chunks := reserveN(t, q, ReserveRequest{Max: 2, Lease: 100 * time.Millisecond})
	if len(chunks) != 2 {
		t.Fatalf("reserved %d chunks; want 2", len(chunks))
	}
	// The lease runs out: the chunk comes back with one more retry, the other fails.
	clock.Add(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	again, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 10 * time.Second, Strategy: strategy.Default})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].SubmissionID != id || again[0].Retries != 1 {
		t.Fatalf("after expiry got %+v; want chunk of %d with retries 1", again, id)
	}
	st, err := q.WaitFinished(ctx, doomed, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateFailed || st.Error == nil || *st.Error != "reservation expired" {
		t.Fatalf("submission with max_retries 0 after expiry: %+v; want failed, reservation expired", st)
	}
	if status, _ := q.Complete(t.Context(), []Completion{{Token: chunks[0].Token, Output: []byte("late")}}); status[0] != opsqtype.StatusCompleted && status[0] != opsqtype.StatusAlreadyFinished {
		t.Fatalf("late completion → %s", status[0])
	}
}

func TestReserveWaitIsWokenByNewWork(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	got := make(chan []Chunk, 1)
	go func() {
		c, _ := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
		got <- c
	}()
	id := submitN(t, q, 1, NewSubmission{})
	select {
	case c := <-got:
		if len(c) != 1 || c[0].SubmissionID != id {
			t.Fatalf("woken reserve got %+v; want the new chunk", c)
		}
	case <-ctx.Done():
		t.Fatal("a waiting reserve was not woken by the new submission")
	}
}

func TestExtend(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 1, NewSubmission{})
	// A lease of 10 s: short beside the minute it is extended to, long enough that it does
	// not run out before the extend on a loaded machine (300 ms did, under stress -c 2).
	c := reserveN(t, q, ReserveRequest{Lease: 10 * time.Second})
	res, err := q.Extend(t.Context(), []string{c[0].Token, "junk"}, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != opsqtype.StatusExtended || res[0].ExpiresAt == nil || time.Until(*res[0].ExpiresAt) < 50*time.Second {
		t.Fatalf("extend → %+v; want extended by a minute", res[0])
	}
	if res[1].Status != opsqtype.StatusUnknown {
		t.Fatalf("extend of junk → %s; want unknown", res[1].Status)
	}
	if r, ok := q.reserver.Get(c[0].Token); !ok || time.Until(r.ExpiresAt) < 50*time.Second {
		t.Fatal("the reservation was not extended")
	}
	if st, err := q.Complete(t.Context(), []Completion{{Token: c[0].Token}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("complete after extend → %v, %v; want completed", st, err)
	}
	if res, _ := q.Extend(t.Context(), []string{c[0].Token}, time.Minute, false); res[0].Status != opsqtype.StatusAlreadyFinished {
		t.Fatalf("extend after complete → %s; want already_finished", res[0].Status)
	}
}

func TestConcurrentConsumersHandOutEachChunkOnce(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	const total = 3000
	for range 3 {
		submitN(t, q, total/3, NewSubmission{})
	}
	consumeAllOnce(t, q, pool, 16, total, func(int) ReserveRequest {
		return ReserveRequest{Max: 10, Lease: time.Minute, Strategy: strategy.Default}
	})
}

// consumeAllOnce runs workers consumers that reserve (worker g asking with ask(g)) and
// complete until no reserve answers anything, and fails unless each of the total chunks
// of the 3 submissions in the queue was handed out exactly once and all 3 completed.
func consumeAllOnce(t *testing.T, q *Queuer, pool *pgxpool.Pool, workers, total int, ask func(g int) ReserveRequest) {
	t.Helper()
	pgtest.HandOutEachOnce(t, workers, total, func(g int) ([]reserver.Key, error) {
		chunks, err := q.Reserve(context.Background(), ask(g))
		if err != nil || len(chunks) == 0 {
			return nil, err
		}
		keys, items := make([]reserver.Key, len(chunks)), make([]Completion, len(chunks))
		for i, c := range chunks {
			keys[i], items[i] = reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex}, Completion{Token: c.Token}
		}
		_, err = q.Complete(context.Background(), items)
		return keys, err
	})
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submissions_completed"); n != 3 {
		t.Fatalf("%d submissions completed; want 3", n)
	}
}

// TestOrderedReserveDoesNotRescanReservedHead holds more chunks at the head of the
// oldest_first order than one reserve may read past (scanRowsMax): resume hints must still
// let every reserve find the free chunks behind them.
func TestOrderedReserveDoesNotRescanReservedHead(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 30_000, NewSubmission{})
	oldest := strategy.Node{Kind: strategy.OldestFirst}
	held := 0
	for held < 25_000 {
		c := reserveN(t, q, ReserveRequest{Max: 1000, Strategy: oldest})
		if len(c) == 0 {
			t.Fatalf("oldest_first returned nothing with %d of 30 000 chunks held", held)
		}
		held += len(c)
	}
	for i := range 20 {
		c := reserveN(t, q, ReserveRequest{Max: 1, Strategy: oldest})
		if len(c) != 1 || c[0].SubmissionID != id {
			t.Fatalf("reserve %d behind %d held chunks got %d chunks; want 1", i, held, len(c))
		}
		held++
	}
}
