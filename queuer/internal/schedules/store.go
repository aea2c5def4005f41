package schedules

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/internal/submissions"
	opsqsql "opsq/sql"
)

// Submitter makes a run's submission and reads the previous one (the submissions store).
type Submitter interface {
	Submit(ctx context.Context, sub submissions.NewSubmission, chunks submissions.Chunks) (submissions.Created, error)
	Status(ctx context.Context, id int64) (submissions.Status, error)
	Cancel(ctx context.Context, id int64) (submissions.Status, error)
}

// Defaults of Config.
const (
	// TickDefault is how often an instance looks for due runs.
	TickDefault = 250 * time.Millisecond
	// LeaseDefault is how long an instance holds a due schedule while it fires its run; a
	// killed or stopped instance's run is fired by another once it ends.
	LeaseDefault = time.Second
	// MissedAfterDefault is how late a run may be and still be made; a run later than that
	// (no instance ran at its time) is missed (catch_up "last" makes the latest of them).
	MissedAfterDefault = 10 * time.Second
	// RetryMaxDefault bounds the wait between the attempts of a run that failed to submit.
	RetryMaxDefault = time.Minute
)

// Config configures a Store.
type Config struct {
	Pool      opsqsql.Pool
	Log       *slog.Logger
	Submitter Submitter
	// Now, when set, is the time runs are due at and counted from: tests move it. nil is
	// the database's clock, which every instance shares (the default).
	Now func() time.Time
	// Tick is how often the Firer looks for due runs. Defaults to 250ms (TickDefault).
	Tick time.Duration
	// Lease is how long a due schedule is held while its run is fired. Defaults to 1s
	// (LeaseDefault).
	Lease time.Duration
	// MissedAfter is how late a run may be made. Defaults to 10s (MissedAfterDefault).
	MissedAfter time.Duration
	// Ready, when set, says whether this instance may fire runs now (it can submit and
	// is not shutting down); while it says no, the other instances fire them.
	Ready func() bool
	// OnRun, when set, hears the outcome of every run recorded (for metrics).
	OnRun func(outcome string, n int)
}

// Store is the schedules of every tenant. It is safe for concurrent use.
type Store struct {
	cfg Config

	mu       sync.Mutex
	timings  map[[2]string]Timing // by cron and time zone: a time zone is read from disk
	recorded atomic.Int64         // recordings of one run, for pruneEvery
}

// timingsKept bounds the timings cache: at most this many, then it starts again.
const timingsKept = 4096

// timing is ParseTiming's, read once per cron and time zone.
func (s *Store) timing(cron, timezone string) (Timing, error) {
	k := [2]string{cron, timezone}
	s.mu.Lock()
	t, ok := s.timings[k]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := ParseTiming(cron, timezone)
	if err != nil {
		return t, err
	}
	s.mu.Lock()
	if s.timings == nil || len(s.timings) >= timingsKept {
		s.timings = map[[2]string]Timing{}
	}
	s.timings[k] = t
	s.mu.Unlock()
	return t, nil
}

// New returns the store; its Firer makes the runs.
func New(cfg Config) *Store {
	cfg.Tick = cmp.Or(cfg.Tick, TickDefault)
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.MissedAfter = cmp.Or(cfg.MissedAfter, MissedAfterDefault)
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{cfg: cfg}
}

// Def is a schedule as a producer defines it; the caller has checked Template as a
// submission body and made Plan of it.
type Def struct {
	Tenant   string
	Name     string
	Cron     string
	Timezone string
	// Template is the submission body as given (JSON), shown back.
	Template  string
	Plan      Plan
	Overlap   string
	CatchUp   string
	Paused    bool
	CreatedBy int64
}

// Run is one run of a schedule: its scheduled time, what it did (Outcome: submitted with
// SubmissionID, skipped, missed, failed with Error after Attempts) and when (At).
type Run = opsqsql.ScheduleRun

