package queuer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opsq/api/wire"
	opsqsql "opsq/sql"
)

// Extended is the outcome of extending one token.
type Extended struct {
	Status    wire.TokenStatus
	ExpiresAt *time.Time
}

// Extend moves the leases of tokens to now + lease. A token whose shard another instance
// owns is forwarded to that owner (unless forwarded already); a token whose shard changed
// owner since it was reserved is "lost".
func (q *Queuer) Extend(ctx context.Context, tokens []string, lease time.Duration, forwarded bool) ([]Extended, error) {
	out := make([]Extended, len(tokens))
	remote := map[int][]int{} // shard -> indexes of tokens owned elsewhere
	for i, tok := range tokens {
		t, ok := q.readToken(tok)
		if !ok {
			out[i].Status = wire.StatusUnknown
			continue
		}
		l, owned := q.claims.Lease(t.shard)
		switch {
		case owned && l.Generation != t.generation:
			out[i].Status = wire.StatusLost
		case owned:
			expires := q.cfg.Clock.Now().Add(lease)
			if _, ok := q.reserver.Extend(tok, expires); ok {
				out[i] = Extended{Status: wire.StatusExtended, ExpiresAt: &expires}
			}
		case !forwarded:
			remote[t.shard] = append(remote[t.shard], i)
			continue
		}
		if out[i].Status == "" {
			st, err := q.goneStatus(ctx, t)
			if err != nil {
				return nil, err
			}
			out[i].Status = st
		}
	}
	for shard, idx := range remote {
		if err := q.extendRemote(ctx, shard, tokens, idx, lease, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// goneStatus answers for a token without a live reservation: already_finished when its
// chunk is finished, unknown when nobody knows it, else lost.
func (q *Queuer) goneStatus(ctx context.Context, t token) (wire.TokenStatus, error) {
	state, _, err := readChunk(ctx, q.pool, t)
	switch {
	case err != nil:
		return "", err
	case state == chunkFinished:
		return wire.StatusAlreadyFinished, nil
	case state == chunkUnknown:
		return wire.StatusUnknown, nil
	}
	return wire.StatusLost, nil
}

// extendRemote forwards the tokens idx (all of shard) to the shard's owner.
func (q *Queuer) extendRemote(ctx context.Context, shard int, tokens []string, idx []int, lease time.Duration, out []Extended) error {
	owner, err := opsqsql.New(q.pool).ShardOwner(ctx, opsqsql.ShardOwnerParams{Shard: shard})
	url := owner.AdvertiseURL
	var results []wire.TokenResult
	if err == nil {
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = tokens[i]
		}
		results, err = q.router.peer(url).Extend(ctx, lease.String(), batch...)
		q.router.outcomes.extended(err)
		if err != nil {
			q.log.Warn("forwarding extend to the shard's owner", slog.Int("shard", shard), slog.String("owner", url), slog.Any("error", err))
		}
	} else if !errors.Is(err, opsqsql.ErrNotFound) {
		return fmt.Errorf("looking up the owner of shard %d: %w", shard, err)
	}
	for j, i := range idx {
		if j < len(results) && results[j].Status != "" {
			out[i] = Extended{Status: results[j].Status, ExpiresAt: results[j].ExpiresAt}
			continue
		}
		t, _ := parseToken(tokens[i])
		st, err := q.goneStatus(ctx, t) // no owner, or it did not answer
		if err != nil {
			return err
		}
		out[i].Status = st
	}
	return nil
}
