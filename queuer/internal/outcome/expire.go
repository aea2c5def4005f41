package outcome

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/queuer/panics"
	"opsq/queuer/startstop"
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
	now      func() time.Time // when leases end
	expire   func(context.Context, reserver.Reservation)

	startstop.Loop
}

var _ startstop.Service = (*expirer)(nil)

func newExpirer(r *reserver.Reserver, now func() time.Time, expire func(context.Context, reserver.Reservation)) *expirer {
	return &expirer{reserver: r, now: now, expire: expire}
}

// Start starts the loop.
func (e *expirer) Start(ctx context.Context) error {
	e.Go(ctx, e.run)
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
		now := e.now()
		for _, r := range e.reserver.TakeExpired(now, now.Add(expiryRetry)) {
			e.expire(ctx, r)
		}
	}
}

// expire records that r's lease ran out (lapse); a recording that failed is tried again
// after expiryRetry, the chunk held meanwhile.
func (o *Recorder) expire(ctx context.Context, r reserver.Reservation) {
	// A panic recording one expiry (the loop's goroutine) is that reservation's error: the
	// loop goes on, and the recording is tried again later.
	if err := panics.Run(ctx, o.cfg.Log, "recording an expired reservation", func() error {
		return o.lapse(ctx, r, errReservationExpired)
	}); err != nil {
		if ctx.Err() == nil {
			o.cfg.Log.Warn("recording an expired reservation; trying again later", slog.Int64("submission_id", r.Key.SubmissionID),
				slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.Any("error", err))
		}
		return // still held: TakeExpired returns it again after expiryRetry
	}
	o.expired.Add(1)
}

// errReservationAbandoned is the error recorded for an attempt whose reservation its
// owner gave up: the instance stopped, or released the shard after a drain timed out.
const errReservationAbandoned = "reservation abandoned: its instance released the shard"

// abandonWorkers is how many abandoned reservations are recorded at once: they share the
// completer's transactions.
const abandonWorkers = 16

// Abandon records the reservations of shards this instance is about to release while
// they are still in flight (a drain that timed out, a stop) as their leases running out
// would be: one failed attempt each, the chunk reservable again after its backoff, or
// failed when its attempts are spent, each written under the claim the reservation was
// made under, which the caller must still hold. It returns how many it recorded; those it
// could not record (the database unreachable, ctx ended) go back with the shard without
// their attempt counted.
func (o *Recorder) Abandon(ctx context.Context, rs []reserver.Reservation) int {
	var recorded atomic.Int64
	work := make(chan reserver.Reservation)
	var wg sync.WaitGroup
	for range min(abandonWorkers, len(rs)) {
		wg.Go(func() {
			for r := range work {
				err := panics.Run(ctx, o.cfg.Log, "recording an abandoned reservation", func() error {
					return o.lapse(ctx, r, errReservationAbandoned)
				})
				if err != nil {
					if ctx.Err() == nil {
						o.cfg.Log.Warn("recording an abandoned reservation; its attempt is not counted", slog.Int64("submission_id", r.Key.SubmissionID),
							slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.Any("error", err))
					}
					continue
				}
				recorded.Add(1)
			}
		})
	}
	for _, r := range rs {
		work <- r
	}
	close(work)
	wg.Wait()
	return int(recorded.Load())
}

// lapse records that r ended without an outcome from its consumer: a failed attempt
// (msg), written only while this instance still holds the claim the reservation was made
// under; a chunk whose attempts are spent fails. The reservation stays held until it is
// recorded (the events of the outcome release it); an error means nothing was recorded.
func (o *Recorder) lapse(ctx context.Context, r reserver.Reservation, msg string) error {
	t := tokens.Token{Key: r.Key, Shard: r.Shard, Generation: r.Generation, Retries: r.Retries}
	status, err := o.failAttempt(ctx, attempt{t: t, tok: r.Token, msg: msg, retry: true,
		fence: &opsqsql.Fence{Claimant: o.cfg.Instance, Generation: r.Generation}})
	var fenced *opsqsql.FenceError
	if errors.As(err, &fenced) {
		// The shard changed owner since the reservation: the new owner counts nothing for
		// it, and the lease is over here all the same.
		status, err = opsqtype.StatusLost, nil
	}
	if err != nil {
		return err
	}
	if status != opsqtype.StatusRetrying { // retried: failAttempt released it
		o.cfg.Holds.ReleaseHolds(ctx, []string{r.Token})
		o.cfg.Bus.Raise(notify.ChunksFreed{Chunks: []notify.Freed{{Key: r.Key, Shard: r.Shard, Retries: notify.NotRetried, Token: r.Token}}})
	}
	o.cfg.Log.Debug("reservation ended without an outcome", slog.Int64("submission_id", r.Key.SubmissionID),
		slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.String("consumer", r.Consumer),
		slog.String("error", msg), slog.String("status", string(status)))
	return nil
}
