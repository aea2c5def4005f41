package queuer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// Submissions after other submissions (DESIGN.md §3 "Dependencies"), on several
// instances: a child hands nothing out until its parents finished, whichever instance saw
// the finish; a failed parent cancels the chain, its retry re-arms it.

// cluster starts n instances on one fresh database and waits until each holds shards, so
// that every instance's reserve reads its own and a finish may be seen by any of them.
func cluster(t *testing.T, n int) ([]*Queuer, *pgxpool.Pool) {
	t.Helper()
	q1, pool := setup(t)
	qs := []*Queuer{q1}
	for range n - 1 {
		qs = append(qs, startQueuer(t, pool))
	}
	pgtest.Eventually(t, 30*time.Second, "the instances split the shards", func() bool {
		for _, q := range qs {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	return qs, pool
}

// after submits n chunks after parents with policy on q.
func after(t *testing.T, q *Queuer, n int, policy string, parents ...int64) int64 {
	t.Helper()
	return submitN(t, q, n, NewSubmission{After: parents, AfterPolicy: policy})
}

// burn reserves from every instance in turn and completes what it gets until submission id
// is completed; every chunk handed out meanwhile must be id's.
func burn(t *testing.T, qs []*Queuer, id int64) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		st, err := qs[0].Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == opsqtype.StateCompleted {
			return
		}
		if st.State != opsqtype.StateInProgress || time.Now().After(deadline) {
			t.Fatalf("submission %d: %s, %d of %d chunks done; want it completed by burning its chunks", id, st.State, st.ChunksDone, st.ChunksTotal)
		}
		q := qs[i%len(qs)]
		chunks, err := q.Reserve(ctx, ReserveRequest{Max: 100, Lease: time.Minute, Wait: 500 * time.Millisecond, Strategy: strategy.Default})
		if err != nil {
			t.Fatal(err)
		}
		items := make([]Completion, len(chunks))
		for j, c := range chunks {
			if c.SubmissionID != id {
				t.Fatalf("a reserve handed out chunk %d of submission %d while burning %d; want only %d's (a child waiting on its parents hands nothing out)",
					c.ChunkIndex, c.SubmissionID, id, id)
			}
			items[j] = Completion{Token: c.Token, Output: []byte("ok")}
		}
		if len(items) > 0 {
			if _, err := q.Complete(ctx, items); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// failOne reserves a chunk of submission id (its only pending ones) and fails it for good.
func failOne(t *testing.T, qs []*Queuer, id int64) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		q := qs[i%len(qs)]
		chunks, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 500 * time.Millisecond, Strategy: strategy.Default})
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) == 0 {
			continue
		}
		if chunks[0].SubmissionID != id {
			t.Fatalf("reserved a chunk of %d; want one of %d", chunks[0].SubmissionID, id)
		}
		if _, err := q.Fail(ctx, []Failure{{Token: chunks[0].Token, Error: "broken", Retry: false}}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no chunk of %d to fail within 30 s", id)
}

// waitState waits until submission id is in state on q.
func waitState(t *testing.T, q *Queuer, id int64, state opsqtype.State) Status {
	t.Helper()
	var st Status
	pgtest.Eventually(t, 30*time.Second, fmt.Sprintf("submission %d %s", id, state), func() bool {
		var err error
		st, err = q.Status(t.Context(), id)
		return err == nil && st.State == state
	})
	return st
}

// reservable counts submission id's chunks in opsq.chunks.
func reservable(t *testing.T, pool *pgxpool.Pool, id int64) int64 {
	t.Helper()
	return pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id)
}

