package queuer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"opsq/api/wire"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// expiryTick bounds how late an expired lease is released.
const expiryTick = 250 * time.Millisecond

// expiryRetry is when the expiry of a reservation whose recording failed is tried again.
const expiryRetry = 5 * time.Second

// expirer owns the loop that releases the reservations whose lease ran out: every
// expiryTick it takes them from the reserver (TakeExpired) and hands each to expire. Each
// chunk stays held while its expiry is recorded, so that no reserve hands it out again at
// the attempt being counted; a failed recording is retried after expiryRetry. Its
// goroutine lives from Start until Stop; Start and Stop are for one goroutine at a time.
type expirer struct {
	reserver *reserver.Reserver
	clock    Clock // when leases end
	expire   func(context.Context, reserver.Reservation)

	loop
}

var _ service = (*expirer)(nil)

func newExpirer(r *reserver.Reserver, clock Clock, expire func(context.Context, reserver.Reservation)) *expirer {
	return &expirer{reserver: r, clock: clock, expire: expire}
}

// Start starts the loop.
func (e *expirer) Start(ctx context.Context) error {
	e.start(ctx, e.run)
	return nil
}

func (e *expirer) run(ctx context.Context) {
	tick := time.NewTicker(expiryTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := e.clock.Now()
		for _, r := range e.reserver.TakeExpired(now, now.Add(expiryRetry)) {
			e.expire(ctx, r)
		}
	}
}

// expire records that r's lease ran out: a failed attempt ("reservation expired"), written
// only while this instance still holds the claim the reservation was made under; a chunk
// whose attempts are spent fails.
func (q *Queuer) expire(ctx context.Context, r reserver.Reservation) {
	t := token{key: r.Key, shard: r.Shard, generation: r.Generation, retries: r.Retries}
	status, err := q.failAttempt(ctx, t, "", errReservationExpired, true, &opsqsql.Fence{Claimant: q.cfg.Instance.ID, Generation: r.Generation})
	var fenced *opsqsql.FenceError
	if errors.As(err, &fenced) {
		// The shard changed owner since the reservation: the new owner counts nothing for
		// it, and the lease is over here all the same.
		status, err = wire.StatusLost, nil
	}
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("recording an expired reservation; trying again later", slog.Int64("submission_id", r.Key.SubmissionID),
				slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.Any("error", err))
		}
		return // still held: TakeExpired returns it again after expiryRetry
	}
	q.count.expired.Add(1)
	q.holds.release(ctx, []string{r.Token})
	q.reserver.Release(r.Token)
	q.work.wake(1) // the chunk is free (or failed) now, not when failAttempt's NOTIFY woke one
	q.log.Debug("reservation expired", slog.Int64("submission_id", r.Key.SubmissionID),
		slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.String("consumer", r.Consumer), slog.String("status", string(status)))
}
