package queuer

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	OldestID          *int64
	OldestCreatedAt   *time.Time
	Now               time.Time // the database's clock
}

// Completed returns how many chunks were completed between an earlier overview prev,
// whose Now was the since of o, and o.
func (o Overview) Completed(prev Overview) int64 {
	return max(o.DoneInProgress+o.DoneFinishedSince-prev.DoneInProgress, 0)
}

// Overview reads the overview; since (nil for none) sets DoneFinishedSince.
func (q *Queuer) Overview(ctx context.Context, since *time.Time) (Overview, error) {
	cs, err := q.readClusterStats(ctx)
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	r, err := opsqsql.New(q.pool).DashboardOverview(ctx, opsqsql.DashboardOverviewParams{Since: since})
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	return Overview{
		InProgress: cs.SubmissionsInProgress, ChunksLeft: cs.ChunksPending, Inflight: cs.ChunksInflight,
		DoneInProgress: r.DoneInProgress, FailedLastHour: r.FailedLastHour, DoneFinishedSince: r.DoneFinishedSince,
		OldestID: r.OldestID, OldestCreatedAt: r.OldestCreatedAt, Now: r.Now,
	}, nil
}

// Retries returns the failed attempts so far of a submission's chunks, pending or failed.
func (q *Queuer) Retries(ctx context.Context, id int64) (int64, error) {
	n, err := opsqsql.New(q.pool).DashboardRetries(ctx, opsqsql.DashboardRetriesParams{ID: id})
	if err != nil {
		return 0, fmt.Errorf("reading the retries of %d: %w", id, err)
	}
	return n, nil
}

// ErrNoSuchTarget: the instance or shard an administrative action names does not exist.
var ErrNoSuchTarget = errors.New("no such instance or shard")

// SetDraining drains an instance (draining true) or undoes it: sql/admin/drain_instance.sql
// and undrain_instance.sql, the operators' recipes themselves.
func (q *Queuer) SetDraining(ctx context.Context, instance string, draining bool) error {
	db := opsqsql.New(q.pool)
	action := db.AdminUndrainInstance
	if draining {
		action = db.AdminDrainInstance
	}
	return adminResult(action(ctx, opsqsql.AdminInstanceParams{Instance: instance}))
}

// SetShardDisabled disables a shard (disabled true) or enables it again:
// sql/admin/disable_shard.sql and enable_shard.sql.
func (q *Queuer) SetShardDisabled(ctx context.Context, shard int, disabled bool) error {
	db := opsqsql.New(q.pool)
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