// TestDependencyChainCompletesInOrder: a chain a → b → c over three instances. b and c
// are created at once and hand nothing out (burn fails on any chunk of theirs while a
// runs); each starts once its parent completes, whichever instance completed its last
// chunk, and the status says what each waits on.
func TestDependencyChainCompletesInOrder(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 3)
	a := submitN(t, qs[0], 40, NewSubmission{})
	b := after(t, qs[1], 30, "", a)
	c := after(t, qs[2], 20, AfterCompleted, b)
	for _, id := range []int64{b, c} {
		if n := reservable(t, pool, id); n != 0 {
			t.Fatalf("child %d has %d chunks reservable at its submit; want 0 while its parent runs", id, n)
		}
	}
	st, err := qs[0].Status(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dependencies == nil || !slices.Equal(st.Dependencies.After, []int64{b}) || !slices.Equal(st.Dependencies.WaitingOn, []int64{b}) ||
		st.Dependencies.Policy != AfterCompleted || st.State != opsqtype.StateInProgress {
		t.Fatalf("status of c: %s, dependencies %+v; want in_progress after [%d] waiting on [%d], policy completed", st.State, st.Dependencies, b, b)
	}
	if err := qs[2].deps.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := qs[2].Metrics().ChildrenWaiting; n != 2 {
		t.Errorf("children waiting, as the re-check counts them: %d; want 2 (b and c)", n)
	}
	burn(t, qs, a)
	burn(t, qs, b)
	if st, _ := qs[1].Status(t.Context(), c); st.State != opsqtype.StateInProgress || len(st.Dependencies.WaitingOn) != 0 {
		t.Fatalf("status of c once b completed: %s waiting on %v; want in_progress waiting on nothing", st.State, st.Dependencies.WaitingOn)
	}
	burn(t, qs, c)
	if err := qs[2].deps.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := qs[2].Metrics().ChildrenWaiting; n != 0 {
		t.Errorf("children waiting once the chain completed: %d; want 0", n)
	}
}

// TestDependentStartsPromptly: a child's chunks become reservable soon after the last
// chunk of its parent is completed on an instance whose own loop over children is
// stopped: the other instance hears the finish (NOTIFY) and starts the child. The timing
// target itself (1 s) is opsq bench's; this waits with a generous margin, and logs.
func TestDependentStartsPromptly(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 2)
	ctx := t.Context()
	a := submitN(t, qs[0], 1, NewSubmission{})
	b := after(t, qs[0], 5, "", a)
	var chunks []Chunk
	var owner *Queuer
	for i := 0; len(chunks) == 0; i++ {
		if i > 100 {
			t.Fatal("the parent's chunk was not handed out")
		}
		owner = qs[i%2]
		var err error
		if chunks, err = owner.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 500 * time.Millisecond, Strategy: strategy.Default}); err != nil {
			t.Fatal(err)
		}
	}
	owner.deps.Stop() // the finisher does not act on it itself
	if _, err := owner.Complete(ctx, []Completion{{Token: chunks[0].Token}}); err != nil {
		t.Fatal(err)
	}
	took := pgtest.Eventually(t, 30*time.Second, "the child's chunks reservable", func() bool { return reservable(t, pool, b) == 5 })
	t.Logf("the child's chunks were reservable %s after its parent's last complete returned", took)
}

// TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt: a parent that fails cancels
// its child and the child's child, each failure naming its own parent; a retry of the
// parent brings both back waiting, and they go on when it completes.
func TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 2)
	retries := 0
	a := submitN(t, qs[0], 1, NewSubmission{MaxRetries: &retries})
	b := after(t, qs[1], 10, "", a)
	c := after(t, qs[0], 10, "", b)
	failOne(t, qs, a)
	waitState(t, qs[0], a, opsqtype.StateFailed)
	for _, tc := range []struct {
		id  int64
		why string
	}{{b, fmt.Sprintf("parent %d failed", a)}, {c, fmt.Sprintf("parent %d cancelled", b)}} {
		st := waitState(t, qs[1], tc.id, opsqtype.StateCancelled)
		if st.Dependencies == nil || st.Dependencies.Failure != tc.why {
			t.Errorf("cancelled child %d: dependencies %+v; want its failure %q", tc.id, st.Dependencies, tc.why)
		}
		if st.ChunksSkipped != 10 {
			t.Errorf("cancelled child %d: %d chunks skipped; want 10", tc.id, st.ChunksSkipped)
		}
	}

	if _, err := qs[1].Retry(t.Context(), a, RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{b, c} {
		st := waitState(t, qs[0], id, opsqtype.StateInProgress)
		if st.Dependencies.Failure != "" {
			t.Errorf("re-armed child %d still shows failure %q; want none", id, st.Dependencies.Failure)
		}
		if n := reservable(t, pool, id); n != 0 {
			t.Fatalf("re-armed child %d has %d chunks reservable; want 0 while its parent runs again", id, n)
		}
	}
	burn(t, qs, a)
	burn(t, qs, b)
	burn(t, qs, c)
}