// Schedule is a schedule as it is read: its definition, its next runs and (Get only) its
// last ones, the latest first.
type Schedule struct {
	Tenant           string
	Name             string
	Cron             string
	Timezone         string
	Template         json.RawMessage
	Overlap          string
	CatchUp          string
	Paused           bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
	LastSubmissionID int64
	NextRuns         []time.Time
	LastRuns         []Run
}

// check settles a definition's defaults and checks what the store owns of it.
func (d *Def) check() (Timing, error) {
	d.Overlap = cmp.Or(d.Overlap, OverlapSkip)
	d.CatchUp = cmp.Or(d.CatchUp, CatchUpNone)
	d.Timezone = cmp.Or(d.Timezone, "UTC")
	if err := CheckName(d.Name); err != nil {
		return Timing{}, err
	}
	switch d.Overlap {
	case OverlapSkip, OverlapAllow, OverlapCancelPrevious:
	default:
		return Timing{}, fieldError("overlap", "must be \"skip\", \"allow\" or \"cancel_previous\"")
	}
	switch d.CatchUp {
	case CatchUpNone, CatchUpLast:
	default:
		return Timing{}, fieldError("catch_up", "must be \"none\" or \"last\"")
	}
	if len(d.Template) > TemplateMax {
		return Timing{}, fieldError("submission", "%d bytes, over the %d-byte limit of a template (large batches use object-storage mode: prefix and chunk_count)", len(d.Template), TemplateMax)
	}
	return ParseTiming(d.Cron, d.Timezone)
}

// now is the time runs are counted from.
func (s *Store) now(ctx context.Context) (time.Time, error) {
	if s.cfg.Now != nil {
		return s.cfg.Now().UTC(), nil
	}
	return opsqsql.New(s.cfg.Pool).DatabaseNow(ctx)
}

