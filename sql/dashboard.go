package sql

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

// The dashboard (api/ui).

//go:embed dashboard_overview.sql
var dashboardOverview string

// DashboardOverviewParams are dashboard_overview.sql's.
type DashboardOverviewParams struct {
	Since *time.Time // nil: DoneFinishedSince is 0
}

// DashboardOverviewRow is the dashboard's own part of its overview.
type DashboardOverviewRow struct {
	DoneInProgress    int64 `db:"done_in_progress"`
	FailedLastHour    int64 `db:"failed_last_hour"`
	DoneFinishedSince int64 `db:"done_finished_since"`
	// The in-progress submissions by phase, and the chunks each phase has left (not done).
	Running             int64      `db:"running"`
	Paused              int64      `db:"paused"`
	Scheduled           int64      `db:"scheduled"`
	RunningChunksLeft   int64      `db:"running_chunks_left"`
	PausedChunksLeft    int64      `db:"paused_chunks_left"`
	ScheduledChunksLeft int64      `db:"scheduled_chunks_left"`
	NextScheduledAt     *time.Time `db:"next_scheduled_at"` // the soonest not_before of the scheduled ones
	// The oldest running submission: neither paused nor scheduled.
	OldestID        *int64     `db:"oldest_id"`
	OldestCreatedAt *time.Time `db:"oldest_created_at"`
	Now             time.Time  `db:"now"`
}

// DashboardOverview reads the dashboard's own figures.
func (q Queries) DashboardOverview(ctx context.Context, p DashboardOverviewParams) (DashboardOverviewRow, error) {
	return collectOne[DashboardOverviewRow](ctx, q.db, dashboardOverview, pgx.NamedArgs{"since": p.Since})
}

//go:embed dashboard_retries.sql
var dashboardRetries string

// DashboardRetriesParams are dashboard_retries.sql's.
type DashboardRetriesParams struct {
	ID int64
}

// DashboardRetries returns the failed attempts so far of the chunks of submission p.ID,
// pending or failed (0 for a submission without any, or unknown).
func (q Queries) DashboardRetries(ctx context.Context, p DashboardRetriesParams) (int64, error) {
	var n int64
	err := q.db.QueryRow(ctx, dashboardRetries, pgx.NamedArgs{"id": p.ID}).Scan(&n)
	return n, err
}

//go:embed chunk_detail.sql
var chunkDetail string

// ChunkDetailParams are chunk_detail.sql's.
type ChunkDetailParams struct {
	SubmissionID int64
	ChunkIndex   int32
	Shard        int32 // the chunk's shard (opsqtype.ShardOf)
	MaxBytes     int   // how much of the input and of the output to read, at most
}

// ChunkDetailRow is where one chunk is and the first MaxBytes of what it holds.
type ChunkDetailRow struct {
	State      string     `db:"state"` // pending, waiting, failed, skipped or completed
	Retries    int64      `db:"retries"`
	Input      []byte     `db:"input"`      // nil: none stored (object storage, or completed)
	InputSize  *int64     `db:"input_size"` // the whole input's bytes
	Output     []byte     `db:"output"`
	OutputSize *int64     `db:"output_size"`
	ReadyAt    *time.Time `db:"ready_at"` // a waiting chunk's; nil while paused
	Error      *string    `db:"error"`    // a failed chunk's last error
}

// ChunkDetail reads one chunk for the dashboard's chunk page; ErrNotFound when it is in
// none of the tables (chunk_detail.sql).
func (q Queries) ChunkDetail(ctx context.Context, p ChunkDetailParams) (ChunkDetailRow, error) {
	return collectOne[ChunkDetailRow](ctx, q.db, chunkDetail, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "chunk_index": p.ChunkIndex, "shard": p.Shard, "max_bytes": p.MaxBytes,
	})
}

//go:embed dashboard_children.sql
var dashboardChildren string

// DashboardChildrenParams are dashboard_children.sql's.
type DashboardChildrenParams struct {
	Parent   int64
	Limit    int
	CountMax int
}

// DashboardChildrenRow is a child of a submission, and how many children it has.
type DashboardChildrenRow struct {
	ID    int64  `db:"id"`
	State string `db:"state"`
	Total int64  `db:"total"`
}

// DashboardChildren reads the first p.Limit children of submission p.Parent by id, with
// their states, each row with the count of its children (at most p.CountMax).
func (q Queries) DashboardChildren(ctx context.Context, p DashboardChildrenParams) ([]DashboardChildrenRow, error) {
	return collect[DashboardChildrenRow](ctx, q.db, dashboardChildren, pgx.NamedArgs{"parent": p.Parent, "limit": p.Limit, "count_max": p.CountMax})
}
