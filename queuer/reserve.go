package queuer

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"opsq/queuer/internal/peers"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/waiters"
)

// forwardedReserveBudget bounds a reserve another instance forwarded here, well inside the
// forwarder's peers.CallTimeout, leaving it time to read the answer.
const forwardedReserveBudget = peers.CallTimeout / 2

// forwardRetryDelay is about how long a waiting reserve waits before it looks again when an
// instance it forwarded to gave no answer (between half and one and a half of it).
const forwardRetryDelay = time.Second

// Reserve reserves up to req.Max chunks: from this instance's shards; when they have none,
// from another instance that has some (forwarding); when nobody has any, it waits up to
// req.Wait for work to appear. It waits in the instance's queue of waiters (queuer/internal/waiters),
// holding no database connection, and is woken by NOTIFY and local releases as one of as
// many waiters as the new work can serve, not by polling. When Config.MaxWaiters requests
// already wait here, a reserve that would wait returns ErrTooManyWaiters.
func (q *Queuer) Reserve(ctx context.Context, req ReserveRequest) ([]Chunk, error) {
	if req.Forwarded {
		q.seen.Note(req.Consumer, q.cfg.Clock.Now())
		// Give up, and give the chunks back, before the forwarder does: an answer it no
		// longer reads holds its chunks until their lease runs out. Running out of that
		// budget is an empty answer ("nothing here in time"), not a fault.
		budget, cancel := context.WithTimeout(ctx, forwardedReserveBudget)
		defer cancel()
		chunks, _, err := q.look(budget, req)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return []Chunk{}, nil
		}
		return chunks, err
	}
	chunks, p, err := q.ReserveOrPark(ctx, req)
	if p == nil {
		return chunks, err
	}
	return p.Wait(ctx)
}

// Parked is a reserve that found no work and waits for some (Queuer.ReserveOrPark). It
// holds its place among the instance's waiters until Wait or WaitWith returns: call one of
// them exactly once. Its waiting takes no goroutine of its own beyond the one calling
// Wait, and that one's stack stays shallow: the scans run on the goroutine of the shared
// run (queuer/internal/handout).
type Parked struct {
	q        *Queuer
	req      ReserveRequest
	w        *waiters.Waiter
	deadline time.Time
	retry    bool // an instance it forwarded to gave no answer: look again soon
}

// ReserveOrPark is Reserve up to the moment it would wait: it looks for work once (here,
// then elsewhere); when it finds none and req.Wait is positive, it returns a Parked,
// admitted among the waiters (or ErrTooManyWaiters), whose Wait does the rest. This lets a
// caller hand the waiting to a cheaper place than the request's own goroutine. A draining
// instance parks nothing: it looks once, and a parked reserve answers no chunks at once
// when the drain begins (DESIGN.md §4).
func (q *Queuer) ReserveOrPark(ctx context.Context, req ReserveRequest) ([]Chunk, *Parked, error) {
	q.seen.Note(req.Consumer, q.cfg.Clock.Now()) // who is working (the dashboard)
	if req.Wait <= 0 || req.Forwarded || q.draining.Load() {
		// Draining: no wait here; the look may still find work elsewhere (forwarding).
		chunks, _, err := q.look(ctx, req)
		return chunks, nil, err
	}
	w, err := q.waiting.Join(ctx) // before looking, so that no wake-up is missed
	if err != nil {
		return nil, nil, err
	}
	p := &Parked{q: q, req: req, w: w, deadline: time.Now().Add(req.Wait)}
	if q.router.NowhereToLook(ctx) {
		// A look would find nothing, so park at once: when thousands of consumers arrive
		// together, each leaves its request without a scan, and the instance never holds
		// them all mid-request (their buffers and stacks are what an instance's memory
		// grows by, DESIGN.md §6). Joined first, so work announced since wakes it.
		return nil, p, nil
	}
	chunks, retry, err := q.look(ctx, req)
	if err != nil || len(chunks) > 0 {
		q.waiting.Leave(w)
		return chunks, nil, err
	}
	p.retry = retry
	return nil, p, nil
}

// Block is how a parked reserve's caller waits between two looks (Parked.WaitWith). It
// returns true once it has received a wake-up from wake, false once until has passed, or
// an error that ends the wait (WaitWith returns it). It may return false early; WaitWith
// then waits again.
type Block = waiters.Block

