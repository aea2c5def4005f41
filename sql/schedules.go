package sql

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed schedule_insert.sql
var scheduleInsert string

// ScheduleDef is a schedule's definition as it is written (schedule_insert.sql,
// schedule_replace.sql): Template the submission body as given, Plan the engine's form of
// it, NextRunAt its first run.
type ScheduleDef struct {
	Tenant    string
	Name      string
	Cron      string
	Timezone  string
	Template  string
	Plan      string
	Overlap   string
	CatchUp   string
	Paused    bool
	CreatedBy int64
	NextRunAt time.Time
}

func (d ScheduleDef) args() pgx.NamedArgs {
	return pgx.NamedArgs{
		"tenant": d.Tenant, "name": d.Name, "cron": d.Cron, "timezone": d.Timezone, "template": d.Template,
		"plan": d.Plan, "overlap": d.Overlap, "catch_up": d.CatchUp, "paused": d.Paused,
		"created_by": d.CreatedBy, "next_run_at": d.NextRunAt,
	}
}

// ScheduleInsertRow is what a create did: ID 0 when nothing was inserted, Taken when the
// name is in use, Count the tenant's schedules before it.
type ScheduleInsertRow struct {
	ID    *int64 `db:"id"`
	Count int64  `db:"count"`
	Taken bool   `db:"taken"`
}

// ScheduleInsert creates a schedule unless its tenant has max of them or one of its name.
func (q Queries) ScheduleInsert(ctx context.Context, d ScheduleDef, max int) (ScheduleInsertRow, error) {
	args := d.args()
	args["max"] = max
	rows, err := q.db.Query(ctx, scheduleInsert, args)
	if err != nil {
		return ScheduleInsertRow{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ScheduleInsertRow])
}

//go:embed schedule_tenant_lock.sql
var scheduleTenantLock string

// ScheduleTenantLock takes the transaction's lock on tenant's schedules, held until it ends.
func (q Queries) ScheduleTenantLock(ctx context.Context, tenant string) error {
	_, err := q.db.Exec(ctx, scheduleTenantLock, pgx.NamedArgs{"tenant": tenant})
	return err
}

//go:embed schedule_replace.sql
var scheduleReplace string

// ScheduleReplace replaces a schedule's definition (CreatedBy is not changed); ErrNotFound
// when it does not exist.
func (q Queries) ScheduleReplace(ctx context.Context, d ScheduleDef) error {
	var id int64
	return notFound(q.db.QueryRow(ctx, scheduleReplace, d.args()).Scan(&id))
}

//go:embed schedule_delete.sql
var scheduleDelete string

// ScheduleDelete deletes a schedule and its runs; ErrNotFound when it does not exist.
func (q Queries) ScheduleDelete(ctx context.Context, tenant, name string) error {
	var id int64
	return notFound(q.db.QueryRow(ctx, scheduleDelete, pgx.NamedArgs{"tenant": tenant, "name": name}).Scan(&id))
}

// ScheduleRow is a schedule as it is stored.
type ScheduleRow struct {
	ID               int64      `db:"id"`
	Tenant           string     `db:"tenant"`
	Name             string     `db:"name"`
	Cron             string     `db:"cron"`
	Timezone         string     `db:"timezone"`
	Template         string     `db:"template"`
	Plan             string     `db:"plan"`
	Overlap          string     `db:"overlap"`
	CatchUp          string     `db:"catch_up"`
	Paused           bool       `db:"paused"`
	CreatedBy        int64      `db:"created_by"`
	CreatedAt        time.Time  `db:"created_at"`
	UpdatedAt        time.Time  `db:"updated_at"`
	NextRunAt        time.Time  `db:"next_run_at"`
	Attempts         int        `db:"attempts"`
	RetryAt          *time.Time `db:"retry_at"`
	LastSubmissionID *int64     `db:"last_submission_id"`
}

//go:embed schedule_get.sql
var scheduleGet string

// ScheduleGet reads one schedule; ErrNotFound when it does not exist.
func (q Queries) ScheduleGet(ctx context.Context, tenant, name string) (ScheduleRow, error) {
	rows, err := q.db.Query(ctx, scheduleGet, pgx.NamedArgs{"tenant": tenant, "name": name})
	if err != nil {
		return ScheduleRow{}, err
	}
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ScheduleRow])
	return row, notFound(err)
}

//go:embed schedule_list.sql
var scheduleList string

