package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// Counts are the router's counters, for metrics: reserves answered by another instance
// (Forwarded), reserves forwarded by outcome — chunks came back (Served), the peer had
// none (Empty), the peer gave no answer (Failed) — and extends forwarded to a shard's
// owner, answered (ExtendOK) or not.
type Counts struct {
	Forwarded                             int64
	ReserveServed, ReserveEmpty           int64
	ReserveFailed, ExtendOK, ExtendFailed int64
}

// forwardOutcomes count forwarded requests by outcome. Safe for concurrent use.
type forwardOutcomes struct {
	reserveServed, reserveEmpty, reserveFailed atomic.Int64
	extendOK, extendFailed                     atomic.Int64
}

// extended counts a forwarded extend that answered err.
func (f *forwardOutcomes) extended(err error) {
	if err != nil {
		f.extendFailed.Add(1)
		return
	}
	f.extendOK.Add(1)
}

// Counts returns the router's counters.
func (r *Router) Counts() Counts {
	o := &r.outcomes
	return Counts{
		Forwarded:     r.forwarded.Load(),
		ReserveServed: o.reserveServed.Load(), ReserveEmpty: o.reserveEmpty.Load(), ReserveFailed: o.reserveFailed.Load(),
		ExtendOK: o.extendOK.Load(), ExtendFailed: o.extendFailed.Load(),
	}
}

// Extend forwards an extend of tokens, all of shard's chunks, to the shard's owner, and
// returns its answers in the order of tokens. With no owner, or an owner that gave no
// answer (logged), it returns no answers and no error: the caller tells each token's
// status itself. An error is a failed lookup of the owner.
func (r *Router) Extend(ctx context.Context, shard int, tokens []string, lease time.Duration) ([]opsqtype.TokenResult, error) {
	owner, err := opsqsql.New(r.pool).ShardOwner(ctx, opsqsql.ShardOwnerParams{Shard: shard})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up the owner of shard %d: %w", shard, err)
	}
	results, err := r.extend(ctx, owner.Claimant, owner.AdvertiseURL, tokens, lease)
	r.outcomes.extended(err)
	if err != nil {
		r.log.Warn("forwarding extend to the shard's owner", slog.Int("shard", shard), slog.String("owner", owner.AdvertiseURL), slog.Any("error", err))
		return nil, nil
	}
	return results, nil
}
