package submissions

import (
	"context"
	"log/slog"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// Waiting chunks (a retry's backoff, before a submission's not_before, a paused submission)
// live in opsq.chunks_waiting, out of the table the reserves read: however many wait, a
// reserve never reads past them (DESIGN.md §3). The Promoter moves those that are due back
// into opsq.chunks and announces them.

// Bounds of the promoter.
const (
	// promoteTick bounds how late a due chunk becomes reservable (besides the statement's
	// own time): a backoff of 1 s is served within a quarter of a second of its end.
	promoteTick = 250 * time.Millisecond
	// promoteBatch is how many chunks one statement moves; a pass goes on while batches
	// come back full (a not_before of 10⁶ chunks is moved in about a hundred statements).
	promoteBatch = 10_000
	// promoteTimeout bounds one statement.
	promoteTimeout = 30 * time.Second
)

// Promoter is the loop that makes the waiting chunks that are due reservable, on every
// instance (they share the work: each statement takes rows the others have not locked).
// Its goroutine lives from Start until Stop.
type Promoter struct {
	pool   opsqsql.Pool
	log    *slog.Logger
	shards func() []int32 // the instance's (opsqsql.ChunksPromoteParams.Shards)
	startstop.Loop
}

var _ startstop.Service = (*Promoter)(nil)

// NewPromoter returns the promoter of pool's waiting chunks; Start it. shards returns the
// shards the instance holds: on Citus each instance moves its own shards' chunks only.
func NewPromoter(pool opsqsql.Pool, log *slog.Logger, shards func() []int32) *Promoter {
	return &Promoter{pool: pool, log: log, shards: shards}
}

// Start starts the loop.
func (p *Promoter) Start(ctx context.Context) error {
	p.Go(ctx, func(ctx context.Context) {
		tick := time.NewTicker(promoteTick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for {
				n, err := p.promote(ctx)
				if err != nil {
					if ctx.Err() == nil {
						p.log.Warn("making waiting chunks reservable; trying again soon", slog.Any("error", err))
					}
					break
				}
				if n < promoteBatch {
					break
				}
			}
		}
	})
	return nil
}

// promote moves one batch of due chunks and announces them at its commit; it returns how
// many it moved.
func (p *Promoter) promote(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, promoteTimeout)
	defer cancel()
	n := 0
	err := opsqsql.InTx(ctx, p.pool, func(q opsqsql.Queries) error {
		shards, err := q.ChunksPromote(ctx, opsqsql.ChunksPromoteParams{Limit: promoteBatch, Shards: p.shards()})
		if err != nil || len(shards) == 0 {
			return err
		}
		n = len(shards)
		if n >= 64 {
			return notify.SendWorkAll(ctx, q, int64(n))
		}
		return notify.SendWork(ctx, q, shards)
	})
	return n, err
}