// TestDependencyCancelledParentAndFinishedPolicy: a cancelled parent cancels a child of
// policy completed, and starts one of policy finished.
func TestDependencyCancelledParentAndFinishedPolicy(t *testing.T) {
	t.Parallel()
	qs, _ := cluster(t, 2)
	a := submitN(t, qs[0], 5, NewSubmission{})
	strict := after(t, qs[0], 5, "", a)
	loose := after(t, qs[1], 5, AfterFinished, a)
	if _, err := qs[1].Cancel(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, qs[0], strict, opsqtype.StateCancelled)
	if want := fmt.Sprintf("parent %d cancelled", a); st.Dependencies.Failure != want {
		t.Errorf("child of policy completed: failure %q; want %q", st.Dependencies.Failure, want)
	}
	burn(t, qs, loose)
}

// TestDependencyParentsAlreadyFinished: parents finished before the child count at once:
// completed ones let it start at its submit, a failed one (policy completed) cancels it.
func TestDependencyParentsAlreadyFinished(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 1)
	done := submitN(t, qs[0], 2, NewSubmission{})
	burn(t, qs, done)
	empty := submitN(t, qs[0], 0, NewSubmission{}) // completed at once
	child := after(t, qs[0], 3, "", done, empty)
	if n := reservable(t, pool, child); n != 3 {
		t.Errorf("child of completed parents: %d chunks reservable at once; want 3", n)
	}
	gone := submitN(t, qs[0], 2, NewSubmission{})
	if _, err := qs[0].Cancel(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	orphan := after(t, qs[0], 3, "", done, gone)
	st := waitState(t, qs[0], orphan, opsqtype.StateCancelled)
	if want := fmt.Sprintf("parent %d cancelled", gone); st.Dependencies.Failure != want {
		t.Errorf("child of a cancelled parent: failure %q; want %q", st.Dependencies.Failure, want)
	}
}

// TestDependencyBadParents: an unknown parent, one of another tenant, and too many are
// refused, naming the parent's place, and leave nothing behind.
func TestDependencyBadParents(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 1)
	q := qs[0]
	mine := submitN(t, q, 1, NewSubmission{})
	theirs := submitN(t, q, 1, NewSubmission{Tenant: "other"})
	many := make([]int64, MaxParents+1)
	for i := range many {
		many[i] = mine
	}
	for _, tc := range []struct {
		name  string
		after []int64
		index int
	}{
		{"unknown", []int64{mine, mine + 1_000_000}, 1},
		{"another tenant's", []int64{theirs}, 0},
		{"too many", many, MaxParents},
	} {
		_, err := q.Submit(t.Context(), NewSubmission{After: tc.after}, &genChunks{n: 3, failAt: -1})
		var pe *ParentError
		if !errors.As(err, &pe) || pe.Index != tc.index {
			t.Errorf("%s parent: err = %v; want a ParentError at after[%d]", tc.name, err, tc.index)
		}
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_status"); n != 2 {
		t.Errorf("%d submissions after the refused ones; want the 2 parents only", n)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_after"); n != 0 {
		t.Errorf("%d children recorded after the refused ones; want 0", n)
	}
}

