package queuer

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// forwardedReserveBudget bounds a reserve another instance forwarded here, well inside the
// forwarder's peerCallTimeout, leaving it time to read the answer.
const forwardedReserveBudget = peerCallTimeout / 2

// forwardRetryDelay is about how long a waiting reserve waits before it looks again when an
// instance it forwarded to gave no answer (between half and one and a half of it).
const forwardRetryDelay = time.Second

// Reserve reserves up to req.Max chunks: from this instance's shards; when they have none,
// from another instance that has some (forwarding); when nobody has any, it waits up to
// req.Wait for work to appear. It waits in the instance's queue of waiters (signal),
// holding no database connection, and is woken by NOTIFY and local releases as one of as
// many waiters as the new work can serve, not by polling. When Config.MaxWaiters requests
// already wait here, a reserve that would wait returns ErrTooManyWaiters.
func (q *Queuer) Reserve(ctx context.Context, req ReserveRequest) ([]Chunk, error) {
	if req.Forwarded {
		// Give up, and give the chunks back, before the forwarder does: an answer it no
		// longer reads holds its chunks until their lease runs out. Running out of that
		// budget is an empty answer ("nothing here in time"), not a fault.
		budget, cancel := context.WithTimeout(ctx, forwardedReserveBudget)
		defer cancel()
		chunks, err := q.reserve(budget, req)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return []Chunk{}, nil
		}
		return chunks, err
	}
	return q.reserve(ctx, req)
}

// reserve is Reserve within ctx.
func (q *Queuer) reserve(ctx context.Context, req ReserveRequest) ([]Chunk, error) {
	var w *waiter
	var deadline <-chan time.Time
	if req.Wait > 0 && !req.Forwarded {
		var err error
		if w, err = q.work.join(); err != nil { // before looking, so that no wake-up is missed
			return nil, err
		}
		defer q.work.leave(w)
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	woken := false
	for {
		var chunks []Chunk
		var retry bool
		var err error
		if w == nil {
			chunks, _, err = q.look(ctx, req)
		} else {
			chunks, retry, err = q.lookAside(ctx, req)
		}
		if err != nil || len(chunks) > 0 || deadline == nil {
			return chunks, err
		}
		if woken && !q.router.ownShardsEmpty() {
			// Woken for work this request could not take (its strategy, or the scan bound):
			// the next waiter may take it.
			q.work.pass(w)
		}
		var again <-chan time.Time
		stop := func() bool { return false }
		if retry {
			// An instance forwarded to did not answer: it may have work that no wake-up
			// will announce (its chunks are not new), so look again a little later.
			t := time.NewTimer(forwardRetryDelay/2 + rand.N(forwardRetryDelay))
			again, stop = t.C, t.Stop
		}
		if q.log.Enabled(ctx, slog.LevelDebug) {
			q.log.Debug("reserve parks", slog.String("consumer", req.Consumer), slog.Bool("woken", woken),
				slog.Bool("retry", retry), slog.Bool("own_empty", q.router.ownShardsEmpty()))
		}
		q.work.parked.Add(1)
		select {
		case <-w.ch:
			q.work.parked.Add(-1)
			q.work.rejoin(w)
			woken = true
		case <-again:
			q.work.parked.Add(-1)
			q.work.rejoin(w)
		case <-deadline:
			q.work.parked.Add(-1)
			return []Chunk{}, nil
		case <-ctx.Done():
			q.work.parked.Add(-1)
			return nil, ctx.Err()
		}
		stop()
	}
}

// look reserves from this instance's shards, then, for a request not forwarded here, from
// another instance. It returns no chunks ([]) when neither had any; retry reports that an
// instance it forwarded to gave no answer, so that one may still have some.
func (q *Queuer) look(ctx context.Context, req ReserveRequest) (chunks []Chunk, retry bool, err error) {
	chunks, err = q.reserveShared(ctx, req)
	if err == nil && len(chunks) > 0 && ctx.Err() != nil {
		// The consumer went away: give the chunks back rather than let their leases run
		// out and count an attempt each.
		q.undo(chunks)
		return nil, false, ctx.Err()
	}
	if err != nil || len(chunks) > 0 || req.Forwarded {
		return chunks, false, err
	}
	if chunks, retry, err = q.router.forward(ctx, req); err != nil || len(chunks) > 0 {
		return chunks, false, err
	}
	return []Chunk{}, retry, nil
}

// lookAside is look on a goroutine of its own, for a request that may wait: the stack a
// scan grows (the driver's calls run deep) is given back when that goroutine ends,
// instead of staying with the waiting request, which parks on a shallow stack.
func (q *Queuer) lookAside(ctx context.Context, req ReserveRequest) ([]Chunk, bool, error) {
	type result struct {
		chunks []Chunk
		retry  bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		chunks, retry, err := q.look(ctx, req)
		done <- result{chunks, retry, err}
	}()
	r := <-done
	return r.chunks, r.retry, r.err
}
