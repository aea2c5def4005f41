package queuer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
)

// Overview is the cluster at a glance, for the dashboard: sums of the in-progress
// submissions' counters and of the claims table, never a count over chunks.
type Overview struct {
	InProgress     int64 `db:"in_progress"`
	ChunksLeft     int64 `db:"chunks_left"` // not done yet, in flight included
	DoneInProgress int64 `db:"done_in_progress"`
	Inflight       int64 `db:"inflight"` // as the owners last published it
	FailedLastHour int64 `db:"failed_last_hour"`
	// DoneFinishedSince is what the submissions finished after the since of Overview had
	// done when they finished.
	DoneFinishedSince int64      `db:"done_finished_since"`
	OldestID          *int64     `db:"oldest_id"`
	OldestCreatedAt   *time.Time `db:"oldest_created_at"`
	Now               time.Time  `db:"now"` // the database's clock
}

// Completed returns how many chunks were completed between an earlier overview prev,
// whose Now was the since of o, and o.
func (o Overview) Completed(prev Overview) int64 {
	return max(o.DoneInProgress+o.DoneFinishedSince-prev.DoneInProgress, 0)
}

// Overview reads the overview; since (nil for none) sets DoneFinishedSince.
func (q *Queuer) Overview(ctx context.Context, since *time.Time) (Overview, error) {
	rows, err := q.pool.Query(ctx, opsqsql.DashboardOverview, pgx.NamedArgs{"since": since})
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Overview])
	if err != nil {
		return Overview{}, fmt.Errorf("reading the overview: %w", err)
	}
	return o, nil
}

// Retries returns the failed attempts so far of a submission's chunks, pending or failed.
func (q *Queuer) Retries(ctx context.Context, id int64) (int64, error) {
	var n int64
	if err := q.pool.QueryRow(ctx, opsqsql.DashboardRetries, pgx.NamedArgs{"id": id}).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the retries of %d: %w", id, err)
	}
	return n, nil
}

// ErrNoSuchTarget: the instance or shard an administrative action names does not exist.
var ErrNoSuchTarget = errors.New("no such instance or shard")

// SetDraining drains an instance (draining true) or undoes it: sql/admin/drain_instance.sql
// and undrain_instance.sql, the operators' recipes themselves.
func (q *Queuer) SetDraining(ctx context.Context, instance string, draining bool) error {
	stmt := opsqsql.AdminUndrainInstance
	if draining {
		stmt = opsqsql.AdminDrainInstance
	}
	return q.admin(ctx, stmt, pgx.NamedArgs{"instance": instance})
}

// SetShardDisabled disables a shard (disabled true) or enables it again:
// sql/admin/disable_shard.sql and enable_shard.sql.
func (q *Queuer) SetShardDisabled(ctx context.Context, shard int, disabled bool) error {
	stmt := opsqsql.AdminEnableShard
	if disabled {
		stmt = opsqsql.AdminDisableShard
	}
	return q.admin(ctx, stmt, pgx.NamedArgs{"shard": shard})
}

func (q *Queuer) admin(ctx context.Context, stmt string, args pgx.NamedArgs) error {
	tag, err := q.pool.Exec(ctx, stmt, args)
	if err != nil {
		return fmt.Errorf("administering claims: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNoSuchTarget
	}
	return nil
}
