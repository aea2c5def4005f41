package queuer

import (
	"context"
	"errors"
	"testing"
	"time"

	"opsq/queuer/opsqtype"
	"opsq/strategy"
)

// TestDrainAnswersWaitsAndAbandons: a draining instance answers its parked reserves (no
// chunks) and its status waits (the state as it is) at once, reserves nothing more, and
// when its drain ends with reservations in flight releases their shards, each reservation
// counted as a failed attempt as an expired lease is (DESIGN.md §4, Graceful shutdown);
// another instance then hands the chunk out again with its attempt counted.
func TestDrainAnswersWaitsAndAbandons(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	zero := 0
	id := submitN(t, q, 1, NewSubmission{Lifecycle: retryAtOnce})
	doomed := submitN(t, q, 1, NewSubmission{MaxRetries: &zero})
	chunks := reserveN(t, q, ReserveRequest{Max: 2, Lease: time.Hour})
	if len(chunks) != 2 {
		t.Fatalf("reserved %d chunks; want 2", len(chunks))
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type answer struct {
		chunks []Chunk
		err    error
	}
	parked := make(chan answer, 1)
	go func() {
		c, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
		parked <- answer{c, err}
	}()
	waited := make(chan error, 1)
	go func() {
		st, err := q.WaitFinished(ctx, id, time.Minute)
		if err == nil && st.State != opsqtype.StateInProgress {
			err = errors.New("state " + string(st.State) + "; want in_progress")
		}
		waited <- err
	}()
	waitParked(t, q, 1)

	drainCtx, stop := context.WithCancel(ctx)
	drained := make(chan error, 1)
	began := time.Now()
	go func() { drained <- q.Drain(drainCtx) }()
	// At once: well inside the minute the reserve and the wait would take otherwise.
	select {
	case a := <-parked:
		if a.err != nil || a.chunks == nil || len(a.chunks) != 0 {
			t.Errorf("parked reserve at the drain = %v, %v; want no chunks ([]), no error", a.chunks, a.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parked reserve was not answered within 20s of the drain")
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("status wait at the drain: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the status wait was not answered within 20s of the drain")
	}
	t.Logf("parked reserve and status wait answered %s after the drain began", time.Since(began).Round(time.Millisecond))
	if got, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default}); err != nil || len(got) != 0 {
		t.Errorf("a reserve during the drain = %v, %v; want no chunks at once", got, err)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with reservations in flight", err)
	default:
	}

	stop() // a second signal
	select {
	case err := <-drained:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Drain() after its context ended = %v; want an error wrapping context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Drain did not return within 20s of its context's end")
	}
	var held int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM opsq.shard_claims WHERE claimant IS NOT NULL").Scan(&held); err != nil || held != 0 {
		t.Errorf("%d shards claimed after the drain (%v); want none", held, err)
	}
	st, err := q.Status(ctx, doomed)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateFailed || st.Error == nil || *st.Error != errAbandoned {
		t.Errorf("submission with max_retries 0 after its reservation was abandoned: %s, error %v; want failed, %q", st.State, st.Error, errAbandoned)
	}

	other := startQueuer(t, pool)
	again, err := other.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 30 * time.Second, Strategy: strategy.Default})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].SubmissionID != id || again[0].Retries != 1 {
		t.Fatalf("another instance reserved %+v; want the abandoned chunk of %d with retries 1", again, id)
	}
}

// errAbandoned is the error recorded for an abandoned reservation.
const errAbandoned = "reservation abandoned: its instance released the shard"
