package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	opsqsql "opsq/sql"
)

// ClusterStatsTTL is how long ClusterStats answers from its cache: however often /metrics
// is scraped, on however many instances, each reads the database at most once per TTL.
const ClusterStatsTTL = 5 * time.Second

// ClusterStats is the cluster at a glance, as the database says (sql/cluster_stats.sql).
type ClusterStats struct {
	SubmissionsInProgress int64
	// ChunksPending: chunks of submissions in progress not completed yet, in flight included.
	ChunksPending int64
	// OldestAge is the age of the oldest running submission (in progress, not paused, past
	// its not_before), counted from when it started; 0 when there is none.
	OldestAge time.Duration
	// ChunksInflight: live reservations, as each owner published at its last renewal.
	ChunksInflight int64
	// ShardsUnserved: enabled shards nobody holds, or whose claim's soft expiry has passed
	// (its owner stopped renewing): nobody hands their chunks out.
	ShardsUnserved int
	ShardsDisabled int
	// OwnerSwitches counts the changes of owner of every shard since the cluster began.
	OwnerSwitches int64
	InstancesLive int
	// At is when the figures were read.
	At time.Time
}

// clusterStatsCache holds the last ClusterStats. Its mutex is held while the database is
// read, so that concurrent scrapes wait for one read instead of each making one.
type clusterStatsCache struct {
	mu    sync.Mutex
	last  ClusterStats
	tried time.Time // the last read, successful or not
	err   error     // its error
}

// ClusterStats returns the cluster's figures, read at most once per ClusterStatsTTL, even
// when the read fails (then the last figures read, if any, come with the error).
func (a *Admin) ClusterStats(ctx context.Context) (ClusterStats, error) {
	c := &a.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.tried) < ClusterStatsTTL {
		return c.last, c.err
	}
	c.tried = time.Now()
	s, err := a.readClusterStats(ctx)
	if err != nil {
		c.err = err
		return c.last, c.err
	}
	c.last, c.err = s, nil
	return s, nil
}

// readClusterStats reads the cluster's figures from the database, uncached.
func (a *Admin) readClusterStats(ctx context.Context) (ClusterStats, error) {
	r, err := opsqsql.New(a.pool).ClusterStats(ctx, opsqsql.ClusterStatsParams{
		HeartbeatTimeout: a.claims.Settings().HeartbeatTimeout.String(),
	})
	if err != nil {
		return ClusterStats{}, fmt.Errorf("reading the cluster's figures: %w", err)
	}
	return ClusterStats{
		SubmissionsInProgress: r.SubmissionsInProgress, ChunksPending: r.ChunksPending, ChunksInflight: r.ChunksInflight,
		ShardsUnserved: r.ShardsUnserved, ShardsDisabled: r.ShardsDisabled, OwnerSwitches: r.OwnerSwitches,
		InstancesLive: r.InstancesLive, OldestAge: time.Duration(r.OldestAgeSeconds * float64(time.Second)), At: time.Now(),
	}, nil
}
