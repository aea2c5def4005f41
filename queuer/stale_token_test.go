package queuer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// The stale-token cases of DESIGN.md §8: every hand-out of a chunk is a new attempt, the
// new owner's included; a fail or extend whose token names an older attempt is lost and
// changes nothing; the new holder's complete wins.

// reserveAgain waits (up to a minute) until q hands out a chunk, and returns it.
func reserveAgain(t *testing.T, q *Queuer) Chunk {
	t.Helper()
	var got []Chunk
	pgtest.WaitFor(t, time.Minute, "the chunk handed out again", func() string {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var err error
		got, err = q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Hour, Wait: 2 * time.Second, Strategy: strategy.Default})
		switch {
		case err != nil:
			return err.Error()
		case len(got) != 1:
			return fmt.Sprintf("%d chunks", len(got))
		}
		return ""
	})
	return got[0]
}

// checkStaleTokenLost checks that the fails (with and without retry) and the extend of
// stale, through q, are lost, and that the chunk is still pending at attempt retries, its
// submission in progress with nothing failed.
func checkStaleTokenLost(t *testing.T, q *Queuer, stale Chunk, retries int32) {
	t.Helper()
	for _, retry := range []bool{true, false} {
		st, err := q.Fail(t.Context(), []Failure{{Token: stale.Token, Error: "from the old holder", Retry: retry}})
		if err != nil || st[0] != opsqtype.StatusLost {
			t.Errorf("fail (retry %v) of the stale token: %v, %v; want lost", retry, st, err)
		}
	}
	ext, err := q.Extend(t.Context(), []string{stale.Token}, time.Hour, false)
	if err != nil || ext[0].Status != opsqtype.StatusLost {
		t.Errorf("extend of the stale token: %+v, %v; want lost", ext, err)
	}
	if r := readChunkRow(t, q.cfg.Pool, stale.SubmissionID, stale.ChunkIndex); !r.pending || r.retries != retries {
		t.Errorf("after the stale token's fails the chunk is pending %v with %d retries; want pending with %d", r.pending, r.retries, retries)
	}
	st, err := q.Status(t.Context(), stale.SubmissionID)
	if err != nil || st.State != opsqtype.StateInProgress || st.ChunksFailed != 0 {
		t.Errorf("after the stale token's fails the submission is %+v (%v); want in progress, nothing failed", st, err)
	}
}