func (s *Store) row(ctx context.Context, d Def, t Timing) (opsqsql.ScheduleDef, error) {
	plan, err := json.Marshal(d.Plan)
	if err != nil {
		return opsqsql.ScheduleDef{}, fmt.Errorf("encoding the plan of schedule %q: %w", d.Name, err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return opsqsql.ScheduleDef{}, err
	}
	return opsqsql.ScheduleDef{Tenant: d.Tenant, Name: d.Name, Cron: d.Cron, Timezone: d.Timezone, Template: d.Template,
		Plan: string(plan), Overlap: d.Overlap, CatchUp: d.CatchUp, Paused: d.Paused, CreatedBy: d.CreatedBy,
		NextRunAt: t.Next(now)}, nil
}

// Create makes a schedule: ErrExists when its tenant has one of its name, ErrTooMany past
// PerTenantMax, a *FieldError for a definition that cannot be.
func (s *Store) Create(ctx context.Context, d Def) (Schedule, error) {
	t, err := d.check()
	if err != nil {
		return Schedule{}, err
	}
	row, err := s.row(ctx, d, t)
	if err != nil {
		return Schedule{}, err
	}
	// The tenant's lock, then the count and the insert: creates at once at PerTenantMax-1
	// make one schedule, not one each.
	var got opsqsql.ScheduleInsertRow
	err = opsqsql.InTx(ctx, s.cfg.Pool, func(db opsqsql.Queries) error {
		if err := db.ScheduleTenantLock(ctx, d.Tenant); err != nil {
			return err
		}
		got, err = db.ScheduleInsert(ctx, row, PerTenantMax)
		return err
	})
	switch {
	case err != nil:
		return Schedule{}, fmt.Errorf("creating schedule %q: %w", d.Name, err)
	case got.Taken:
		return Schedule{}, ErrExists
	case got.ID == nil:
		return Schedule{}, ErrTooMany
	}
	return s.Get(ctx, d.Tenant, d.Name, false)
}

// Replace replaces a schedule's definition (PUT); its runs so far stay, its next run is
// counted from now.
func (s *Store) Replace(ctx context.Context, d Def) (Schedule, error) {
	t, err := d.check()
	if err != nil {
		return Schedule{}, err
	}
	row, err := s.row(ctx, d, t)
	if err != nil {
		return Schedule{}, err
	}
	if err := opsqsql.New(s.cfg.Pool).ScheduleReplace(ctx, row); err != nil {
		return Schedule{}, notFound(err)
	}
	return s.Get(ctx, d.Tenant, d.Name, false)
}

func notFound(err error) error {
	if errors.Is(err, opsqsql.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Get reads a schedule, with its last runs when runs.
func (s *Store) Get(ctx context.Context, tenant, name string, runs bool) (Schedule, error) {
	db := opsqsql.New(s.cfg.Pool)
	row, err := db.ScheduleGet(ctx, tenant, name)
	if err != nil {
		return Schedule{}, notFound(err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return Schedule{}, err
	}
	sc := schedule(row, now)
	if runs {
		if sc.LastRuns, err = db.ScheduleRunsList(ctx, row.ID, RunsKept); err != nil {
			return Schedule{}, fmt.Errorf("reading the runs of schedule %q: %w", name, err)
		}
	}
	return sc, nil
}

// ListMax is how many schedules List returns at most.
const ListMax = PerTenantMax

// List reads the schedules of tenant ("" for every tenant), by tenant and name, at most
// ListMax after (afterTenant, afterName), and whether more follow.
func (s *Store) List(ctx context.Context, tenant, afterTenant, afterName string) ([]Schedule, bool, error) {
	rows, err := opsqsql.New(s.cfg.Pool).ScheduleList(ctx, opsqsql.ScheduleListParams{
		Tenant: tenant, AfterTenant: afterTenant, AfterName: afterName, Limit: ListMax + 1})
	if err != nil {
		return nil, false, fmt.Errorf("listing schedules: %w", err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, false, err
	}
	more := len(rows) > ListMax
	rows = rows[:min(len(rows), ListMax)]
	out := make([]Schedule, 0, len(rows))
	for _, r := range rows {
		out = append(out, schedule(r, now))
	}
	return out, more, nil
}

func schedule(r opsqsql.ScheduleRow, now time.Time) Schedule {
	sc := Schedule{Tenant: r.Tenant, Name: r.Name, Cron: r.Cron, Timezone: r.Timezone, Template: json.RawMessage(r.Template),
		Overlap: r.Overlap, CatchUp: r.CatchUp, Paused: r.Paused, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, NextRuns: []time.Time{}}
	if r.LastSubmissionID != nil {
		sc.LastSubmissionID = *r.LastSubmissionID
	}
	if t, err := ParseTiming(r.Cron, r.Timezone); err == nil {
		from := now
		if r.NextRunAt.Before(from) {
			from = r.NextRunAt.Add(-time.Nanosecond) // a run due now, not made yet
		}
		sc.NextRuns = t.NextN(from, NextRunsShown)
	}
	return sc
}

// Delete deletes a schedule and its runs.
func (s *Store) Delete(ctx context.Context, tenant, name string) error {
	return notFound(opsqsql.New(s.cfg.Pool).ScheduleDelete(ctx, tenant, name))
}

// Pause stops a schedule's runs until Resume; idempotent.
func (s *Store) Pause(ctx context.Context, tenant, name string) (Schedule, error) {
	if err := opsqsql.New(s.cfg.Pool).SchedulePause(ctx, tenant, name, true, time.Time{}); err != nil {
		return Schedule{}, notFound(err)
	}
	return s.Get(ctx, tenant, name, false)
}

// Resume makes a paused schedule run again from its next time after now (the runs its
// pause passed over are not made); idempotent.
func (s *Store) Resume(ctx context.Context, tenant, name string) (Schedule, error) {
	db := opsqsql.New(s.cfg.Pool)
	row, err := db.ScheduleGet(ctx, tenant, name)
	if err != nil {
		return Schedule{}, notFound(err)
	}
	t, err := ParseTiming(row.Cron, row.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return Schedule{}, err
	}
	if err := db.SchedulePause(ctx, tenant, name, false, t.Next(now)); err != nil {
		return Schedule{}, notFound(err)
	}
	return s.Get(ctx, tenant, name, false)
}