// ScheduleListParams are schedule_list.sql's: the schedules of Tenant ("" for all) after
// (AfterTenant, AfterName), at most Limit.
type ScheduleListParams struct {
	Tenant      string
	AfterTenant string
	AfterName   string
	Limit       int
}

// ScheduleList reads a page of schedules by tenant and name.
func (q Queries) ScheduleList(ctx context.Context, p ScheduleListParams) ([]ScheduleRow, error) {
	return collect[ScheduleRow](ctx, q.db, scheduleList, pgx.NamedArgs{
		"tenant": p.Tenant, "after_tenant": p.AfterTenant, "after_name": p.AfterName, "limit": p.Limit,
	})
}

//go:embed schedule_pause.sql
var schedulePause string

// SchedulePause pauses a schedule, or resumes it with its next run at next; ErrNotFound
// when it does not exist.
func (q Queries) SchedulePause(ctx context.Context, tenant, name string, paused bool, next time.Time) error {
	var id int64
	return notFound(q.db.QueryRow(ctx, schedulePause, pgx.NamedArgs{
		"tenant": tenant, "name": name, "paused": paused, "next_run_at": next,
	}).Scan(&id))
}

//go:embed database_now.sql
var databaseNow string

// DatabaseNow reads the database's clock.
func (q Queries) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := q.db.QueryRow(ctx, databaseNow).Scan(&now)
	return now, err
}

//go:embed schedules_due.sql
var schedulesDue string

// SchedulesDueParams are schedules_due.sql's: at most Limit schedules due at Now (nil:
// the database's now()), leased under LeaseID for Lease.
type SchedulesDueParams struct {
	Now     *time.Time
	LeaseID int64
	Lease   time.Duration
	Limit   int
}

// SchedulesDueRow is a schedule leased to fire: Now is the time it was found due at.
type SchedulesDueRow struct {
	ID               int64     `db:"id"`
	Tenant           string    `db:"tenant"`
	Name             string    `db:"name"`
	Cron             string    `db:"cron"`
	Timezone         string    `db:"timezone"`
	Plan             string    `db:"plan"`
	Overlap          string    `db:"overlap"`
	CatchUp          string    `db:"catch_up"`
	CreatedBy        int64     `db:"created_by"`
	NextRunAt        time.Time `db:"next_run_at"`
	Attempts         int       `db:"attempts"`
	LastSubmissionID *int64    `db:"last_submission_id"`
	Now              time.Time `db:"now"`
}

// SchedulesDue leases the schedules whose run is due.
func (q Queries) SchedulesDue(ctx context.Context, p SchedulesDueParams) ([]SchedulesDueRow, error) {
	return collect[SchedulesDueRow](ctx, q.db, schedulesDue, pgx.NamedArgs{
		"now": p.Now, "lease_id": p.LeaseID, "lease_us": p.Lease.Microseconds(), "limit": p.Limit,
	})
}

// ScheduleAdvanceParams are schedule_advance.sql's: schedule ID, leased under LeaseID,
// goes on to NextRunAt with Attempts made of it (retried at RetryAt, nil for none);
// SubmissionID is its last submission (0: unchanged).
type ScheduleAdvanceParams struct {
	ID           int64
	LeaseID      int64
	NextRunAt    time.Time
	Attempts     int
	RetryAt      *time.Time
	SubmissionID int64
}

//go:embed schedule_runs_record.sql
var scheduleRunsRecord string

// ScheduleRun is one run of a schedule as recorded: Outcome submitted (SubmissionID),
// skipped, missed or failed (Error), At when it was recorded.
type ScheduleRun struct {
	ScheduledAt  time.Time `db:"scheduled_at"`
	Outcome      string    `db:"outcome"`
	SubmissionID int64     `db:"submission_id"`
	Error        string    `db:"error"`
	Attempts     int       `db:"attempts"`
	At           time.Time `db:"at"`
}

// ScheduleRunsRecord records runs of schedule id (their At is the database's now).
func (q Queries) ScheduleRunsRecord(ctx context.Context, id int64, runs []ScheduleRun) error {
	times, outcomes, subs, errs, attempts := make([]time.Time, len(runs)), make([]string, len(runs)),
		make([]int64, len(runs)), make([]string, len(runs)), make([]int32, len(runs))
	for i, r := range runs {
		times[i], outcomes[i], subs[i], errs[i], attempts[i] = r.ScheduledAt, r.Outcome, r.SubmissionID, r.Error, int32(max(r.Attempts, 1))
	}
	_, err := q.db.Exec(ctx, scheduleRunsRecord, pgx.NamedArgs{
		"id": id, "times": times, "outcomes": outcomes, "submissions": subs, "errors": errs, "attempts": attempts,
	})
	return err
}

