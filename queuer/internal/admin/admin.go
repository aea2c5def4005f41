// Package admin is what an operator reads of the cluster and does to it through the
// engine: the instances and their claims (Cluster), the figures the metrics and alerts
// watch (ClusterStats, cached), the dashboard's overview and a submission's retries, and
// the operators' actions that the dashboard offers — drain an instance, disable a shard —
// run as the recipes of sql/admin/ themselves. It reads the database only: no part of the
// engine's state is here, so it answers the same on every instance. The one thing it
// writes is the instance's activity (activity.go: completions per minute, who is working
// and the values' recent rates), from counts the engine hands it, on a loop of its own.
package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// Overview is the cluster at a glance, for the dashboard: sums of the in-progress
// submissions' counters and of the claims table, never a count over chunks. The figures
// the metrics also show are theirs (sql/cluster_stats.sql), read afresh; the rest are the
// dashboard's own (sql/dashboard_overview.sql).
type Overview struct {
	InProgress     int64
	ChunksLeft     int64 // not done yet, in flight included
	DoneInProgress int64
	Inflight       int64 // as the owners last published it
	FailedLastHour int64
	// DoneFinishedSince is what the submissions finished after the since of Overview had
	// done when they finished.
	DoneFinishedSince int64
	// The in-progress submissions by phase (GET /v1/submissions?state=running, paused,
	// scheduled), and the chunks each has left: a held submission is no work waiting.
	Running, Paused, Scheduled                               int64
	RunningChunksLeft, PausedChunksLeft, ScheduledChunksLeft int64
	NextScheduledAt                                          *time.Time // the soonest not_before ahead
	// OldestID is the oldest running submission (neither paused nor scheduled).
	OldestID        *int64
	OldestCreatedAt *time.Time
	Now             time.Time // the database's clock
}

// Completed returns how many chunks were completed between an earlier overview prev,
// whose Now was the since of o, and o.
func (o Overview) Completed(prev Overview) int64 {
	return max(o.DoneInProgress+o.DoneFinishedSince-prev.DoneInProgress, 0)
}

// Cluster is the instances and their claims, as GET /v1/cluster and the dashboard show them.
type Cluster = claims.Cluster

// Admin reads the cluster and administers it. It is safe for concurrent use and has no
// goroutine.
type Admin struct {
	pool   opsqsql.Pool
	claims *claims.Manager // the settings, as last read
	stats  clusterStatsCache
}

// New returns the administration of pool's cluster; settings are claims' as last read.
func New(pool opsqsql.Pool, settings *claims.Manager) *Admin {
	return &Admin{pool: pool, claims: settings}
}

// Cluster describes the instances and their claims, for GET /v1/cluster.
func (a *Admin) Cluster(ctx context.Context) (Cluster, error) {
	return claims.LoadCluster(ctx, a.pool)
}

// Overview reads the overview; since (nil for none) sets DoneFinishedSince.
func (a *Admin) Overview(ctx context.Context, since *time.Time) (Overview, error) {
	cs, err := a.readClusterStats(ctx)
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	r, err := opsqsql.New(a.pool).DashboardOverview(ctx, opsqsql.DashboardOverviewParams{Since: since})
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	return Overview{
		InProgress: cs.SubmissionsInProgress, ChunksLeft: cs.ChunksPending, Inflight: cs.ChunksInflight,
		DoneInProgress: r.DoneInProgress, FailedLastHour: r.FailedLastHour, DoneFinishedSince: r.DoneFinishedSince,
		Running: r.Running, Paused: r.Paused, Scheduled: r.Scheduled, RunningChunksLeft: r.RunningChunksLeft,
		PausedChunksLeft: r.PausedChunksLeft, ScheduledChunksLeft: r.ScheduledChunksLeft, NextScheduledAt: r.NextScheduledAt,
		OldestID: r.OldestID, OldestCreatedAt: r.OldestCreatedAt, Now: r.Now,
	}, nil
}

// Retries returns the failed attempts so far of a submission's chunks, pending or failed.
func (a *Admin) Retries(ctx context.Context, id int64) (int64, error) {
	n, err := opsqsql.New(a.pool).DashboardRetries(ctx, opsqsql.DashboardRetriesParams{ID: id})
	if err != nil {
		return 0, fmt.Errorf("reading the retries of %d: %w", id, err)
	}
	return n, nil
}

// ErrNoSuchTarget: the instance or shard an administrative action names does not exist.
var ErrNoSuchTarget = errors.New("no such instance or shard")

// SetDraining drains an instance (draining true) or undoes it: sql/admin/drain_instance.sql
// and undrain_instance.sql, the operators' recipes themselves.
func (a *Admin) SetDraining(ctx context.Context, instance string, draining bool) error {
	db := opsqsql.New(a.pool)
	action := db.AdminUndrainInstance
	if draining {
		action = db.AdminDrainInstance
	}
	return adminResult(action(ctx, opsqsql.AdminInstanceParams{Instance: instance}))
}

// SetShardDisabled disables a shard (disabled true) or enables it again:
// sql/admin/disable_shard.sql and enable_shard.sql.
func (a *Admin) SetShardDisabled(ctx context.Context, shard int, disabled bool) error {
	db := opsqsql.New(a.pool)
	action := db.AdminEnableShard
	if disabled {
		action = db.AdminDisableShard
	}
	return adminResult(action(ctx, opsqsql.AdminShardParams{Shard: shard}))
}

// adminResult is the error of an administrative action that changed a row or not.
func adminResult(changed bool, err error) error {
	if err != nil {
		return fmt.Errorf("administering claims: %w", err)
	}
	if !changed {
		return ErrNoSuchTarget
	}
	return nil
}

// RateBucket is a rate_limit bucket in use: a value of a key being limited, its rate, and
// the tokens it holds now out of its capacity (docs/rates.md).
type RateBucket struct {
	Key       string
	Value     string // JSON text
	PerSecond float64
	Capacity  int
	Level     float64
}

// RateBucketsShown is how many rate_limit buckets RateBuckets returns at most: the emptiest.
const RateBucketsShown = 20

// RateBuckets returns the rate_limit buckets in use (not full again), the emptiest first
// — the values held back the most — up to RateBucketsShown.
func (a *Admin) RateBuckets(ctx context.Context) ([]RateBucket, error) {
	rows, err := opsqsql.New(a.pool).RateBucketsList(ctx, opsqsql.RateBucketsListParams{Limit: RateBucketsShown})
	if err != nil {
		return nil, fmt.Errorf("reading the rate_limit buckets: %w", err)
	}
	out := make([]RateBucket, len(rows))
	for i, r := range rows {
		out[i] = RateBucket(r)
	}
	return out, nil
}