// completeNew completes fresh through q and checks that it wins and finishes the
// submission.
func completeNew(t *testing.T, q *Queuer, fresh Chunk) {
	t.Helper()
	if st, err := q.Complete(t.Context(), []Completion{{Token: fresh.Token, Output: []byte("new holder")}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("complete of the new holder's token: %v, %v; want completed", st, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := q.WaitFinished(ctx, fresh.SubmissionID, 30*time.Second)
	if err != nil || st.State != opsqtype.StateCompleted {
		t.Fatalf("after the new holder's complete the submission is %+v (%v); want completed", st, err)
	}
}

// TestStaleTokenAcrossADrain: a stop abandons a reservation (its attempt counted, the
// shard released at generation + 1); another instance hands the chunk out again. The old
// token's fail and extend are lost, whichever instance they reach, and the new holder
// completes.
func TestStaleTokenAcrossADrain(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	submitN(t, q, 1, NewSubmission{Lifecycle: retryAtOnce})
	old := reserveN(t, q, ReserveRequest{Lease: time.Hour})[0]

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a second signal: release everything now
	if err := q.Drain(ctx); err == nil {
		t.Fatal("Drain with its context ended returned nil; want the context's error")
	}
	other := startQueuer(t, pool)
	fresh := reserveAgain(t, other)
	if fresh.SubmissionID != old.SubmissionID || fresh.ChunkIndex != old.ChunkIndex || fresh.Retries != 1 {
		t.Fatalf("the new holder got %+v; want the abandoned chunk with retries 1", fresh)
	}
	oldTok, _ := tokens.Parse(old.Token)
	freshTok, _ := tokens.Parse(fresh.Token)
	if freshTok.Generation <= oldTok.Generation {
		t.Fatalf("new token's generation %d; want above the old one's %d", freshTok.Generation, oldTok.Generation)
	}
	checkStaleTokenLost(t, other, old, 1)
	if st, err := q.Fail(t.Context(), []Failure{{Token: old.Token, Error: "to the drained instance", Retry: true}}); err != nil || st[0] != opsqtype.StatusLost {
		t.Errorf("fail of the stale token at the drained instance: %v, %v; want lost", st, err)
	}
	if ext, err := other.Extend(t.Context(), []string{fresh.Token}, time.Hour, false); err != nil || ext[0].Status != opsqtype.StatusExtended {
		t.Errorf("extend of the new holder's token: %+v, %v; want extended", ext, err)
	}
	completeNew(t, other, fresh)
}

// TestStaleTokenAcrossALeaseExpiry: a lease runs out (its attempt counted by the owner)
// and the chunk is handed out again by the same instance, at the same generation. The old
// token's fail and extend are lost; the new holder completes.
func TestStaleTokenAcrossALeaseExpiry(t *testing.T) {
	t.Parallel()
	q, _, clock := setupClock(t)
	submitN(t, q, 1, NewSubmission{Lifecycle: retryAtOnce})
	old := reserveN(t, q, ReserveRequest{Lease: 100 * time.Millisecond})[0]
	clock.Add(time.Second) // the lease runs out
	fresh := reserveAgain(t, q)
	if fresh.SubmissionID != old.SubmissionID || fresh.ChunkIndex != old.ChunkIndex || fresh.Retries != 1 {
		t.Fatalf("after the expiry got %+v; want the chunk with retries 1", fresh)
	}
	checkStaleTokenLost(t, q, old, 1)
	completeNew(t, q, fresh)
}

// TestStaleTokenAcrossAForceRelease: the shard is taken away without a stop (an
// operator's force_release_shard.sql: generation + 1, no attempt counted); the owner
// notices at its renewal, drops the reservation, claims the shard again at a higher
// generation and hands the chunk out again with the same retries count. The two tokens
// name the same count but not the same attempt: the old one's fail and extend are lost,
// and the new holder completes.
func TestStaleTokenAcrossAForceRelease(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	pgtest.SetTimings(t, pool, pgtest.Timings{Renew: 200 * time.Millisecond})
	q := startQueuer(t, pool)
	submitN(t, q, 1, NewSubmission{Lifecycle: retryAtOnce})
	old := reserveN(t, q, ReserveRequest{Lease: time.Hour})[0]
	oldTok, _ := tokens.Parse(old.Token)
	if _, err := pool.Exec(t.Context(), `UPDATE opsq.shard_claims SET claimant = NULL, generation = generation + 1,
		soft_expires_at = NULL, hard_expires_at = NULL, inflight = 0, draining = false WHERE shard = $1`, oldTok.Shard); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitFor(t, time.Minute, "the owner to drop the lost shard's reservation", func() string {
		if _, ok := q.reserver.Get(old.Token); ok {
			return "still held"
		}
		return ""
	})
	fresh := reserveAgain(t, q)
	freshTok, _ := tokens.Parse(fresh.Token)
	if fresh.SubmissionID != old.SubmissionID || fresh.ChunkIndex != old.ChunkIndex || freshTok.Generation <= oldTok.Generation+1 {
		t.Fatalf("after the force-release got %+v at generation %d; want the chunk above generation %d", fresh, freshTok.Generation, oldTok.Generation+1)
	}
	checkStaleTokenLost(t, q, old, fresh.Retries)
	completeNew(t, q, fresh)
}

// TestStaleTokenAcrossAProducerRetry is the audit's sequence (issue 31, finding 1): a
// one-chunk "continue" submission; T1 fails its chunk for good, the producer retries the
// submission (one by one, or in bulk), a new holder is handed the chunk, then T1 fails it
// again — through another instance — with or without retry. The retry gave the chunk a
// fresh attempt budget, not the identity of T1's attempt: T1's fail and extend are lost
// and change nothing, and the new holder's complete wins. The last cases move the chunk
// through the other statements that carry its attempt (a pause and a resume; a retry's
// backoff in chunks_waiting and its promotion) before the new holder gets it.
func TestStaleTokenAcrossAProducerRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		retry, bulk bool
		// then, if set, runs after the producer's retry and returns the new holder's chunk
		// and its retries count.
		then func(t *testing.T, q *Queuer, id int64) (Chunk, int32)
	}{
		{name: "fail", retry: false},
		{name: "fail with retry", retry: true},
		{name: "fail after a bulk retry", retry: false, bulk: true},
		{name: "fail after a pause and a resume", retry: true, then: func(t *testing.T, q *Queuer, id int64) (Chunk, int32) {
			if _, err := q.Pause(t.Context(), id); err != nil {
				t.Fatalf("pause: %v", err)
			}
			if _, err := q.Resume(t.Context(), id); err != nil {
				t.Fatalf("resume: %v", err)
			}
			return reserveAgain(t, q), 0
		}},
		{name: "fail after a backoff", retry: false, then: func(t *testing.T, q *Queuer, id int64) (Chunk, int32) {
			t2 := reserveAgain(t, q)
			st, err := q.Fail(t.Context(), []Failure{{Token: t2.Token, Error: "wait a little", Retry: true, RetryAfter: 10 * time.Millisecond}})
			if err != nil || st[0] != wire.StatusRetrying {
				t.Fatalf("T2's fail: %v, %v; want retrying", st, err)
			}
			return reserveAgain(t, q), 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, pool := setup(t)
			id := submitN(t, q, 1, NewSubmission{Lifecycle: Lifecycle{OnFailure: json.RawMessage(`"continue"`),
				Policy: FailurePolicy{Continue: true}, Backoff: retryAtOnce.Backoff}})
			t1 := reserveN(t, q, ReserveRequest{Lease: time.Hour})[0]
			if st, err := q.Fail(t.Context(), []Failure{{Token: t1.Token, Error: "first holder gave up", Retry: false}}); err != nil || st[0] != wire.StatusFailed {
				t.Fatalf("T1's fail: %v, %v; want failed", st, err)
			}
			if tc.bulk {
				ids, err := q.RetryMany(t.Context(), ListOptions{State: wire.StateFailed}, RetryOptions{})
				if err != nil || len(ids) != 1 || ids[0] != id {
					t.Fatalf("bulk retry: %v, %v; want [%d]", ids, err, id)
				}
			} else if _, err := q.Retry(t.Context(), id, RetryOptions{}); err != nil {
				t.Fatalf("retry: %v", err)
			}
			var fresh Chunk
			var retries int32
			if tc.then != nil {
				fresh, retries = tc.then(t, q, id)
			} else {
				fresh = reserveAgain(t, q)
			}
			if fresh.SubmissionID != t1.SubmissionID || fresh.ChunkIndex != t1.ChunkIndex || int32(fresh.Retries) != retries {
				t.Fatalf("after the retry got %+v; want the chunk with retries %d (a fresh budget)", fresh, retries)
			}
			// Started now, another instance does not take the chunk's shard from q: the new
			// holder's reservation holds it.
			other := startQueuer(t, pool)

			st, err := other.Fail(t.Context(), []Failure{{Token: t1.Token, Error: "first holder, again", Retry: tc.retry}})
			if err != nil || st[0] != wire.StatusLost {
				t.Errorf("T1's fail (retry %v) after the producer's retry: %v, %v; want lost", tc.retry, st, err)
			}
			if ext, err := other.Extend(t.Context(), []string{t1.Token}, time.Hour, false); err != nil || ext[0].Status != wire.StatusLost {
				t.Errorf("T1's extend after the producer's retry: %+v, %v; want lost", ext, err)
			}
			if r := readChunkRow(t, pool, id, t1.ChunkIndex); !r.pending || r.retries != retries {
				t.Errorf("after T1's stale fail the chunk is pending %v with %d retries; want pending with %d", r.pending, r.retries, retries)
			}
			if _, ok := q.reserver.Get(fresh.Token); !ok {
				t.Errorf("after T1's stale fail the new holder's reservation is gone; want it held")
			}
			if st, err := q.Status(t.Context(), id); err != nil || st.State != wire.StateInProgress || st.ChunksFailed != 0 {
				t.Errorf("after T1's stale fail the submission is %+v (%v); want in progress, nothing failed", st, err)
			}
			if ext, err := q.Extend(t.Context(), []string{fresh.Token}, time.Hour, false); err != nil || ext[0].Status != wire.StatusExtended {
				t.Errorf("the new holder's extend: %+v, %v; want extended", ext, err)
			}
			completeNew(t, q, fresh)
		})
	}
}

// TestLateCompleteAcrossAProducerRetry: a chunk failed for good and then retried by its
// producer is pending again, with the same input; the first completion of it wins, as
// every first completion does (DESIGN.md §8), even one by a token of an attempt before
// the retry. Its fail, by contrast, is lost (TestStaleTokenAcrossAProducerRetry).
func TestLateCompleteAcrossAProducerRetry(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 1, NewSubmission{Lifecycle: Lifecycle{OnFailure: json.RawMessage(`"continue"`),
		Policy: FailurePolicy{Continue: true}, Backoff: retryAtOnce.Backoff}})
	t1 := reserveN(t, q, ReserveRequest{Lease: time.Hour})[0]
	if st, err := q.Fail(t.Context(), []Failure{{Token: t1.Token, Error: "gave up", Retry: false}}); err != nil || st[0] != wire.StatusFailed {
		t.Fatalf("T1's fail: %v, %v; want failed", st, err)
	}
	if _, err := q.Retry(t.Context(), id, RetryOptions{}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	t2 := reserveAgain(t, q)
	completeNew(t, q, t1)
	if st, err := q.Complete(t.Context(), []Completion{{Token: t2.Token, Output: []byte("too late")}}); err != nil || st[0] != wire.StatusAlreadyFinished {
		t.Errorf("T2's complete after T1's: %v, %v; want already_finished", st, err)
	}
}
