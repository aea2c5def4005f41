package queuer

import (
	"context"
	"log/slog"
	"time"

	"opsq/reserver"
)

// expiryTick bounds how late an expired lease is released.
const expiryTick = 250 * time.Millisecond

// runExpiry releases the reservations whose lease ran out, until ctx ends. Each counts as a
// failed attempt ("reservation expired"), written only while this instance still holds
// the claim the reservation was made under; a chunk whose attempts are spent fails.
func (q *Queuer) runExpiry(ctx context.Context) {
	defer close(q.expiryDone)
	tick := time.NewTicker(expiryTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, r := range q.reserver.Expire(time.Now()) {
			q.expire(ctx, r)
		}
	}
}

func (q *Queuer) expire(ctx context.Context, r reserver.Reservation) {
	defer q.releaseSlots(ctx, []string{r.Token})
	q.count.expired.Add(1)
	t := token{key: r.Key, shard: r.Shard, generation: r.Generation, retries: r.Retries}
	status, err := q.failAttempt(ctx, t, "", errReservationExpired, true, &fence{claimant: q.cfg.Instance.ID, generation: r.Generation})
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("releasing an expired reservation", slog.Int64("submission_id", r.Key.SubmissionID),
				slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.Any("error", err))
		}
		return
	}
	q.log.Debug("reservation expired", slog.Int64("submission_id", r.Key.SubmissionID),
		slog.Int("chunk_index", int(r.Key.ChunkIndex)), slog.String("consumer", r.Consumer), slog.String("status", status))
}
