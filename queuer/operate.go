package queuer

import (
	"context"
	"time"
)

// What an operator reads of the cluster and does to it (the dashboard, GET /v1/cluster,
// the metrics' cluster figures), each the admin part's.

// Cluster returns the instances and their claims, and the shards nobody holds.
func (q *Queuer) Cluster(ctx context.Context) (Cluster, error) { return q.admin.Cluster(ctx) }

// ClusterStats returns the cluster's figures for the metrics, cached for a few seconds.
func (q *Queuer) ClusterStats(ctx context.Context) (ClusterStats, error) {
	return q.admin.ClusterStats(ctx)
}

// Overview returns the dashboard's counts; since, when given, is the previous overview's
// time, for the rates.
func (q *Queuer) Overview(ctx context.Context, since *time.Time) (Overview, error) {
	return q.admin.Overview(ctx, since)
}

// Minutes returns the completions and failures per minute over the last 24 h, and the
// database's time.
func (q *Queuer) Minutes(ctx context.Context) ([]Minute, time.Time, error) {
	return q.admin.Minutes(ctx)
}

// Consumers returns who is working: per consumer name, the chunks in flight, the oldest
// lease and when it last asked for work.
func (q *Queuer) Consumers(ctx context.Context) ([]Consumer, error) { return q.admin.Consumers(ctx) }

// ValueRates returns the recent rate of each value of the keys the strategies limit.
func (q *Queuer) ValueRates(ctx context.Context) ([]ValueRate, error) { return q.admin.ValueRates(ctx) }

// RateBuckets returns the rate_limit buckets holding back the most, up to RateBucketsShown.
func (q *Queuer) RateBuckets(ctx context.Context) ([]RateBucket, error) {
	return q.admin.RateBuckets(ctx)
}

// Retries returns how many failed attempts a submission's chunks have had so far.
func (q *Queuer) Retries(ctx context.Context, id int64) (int64, error) {
	return q.admin.Retries(ctx, id)
}

// SetDraining drains an instance, or ends its drain (ErrNoSuchTarget for an unknown one).
func (q *Queuer) SetDraining(ctx context.Context, instance string, draining bool) error {
	return q.admin.SetDraining(ctx, instance, draining)
}

// SetShardDisabled disables a shard, or enables it again (ErrNoSuchTarget for an unknown one).
func (q *Queuer) SetShardDisabled(ctx context.Context, shard int, disabled bool) error {
	return q.admin.SetShardDisabled(ctx, shard, disabled)
}
