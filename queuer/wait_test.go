package queuer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/claims"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// waitParked waits until n reserves are parked in q's queue of waiters.
func waitParked(t *testing.T, q *Queuer, n int) {
	t.Helper()
	pgtest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d reserves parked", n), func() string {
		if p := q.waiting.Parked(); p != int64(n) {
			return fmt.Sprintf("%d parked", p)
		}
		return ""
	})
}

// TestWaitersWakeOnlyWhatNewWorkServes: 200 parked reserves, then 5 one-chunk submissions:
// 5 waiters are woken and get a chunk each, and the others stay parked without scanning.
// (Before, every NOTIFY woke every waiter: 200 scans per submission.)
func TestWaitersWakeOnlyWhatNewWorkServes(t *testing.T) {
	t.Parallel()
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter) // the candidate pool copies its tracer
	q := startQueuer(t, pool)

	const parked, submissions = 200, 5
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	var served atomic.Int64
	errs := make(chan error, parked)
	for range parked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chunks, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
			if err != nil && ctx.Err() == nil {
				errs <- err
			}
			served.Add(int64(len(chunks)))
		}()
	}
	defer wg.Wait()
	defer cancel()
	waitParked(t, q, parked)

	before, wokeBefore := counter.Total(), q.waiting.Woken()
	for range submissions {
		submitN(t, q, 1, NewSubmission{})
	}
	pgtest.WaitFor(t, 30*time.Second, "every new chunk served", func() string {
		if served.Load() < submissions || q.waiting.Parked() != parked-submissions {
			return fmt.Sprintf("%d of %d chunks served, %d reserves parked", served.Load(), submissions, q.waiting.Parked())
		}
		return ""
	})
	queries, woke := counter.Total()-before, q.waiting.Woken()-wokeBefore
	t.Logf("%d parked reserves, %d one-chunk submissions: %d wake-ups, %d statements (submissions included)", parked, submissions, woke, queries)
	if woke > 2*submissions {
		t.Errorf("%d waiters woken for %d new chunks; want at most %d", woke, submissions, 2*submissions)
	}
	if queries > 200 {
		t.Errorf("%d statements for %d one-chunk submissions with %d parked reserves; want at most 200 (waking every waiter costs thousands)", queries, submissions, parked)
	}
	select {
	case err := <-errs:
		t.Errorf("a parked reserve: %v", err)
	default:
	}
}

// TestWaitersBounded: beyond MaxWaiters, a reserve that would wait and a status wait get
// ErrTooManyWaiters; a reserve without a wait is still served.
func TestWaitersBounded(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	const max = 20
	q, err := New(t.Context(), Config{Pool: pool, MaxWaiters: max,
		Instance: claims.Instance{ID: fmt.Sprintf("test-%d", instanceSeq.Add(1)), AdvertiseURL: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
		}()
	}
	waitParked(t, q, max)
	_, err = q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
	if !errors.Is(err, ErrTooManyWaiters) {
		t.Errorf("reserve %d with a wait, bound %d: err = %v; want ErrTooManyWaiters", max+1, max, err)
	}
	id := submitN(t, q, 1, NewSubmission{})
	if _, err := q.WaitFinished(t.Context(), id, time.Minute); !errors.Is(err, ErrTooManyWaiters) {
		t.Errorf("status wait beyond the bound: err = %v; want ErrTooManyWaiters", err)
	}
	// The submission woke one waiter, which took its chunk and left: one place is free.
	waitParked(t, q, max-1)
	if _, err := q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Strategy: strategy.Default}); err != nil {
		t.Errorf("reserve without a wait at the bound: %v; want served", err)
	}
}

// TestWaitersDefaultBound: with the default bound, the 20 001st waiter gets
// ErrTooManyWaiters. The first 20 000 are counted directly (as status waits are), not
// started as requests.
func TestWaitersDefaultBound(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	for i := range MaxWaitersDefault {
		if err := q.waiting.Admit(t.Context()); err != nil {
			t.Fatalf("waiter %d: %v", i+1, err)
		}
	}
	_, err := q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
	if !errors.Is(err, ErrTooManyWaiters) {
		t.Errorf("reserve %d with a wait: err = %v; want ErrTooManyWaiters", MaxWaitersDefault+1, err)
	}
	q.waiting.Done(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 50 * time.Millisecond, Strategy: strategy.Default}); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("reserve %d with a wait: err = %v; want admitted", MaxWaitersDefault, err)
	}
}