//go:embed schedule_runs_prune.sql
var scheduleRunsPrune string

// ScheduleRunsPrune keeps the keep runs of schedule id recorded last.
func (q Queries) ScheduleRunsPrune(ctx context.Context, id int64, keep int) error {
	_, err := q.db.Exec(ctx, scheduleRunsPrune, pgx.NamedArgs{"id": id, "keep": keep})
	return err
}

//go:embed schedule_runs_list.sql
var scheduleRunsList string

// ScheduleRunsList reads the last limit runs of schedule id, the latest first.
func (q Queries) ScheduleRunsList(ctx context.Context, id int64, limit int) ([]ScheduleRun, error) {
	return collect[ScheduleRun](ctx, q.db, scheduleRunsList, pgx.NamedArgs{"id": id, "limit": limit})
}

//go:embed schedule_runs_submitted.sql
var scheduleRunsSubmitted string

// ScheduleRunsSubmitted returns which of times schedule id has a submitted run for.
func (q Queries) ScheduleRunsSubmitted(ctx context.Context, id int64, times []time.Time) ([]time.Time, error) {
	rows, err := q.db.Query(ctx, scheduleRunsSubmitted, pgx.NamedArgs{"id": id, "times": times})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[time.Time])
}

//go:embed schedule_last_submission.sql
var scheduleLastSubmission string

// ScheduleLastSubmission records schedule id's last submission.
func (q Queries) ScheduleLastSubmission(ctx context.Context, id, submissionID int64) error {
	_, err := q.db.Exec(ctx, scheduleLastSubmission, pgx.NamedArgs{"id": id, "submission_id": submissionID})
	return err
}

//go:embed submissions_in_progress.sql
var submissionsInProgress string

// SubmissionsInProgress returns those of ids that are submissions still in progress.
func (q Queries) SubmissionsInProgress(ctx context.Context, ids []int64) ([]int64, error) {
	rows, err := q.db.Query(ctx, submissionsInProgress, pgx.NamedArgs{"ids": ids})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

//go:embed schedules_advance.sql
var schedulesAdvance string

// ScheduleMove is where a leased schedule goes next (its LeaseID is the batch's) and the
// runs its firing made.
type ScheduleMove struct {
	ScheduleAdvanceParams
	Runs []ScheduleRun
}

// SchedulesAdvance moves the schedules of moves, leased under leaseID, on and records
// their runs, in one statement; it returns the ids of those moved (the others' leases had
// ended) and of those that still exist (the others were deleted: their runs unrecorded).
func (q Queries) SchedulesAdvance(ctx context.Context, leaseID int64, moves []ScheduleMove) (moved, kept []int64, err error) {
	n := len(moves)
	ids, next, attempts, retry, subs := make([]int64, n), make([]time.Time, n), make([]int32, n), make([]*time.Time, n), make([]int64, n)
	var rids, rsubs []int64
	var rtimes []time.Time
	var routcomes, rerrs []string
	var rattempts []int32
	for i, m := range moves {
		ids[i], next[i], attempts[i], retry[i], subs[i] = m.ID, m.NextRunAt, int32(m.Attempts), m.RetryAt, m.SubmissionID
		for _, r := range m.Runs {
			rids, rtimes, routcomes = append(rids, m.ID), append(rtimes, r.ScheduledAt), append(routcomes, r.Outcome)
			rsubs, rerrs, rattempts = append(rsubs, r.SubmissionID), append(rerrs, r.Error), append(rattempts, int32(max(r.Attempts, 1)))
		}
	}
	err = q.db.QueryRow(ctx, schedulesAdvance, pgx.NamedArgs{
		"lease_id": leaseID, "ids": ids, "next_run_ats": next, "attempts": attempts, "retry_ats": retry, "submission_ids": subs,
		"run_schedules": nonNilOf(rids), "run_times": nonNilOf(rtimes), "run_outcomes": nonNilOf(routcomes),
		"run_submissions": nonNilOf(rsubs), "run_errors": nonNilOf(rerrs), "run_attempts": nonNilOf(rattempts),
	}).Scan(&moved, &kept)
	return moved, kept, err
}

// nonNilOf is s, or an empty slice for nil: an empty array, not NULL (a NULL array would
// make ANY and unnest NULL anyway; an empty one says so plainly).
func nonNilOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
