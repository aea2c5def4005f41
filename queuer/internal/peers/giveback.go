package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	opsqsql "opsq/sql"
)

// GiveBackPath is the route of an instance giving back to a shard's owner the chunks a
// reserve it forwarded there took but could not deliver: its consumer left before the
// answer was written. Only instances call it (signed with the cluster key), never a key.
const GiveBackPath = "/v1/reserve/giveback"

// GiveBack asks the owner of shard to give back the reservations of tokens (all of
// shard's chunks), so that they are reservable again at once rather than when their lease
// runs out. ctx carries the caller's identity, which the request is signed with. It is
// best effort: an owner that changed or gave no answer lets the leases run out, logged.
func (r *Router) GiveBack(ctx context.Context, shard int, tokens []string) {
	err := r.giveBack(ctx, shard, tokens)
	if err != nil {
		r.log.Warn("giving back chunks of a forwarded reserve whose consumer left; they are reservable again when their lease runs out",
			slog.Int("shard", shard), slog.Int("chunks", len(tokens)), slog.Any("error", err))
	}
}

func (r *Router) giveBack(ctx context.Context, shard int, tokens []string) error {
	owner, err := opsqsql.New(r.pool).ShardOwner(ctx, opsqsql.ShardOwnerParams{Shard: shard})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return nil // nobody holds the shard: its reservations went with its last owner
	}
	if err != nil {
		return fmt.Errorf("looking up the owner of shard %d: %w", shard, err)
	}
	return r.post(ctx, owner.Claimant, owner.AdvertiseURL, GiveBackPath, struct {
		Tokens []string `json:"tokens"`
	}{tokens}, nil)
}
