package sql

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
)

// The statements of queuer about the cluster: the owners of shards, the peers with work,
// the cluster keys and the max_simultaneous holds. (Package claims runs its own.)

//go:embed shard_owner.sql
var shardOwner string

// ShardOwnerParams are shard_owner.sql's.
type ShardOwnerParams struct {
	Shard int
}

// ShardOwnerRow is the instance that holds a shard.
type ShardOwnerRow struct {
	Claimant     string `db:"claimant"`
	Generation   int64  `db:"generation"`
	AdvertiseURL string `db:"advertise_url"`
}

// ShardOwner reads who holds p.Shard; ErrNotFound when nobody does.
func (q Queries) ShardOwner(ctx context.Context, p ShardOwnerParams) (ShardOwnerRow, error) {
	return collectOne[ShardOwnerRow](ctx, q.db, shardOwner, pgx.NamedArgs{"shard": p.Shard})
}

//go:embed peers_with_work.sql
var peersWithWork string

// PeersWithWorkParams are peers_with_work.sql's.
type PeersWithWorkParams struct {
	Me               string // this instance, left out
	HeartbeatTimeout string // an interval: instances silent longer are left out
}

// PeersWithWorkRow is a live instance, the shards it owns and those of them it published
// as having reservable chunks.
type PeersWithWorkRow struct {
	ID           string  `db:"id"`
	AdvertiseURL string  `db:"advertise_url"`
	Owned        []int32 `db:"owned"`
	Available    []int32 `db:"available"`
}

// PeersWithWork reads the other live instances.
func (q Queries) PeersWithWork(ctx context.Context, p PeersWithWorkParams) ([]PeersWithWorkRow, error) {
	return collect[PeersWithWorkRow](ctx, q.db, peersWithWork, pgx.NamedArgs{"me": p.Me, "heartbeat_timeout": p.HeartbeatTimeout})
}

//go:embed cluster_keys_load.sql
var clusterKeysLoad string

// ClusterKeysLoadParams are cluster_keys_load.sql's.
type ClusterKeysLoadParams struct {
	OverlapMicros int64 // how long a key verifies after the next one was created
}

// ClusterKeysLoadRow is a cluster key that still verifies: its age, and how long it has
// left (nil while it is the newest).
type ClusterKeysLoadRow struct {
	ID         int    `db:"id"`
	Secret     []byte `db:"secret"`
	AgeMicros  int64  `db:"age_us"`
	LeftMicros *int64 `db:"left_us"`
}

// ClusterKeysLoad reads the cluster keys that still verify, oldest first.
func (q Queries) ClusterKeysLoad(ctx context.Context, p ClusterKeysLoadParams) ([]ClusterKeysLoadRow, error) {
	return collect[ClusterKeysLoadRow](ctx, q.db, clusterKeysLoad, pgx.NamedArgs{"overlap_us": p.OverlapMicros})
}

//go:embed holds_take.sql
var holdsTake string

// HoldsTakeParams are holds_take.sql's: one max_simultaneous slot of Key = Value (JSON)
// for the reservation Token of a chunk, on a shard held at Generation, when fewer than Max
// are taken.
type HoldsTakeParams struct {
	Token        string
	Key          string
	Value        string
	SubmissionID int64
	ChunkIndex   int32
	Shard        int
	Generation   int64
	Max          int
}

// HoldsTake takes the slot and reports whether there was one left.
func (q Queries) HoldsTake(ctx context.Context, p HoldsTakeParams) (bool, error) {
	var got bool
	err := q.db.QueryRow(ctx, holdsTake, pgx.NamedArgs{
		"token": p.Token, "key": p.Key, "value": p.Value, "submission_id": p.SubmissionID,
		"chunk_index": p.ChunkIndex, "shard": p.Shard, "generation": p.Generation, "max": p.Max,
	}).Scan(&got)
	return got, err
}

//go:embed holds_release.sql
var holdsRelease string

// HoldsReleaseParams are holds_release.sql's.
type HoldsReleaseParams struct {
	Tokens []string
}

// HoldsRelease frees the slots of reservations that are over.
func (q Queries) HoldsRelease(ctx context.Context, p HoldsReleaseParams) error {
	_, err := q.db.Exec(ctx, holdsRelease, pgx.NamedArgs{"tokens": p.Tokens})
	return err
}

//go:embed holds_collect.sql
var holdsCollect string

// HoldsCollect deletes the holds that stopped counting. It has no parameters.
func (q Queries) HoldsCollect(ctx context.Context) error {
	if OnCitus() {
		return q.holdsCollectCitus(ctx)
	}
	_, err := q.db.Exec(ctx, holdsCollect)
	return err
}
