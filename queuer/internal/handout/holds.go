package handout

import (
	"context"
	"fmt"
	"log/slog"

	opsqsql "opsq/sql"
)

// holdsCollectSchedule is how often holds that stopped counting are deleted.
const holdsCollectSchedule = "@every 30s"

// holds owns this instance's access to the global max_simultaneous slots (opsq.holds):
// it takes them for a reservation, frees those of finished reservations, and collects
// those that stopped counting (a cron job). Safe for concurrent use; no goroutine.
type holds struct {
	pool opsqsql.Pool
	log  *slog.Logger
}

// take takes, in one transaction, a global max_simultaneous slot of every limited
// value of candidate c for reservation tok; all or none. It returns the rule whose value
// had no slot left, or nil when every slot was taken. A chunk whose submission lacks a
// limited key is not limited by it.
func (h *holds) take(ctx context.Context, tok string, c candidate, generation int64, limits []rule) (*rule, error) {
	var refused *rule
	err := opsqsql.InTx(ctx, h.pool, func(q opsqsql.Queries) error {
		for i, l := range limits {
			v, ok := c.info.values[l.key]
			if !ok {
				continue
			}
			got, err := q.HoldsTake(ctx, opsqsql.HoldsTakeParams{
				Token: tok, Key: l.key, Value: v, SubmissionID: c.key.SubmissionID,
				ChunkIndex: c.key.ChunkIndex, Shard: c.shard, Generation: generation, Max: l.max,
			})
			if err != nil {
				return err
			}
			if !got {
				refused = &limits[i]
				return errSlotRefused // roll back the slots taken for other keys
			}
		}
		return nil
	})
	if err == errSlotRefused {
		return refused, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taking max_simultaneous slots: %w", err)
	}
	return nil, nil
}

var errSlotRefused = fmt.Errorf("max_simultaneous slot refused")

// release frees the max_simultaneous slots of finished reservations. A failure only
// delays the slots until the collect job frees them.
func (h *holds) release(ctx context.Context, tokens []string) {
	if len(tokens) == 0 {
		return
	}
	if err := opsqsql.New(h.pool).HoldsRelease(ctx, opsqsql.HoldsReleaseParams{Tokens: tokens}); err != nil && ctx.Err() == nil {
		h.log.Warn("freeing max_simultaneous slots", slog.Any("error", err))
	}
}

// collect deletes the holds that stopped counting (cron).
func (h *holds) collect(ctx context.Context) {
	if err := opsqsql.New(h.pool).HoldsCollect(ctx); err != nil && ctx.Err() == nil {
		h.log.Warn("collecting max_simultaneous holds", slog.Any("error", err))
	}
}
