package queuer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// Metrics is what an operator watches and alerts on, beyond Stats: the requests waiting
// here, the requests forwarded to other instances by outcome, and the claims loop.
type Metrics struct {
	Stats
	// Waiting counts the requests waiting on this instance now: reserves with a wait and
	// status waits, against Config.MaxWaiters.
	Waiting int64
	// Reserves forwarded to another instance, by outcome: chunks came back (Served), the
	// peer had none (Empty), the peer gave no answer (Failed).
	ForwardServed, ForwardEmpty, ForwardFailed int64
	// Extends forwarded to a shard's owner, answered (ExtendForwardOK) or not.
	ExtendForwardOK, ExtendForwardFailed int64
	Claims                               claims.Stats
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

// Metrics returns the instance's counters and gauges.
func (q *Queuer) Metrics() Metrics {
	o := &q.router.outcomes
	return Metrics{
		Stats:         q.Stats(),
		Waiting:       q.work.waiting.Load(),
		ForwardServed: o.reserveServed.Load(), ForwardEmpty: o.reserveEmpty.Load(), ForwardFailed: o.reserveFailed.Load(),
		ExtendForwardOK: o.extendOK.Load(), ExtendForwardFailed: o.extendFailed.Load(),
		Claims: q.claims.Stats(),
	}
}

// ClusterStatsTTL is how long ClusterStats answers from its cache: however often /metrics
// is scraped, on however many instances, each reads the database at most once per TTL.
const ClusterStatsTTL = 5 * time.Second

// ClusterStats is the cluster at a glance, as the database says (sql/cluster_stats.sql).
type ClusterStats struct {
	SubmissionsInProgress int64
	// ChunksPending: chunks of submissions in progress not completed yet, in flight included.
	ChunksPending int64
	// OldestAge is the age of the oldest submission in progress; 0 when there is none.
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
func (q *Queuer) ClusterStats(ctx context.Context) (ClusterStats, error) {
	c := &q.clusterStats
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.tried) < ClusterStatsTTL {
		return c.last, c.err
	}
	c.tried = time.Now()
	s, err := q.readClusterStats(ctx)
	if err != nil {
		c.err = err
		return c.last, c.err
	}
	c.last, c.err = s, nil
	return s, nil
}

// readClusterStats reads the cluster's figures from the database, uncached.
func (q *Queuer) readClusterStats(ctx context.Context) (ClusterStats, error) {
	r, err := opsqsql.New(q.pool).ClusterStats(ctx, opsqsql.ClusterStatsParams{
		HeartbeatTimeout: q.claims.Settings().HeartbeatTimeout.String(),
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