// Wait waits for work until the reserve's wait runs out or ctx ends, looking again each
// time it is woken, and returns what it reserved ([] when the wait ran out).
func (p *Parked) Wait(ctx context.Context) ([]Chunk, error) {
	return p.WaitWith(ctx, func(wake <-chan struct{}, until time.Time) (bool, error) {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-wake:
			return true, nil
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
}

// OnWake has poke called each time a wake-up is delivered to p, right after it is: for a
// Block that sleeps on something other than the wake channel (api parks a reserve in a
// read of its connection, and pokes it with a read deadline). poke must not block; it
// runs under the lock of the instance's waiters.
func (p *Parked) OnWake(poke func()) { p.q.waiting.OnWake(p.w, poke) }

// WaitWith is Wait with the waiting between two looks done by block; ctx bounds the looks.
func (p *Parked) WaitWith(ctx context.Context, block Block) ([]Chunk, error) {
	q, req, w := p.q, p.req, p.w
	defer q.waiting.Leave(w)
	retry := p.retry
	for {
		// Checked while w is queued or holds a wake-up: Drain broadcasts after it sets
		// draining, so a drain that began after this check wakes the sleep below.
		if q.draining.Load() {
			return []Chunk{}, nil // the instance drains: no chunks here; ask elsewhere
		}
		until := p.deadline
		if retry {
			// An instance forwarded to did not answer: it may have work that no wake-up
			// will announce (its chunks are not new), so look again a little later.
			if again := time.Now().Add(forwardRetryDelay/2 + rand.N(forwardRetryDelay)); again.Before(until) {
				until = again
			}
		}
		if q.log.Enabled(ctx, slog.LevelDebug) {
			q.log.Debug("reserve parks", slog.String("consumer", req.Consumer), slog.Bool("retry", retry),
				slog.Bool("own_empty", q.router.OwnShardsEmpty()))
		}
		woken, err := q.waiting.Sleep(w, until, block)
		if err != nil {
			return nil, err
		}
		if !woken && !time.Now().Before(p.deadline) {
			return []Chunk{}, nil
		}
		if !woken && time.Now().Before(until) {
			continue // early: wait again
		}
		q.waiting.Rejoin(w)
		if q.draining.Load() {
			return []Chunk{}, nil
		}
		chunks, r, err := q.look(ctx, req)
		if err != nil || len(chunks) > 0 {
			return chunks, err
		}
		retry = r
		if woken && !q.router.OwnShardsEmpty() {
			// Woken for work this request could not take (its strategy, or the scan bound):
			// the next waiter may take it.
			q.waiting.Pass(w)
		}
	}
}

// GiveBack releases chunks a reserve took but could not deliver (its consumer went away
// before the answer was written), and announces them like new work (Queuer.GiveBack).
func (p *Parked) GiveBack(ctx context.Context, chunks []Chunk) { p.q.GiveBack(ctx, chunks) }

// giveBackTimeout bounds asking other instances to give back chunks they reserved for a
// forwarded reserve.
const giveBackTimeout = 5 * time.Second

// GiveBack releases chunks a reserve took but could not deliver, because its consumer went
// away before the answer was written: reservable again at once, no attempt counted, rather
// than when their lease runs out. The chunks of this instance's shards are released here;
// those a forward brought from another instance are given back by their shard's owner,
// asked with the identity ctx carries (the reserve's own context, ended or not).
func (q *Queuer) GiveBack(ctx context.Context, chunks []Chunk) {
	var local []Chunk
	remote := map[int][]string{} // shard -> tokens
	for _, ch := range chunks {
		t, valid, here := q.heldHere(ch.Token)
		switch {
		case here:
			local = append(local, ch)
		case valid:
			remote[t.Shard] = append(remote[t.Shard], ch.Token)
		}
	}
	q.reserve.GiveBack(local)
	if len(remote) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	for shard, toks := range remote {
		q.router.GiveBack(ctx, shard, toks)
	}
}

// GiveBackTokens releases the reservations of tokens that another instance's forwarded
// reserve took here and could not deliver (peers.GiveBackPath). Tokens that do not verify,
// or whose shard this instance no longer holds under their generation, are passed over.
func (q *Queuer) GiveBackTokens(toks []string) {
	var local []Chunk
	for _, tok := range toks {
		if t, _, here := q.heldHere(tok); here {
			local = append(local, Chunk{Token: tok, SubmissionID: t.Key.SubmissionID, ChunkIndex: t.Key.ChunkIndex})
		}
	}
	q.reserve.GiveBack(local)
}

// heldHere reads tok: valid reports that it verifies, here that this instance holds its
// shard under the generation it was reserved in.
func (q *Queuer) heldHere(tok string) (t tokens.Token, valid, here bool) {
	t, valid = q.keys.Read(tok, q.shardCount)
	if !valid {
		return t, false, false
	}
	l, owned := q.claims.Lease(t.Shard)
	return t, true, owned && l.Generation == t.Generation
}

// look reserves from this instance's shards, then, for a request not forwarded here, from
// another instance. It returns no chunks ([]) when neither had any; retry reports that an
// instance it forwarded to gave no answer, so that one may still have some.
func (q *Queuer) look(ctx context.Context, req ReserveRequest) (chunks []Chunk, retry bool, err error) {
	chunks, err = q.reserve.Reserve(ctx, req)
	if err == nil && len(chunks) > 0 && ctx.Err() != nil {
		// The consumer went away: give the chunks back rather than let their leases run
		// out and count an attempt each.
		q.reserve.GiveBack(chunks)
		return nil, false, ctx.Err()
	}
	if err != nil || len(chunks) > 0 || req.Forwarded {
		return chunks, false, err
	}
	forwarded, retry, err := q.router.Forward(ctx, req)
	if err == nil && len(forwarded) > 0 && ctx.Err() != nil {
		q.GiveBack(ctx, forwarded) // the consumer went away meanwhile
		return nil, false, ctx.Err()
	}
	if err != nil || len(forwarded) > 0 {
		return forwarded, false, err
	}
	return []Chunk{}, retry, nil
}

// Preview returns the chunks a reserve of req would hand out now, in order, reserving
// nothing (see reserve.Path.Preview).
func (q *Queuer) Preview(ctx context.Context, req ReserveRequest) ([]PreviewChunk, error) {
	return q.reserve.Preview(ctx, req)
}
