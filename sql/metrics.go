package sql

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
)

// The statements of the metrics (queuer.ClusterStats).

//go:embed cluster_stats.sql
var clusterStats string

// ClusterStatsParams are cluster_stats.sql's.
type ClusterStatsParams struct {
	HeartbeatTimeout string // an interval: instances silent longer are not live
}

// ClusterStatsRow is the cluster at a glance.
type ClusterStatsRow struct {
	SubmissionsInProgress int64   `db:"submissions_in_progress"`
	ChunksPending         int64   `db:"chunks_pending"`
	OldestAgeSeconds      float64 `db:"oldest_age_seconds"`
	ChunksInflight        int64   `db:"chunks_inflight"`
	ShardsUnserved        int     `db:"shards_unserved"`
	ShardsDisabled        int     `db:"shards_disabled"`
	OwnerSwitches         int64   `db:"owner_switches"`
	InstancesLive         int     `db:"instances_live"`
}

// ClusterStats reads the cluster's figures: sums of the in-progress submissions' counters
// and of the claims table, never a count over chunks.
func (q Queries) ClusterStats(ctx context.Context, p ClusterStatsParams) (ClusterStatsRow, error) {
	return collectOne[ClusterStatsRow](ctx, q.db, clusterStats, pgx.NamedArgs{"heartbeat_timeout": p.HeartbeatTimeout})
}