// TestDependencyPauseAndResumeOfAWaitingChild: a resume of a child paused while it waits
// leaves its chunks held until its parent completes; a child paused when its parent
// completes starts at its resume.
func TestDependencyPauseAndResumeOfAWaitingChild(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 1)
	q := qs[0]
	a := submitN(t, q, 2, NewSubmission{})
	b := after(t, q, 4, "", a)
	if _, err := q.Pause(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resume(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if n := reservable(t, pool, b); n != 0 {
		t.Fatalf("resumed child still waiting on its parent: %d chunks reservable; want 0", n)
	}
	if _, err := q.Pause(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	burn(t, qs, a)
	pgtest.Eventually(t, 30*time.Second, "the paused child waits no more", func() bool {
		return pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_after WHERE id = $1 AND NOT waiting", b) == 1
	})
	if n := reservable(t, pool, b); n != 0 {
		t.Fatalf("paused child whose parent completed: %d chunks reservable; want 0 until resumed", n)
	}
	if _, err := q.Resume(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if n := reservable(t, pool, b); n != 4 {
		t.Fatalf("child resumed after its parent completed: %d chunks reservable; want 4", n)
	}
}

// TestDependencyLostArmingIsRecovered: a parent finished, but the instance that was to
// start its child died before it did (forced here: the child's chunks put back on hold
// and the child marked waiting, as the crash leaves them). The periodic re-check starts
// it; a child cancelled by a parent that was retried meanwhile (its re-arm lost) is
// re-armed by it too.
func TestDependencyLostArmingIsRecovered(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 1)
	q := qs[0]
	ctx := t.Context()
	a := submitN(t, q, 2, NewSubmission{})
	burn(t, qs, a)
	b := after(t, q, 3, "", a) // starts at once: a completed
	if n := reservable(t, pool, b); n != 3 {
		t.Fatalf("child of a completed parent: %d chunks reservable; want 3", n)
	}
	hold := `WITH m AS (DELETE FROM opsq.chunks WHERE submission_id = $1
	                     RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
	         INSERT INTO opsq.chunks_waiting (submission_id, chunk_index, shard, random_order, retries, input, attempt_base, ready_at)
	         SELECT *, 'infinity' FROM m`
	if _, err := pool.Exec(ctx, hold, b); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE opsq.submission_after SET waiting = true WHERE id = $1", b); err != nil {
		t.Fatal(err)
	}
	if err := q.deps.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := reservable(t, pool, b); n != 3 {
		t.Fatalf("after the re-check: %d chunks of the stranded child reservable; want 3", n)
	}
	burn(t, qs, b)

	// A child cancelled by its parent, whose parent's retry committed (marking it to
	// re-arm) but whose re-arm was lost: forced by cancelling the child and marking it as
	// that retry does, with the parent in progress.
	p := submitN(t, q, 2, NewSubmission{})
	c := after(t, q, 2, "", p)
	if _, err := q.Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE opsq.submission_after SET waiting = true, cancelled_by = $2, failure = 'parent failed' WHERE id = $1", c, p); err != nil {
		t.Fatal(err)
	}
	if err := q.deps.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := q.Status(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.Dependencies.Failure != "" || reservable(t, pool, c) != 0 {
		t.Fatalf("after the re-check: child %s, failure %q, %d reservable; want in_progress again, no failure, nothing reservable while its parent runs",
			st.State, st.Dependencies.Failure, reservable(t, pool, c))
	}
	burn(t, qs, p)
	burn(t, qs, c)
}

// TestDependencyNothingForAPlainWorkload: a submission without after records nothing of
// dependencies and its status has none.
func TestDependencyNothingForAPlainWorkload(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 3, NewSubmission{})
	st, err := q.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dependencies != nil {
		t.Errorf("plain submission's dependencies %+v; want nil", st.Dependencies)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_after"); n != 0 {
		t.Errorf("%d children recorded; want 0", n)
	}
}

// TestDependencyChildWithoutChunks: a child without chunks (a barrier) waits for its
// parent like any other and completes when it may start; its own child follows.
func TestDependencyChildWithoutChunks(t *testing.T) {
	t.Parallel()
	qs, pool := cluster(t, 1)
	a := submitN(t, qs[0], 2, NewSubmission{})
	barrier := after(t, qs[0], 0, "", a)
	c := after(t, qs[0], 2, "", barrier)
	if st, _ := qs[0].Status(t.Context(), barrier); st.State != opsqtype.StateInProgress {
		t.Fatalf("barrier while its parent runs: %s; want in_progress", st.State)
	}
	burn(t, qs, a)
	waitState(t, qs[0], barrier, opsqtype.StateCompleted)
	pgtest.Eventually(t, 30*time.Second, "the barrier's child reservable", func() bool { return reservable(t, pool, c) == 2 })
	burn(t, qs, c)
}
