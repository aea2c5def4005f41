package queuer

import (
	"context"
	"sync/atomic"
	"time"

	"opsq/queuer/internal/schedules"
)

// Schedules (DESIGN.md §3 "Work that starts itself"): the words of the schedules part, and
// the producers' verbs on their tenant's schedules, each the part's.
type (
	// ScheduleDef is a schedule as a producer defines it.
	ScheduleDef = schedules.Def
	// SchedulePlan is the engine's form of a schedule's submission template.
	SchedulePlan = schedules.Plan
	// Schedule is a schedule as it is read, with its next and last runs.
	Schedule = schedules.Schedule
	// ScheduleRun is one run of a schedule.
	ScheduleRun = schedules.Run
	// ScheduleTiming is when a schedule runs (ParseScheduleTiming).
	ScheduleTiming = schedules.Timing
	// ScheduleFieldError is a schedule that cannot be, naming the field.
	ScheduleFieldError = schedules.FieldError
)

// The schedules' errors and bounds.
var (
	ErrScheduleNotFound = schedules.ErrNotFound
	ErrScheduleExists   = schedules.ErrExists
	ErrTooManySchedules = schedules.ErrTooMany
)

const (
	ScheduleNameMax     = schedules.NameMax
	SchedulesPerTenant  = schedules.PerTenantMax
	ScheduleTemplateMax = schedules.TemplateMax
	ScheduleBackfillMax = schedules.BackfillMax
	ScheduleRunsKept    = schedules.RunsKept
	ScheduleListMax     = schedules.ListMax
	// The outcomes of a run.
	ScheduleRunSubmitted = schedules.RunSubmitted
	ScheduleRunSkipped   = schedules.RunSkipped
	ScheduleRunMissed    = schedules.RunMissed
	ScheduleRunFailed    = schedules.RunFailed
)

// ParseScheduleTiming checks a cron expression and a time zone (a *ScheduleFieldError
// naming cron or timezone).
func ParseScheduleTiming(cron, timezone string) (ScheduleTiming, error) {
	return schedules.ParseTiming(cron, timezone)
}

// CheckScheduleTemplate checks the template fields of a schedule's submission and returns
// them rendered for the run at at (a *ScheduleFieldError naming submission.<field>).
func CheckScheduleTemplate(prefix, metadata, idempotencyKey string, at time.Time, loc *time.Location) (string, string, string, error) {
	return schedules.CheckTemplate(prefix, metadata, idempotencyKey, at, loc)
}

// CheckScheduleName checks a schedule's name.
func CheckScheduleName(name string) error { return schedules.CheckName(name) }

// CreateSchedule makes a schedule.
func (q *Queuer) CreateSchedule(ctx context.Context, d ScheduleDef) (Schedule, error) {
	return q.schedules.Create(ctx, d)
}

// ReplaceSchedule replaces a schedule's definition.
func (q *Queuer) ReplaceSchedule(ctx context.Context, d ScheduleDef) (Schedule, error) {
	return q.schedules.Replace(ctx, d)
}

// Schedule reads one schedule with its last runs.
func (q *Queuer) Schedule(ctx context.Context, tenant, name string) (Schedule, error) {
	return q.schedules.Get(ctx, tenant, name, true)
}

// Schedules lists the schedules of tenant ("" for every tenant) after (afterTenant,
// afterName), at most ScheduleListMax, and whether more follow.
func (q *Queuer) Schedules(ctx context.Context, tenant, afterTenant, afterName string) ([]Schedule, bool, error) {
	return q.schedules.List(ctx, tenant, afterTenant, afterName)
}

// DeleteSchedule deletes a schedule and its runs.
func (q *Queuer) DeleteSchedule(ctx context.Context, tenant, name string) error {
	return q.schedules.Delete(ctx, tenant, name)
}

// PauseSchedule stops a schedule's runs until ResumeSchedule.
func (q *Queuer) PauseSchedule(ctx context.Context, tenant, name string) (Schedule, error) {
	return q.schedules.Pause(ctx, tenant, name)
}

// ResumeSchedule makes a paused schedule run again from its next time.
func (q *Queuer) ResumeSchedule(ctx context.Context, tenant, name string) (Schedule, error) {
	return q.schedules.Resume(ctx, tenant, name)
}

// TriggerSchedule makes one run of a schedule now.
func (q *Queuer) TriggerSchedule(ctx context.Context, tenant, name string) (ScheduleRun, error) {
	return q.schedules.Trigger(ctx, tenant, name)
}

// BackfillSchedule makes the runs of a schedule scheduled in [from, to], each once.
func (q *Queuer) BackfillSchedule(ctx context.Context, tenant, name string, from, to time.Time) ([]ScheduleRun, error) {
	return q.schedules.Backfill(ctx, tenant, name, from, to)
}

// ScheduleRunCounts are the runs this instance recorded, by outcome, since it started.
type ScheduleRunCounts struct {
	Submitted, Skipped, Missed, Failed int64
}

// ScheduleRuns returns the runs this instance recorded, by outcome.
func (q *Queuer) ScheduleRuns() ScheduleRunCounts {
	c := &q.scheduleRuns
	return ScheduleRunCounts{Submitted: c.submitted.Load(), Skipped: c.skipped.Load(), Missed: c.missed.Load(), Failed: c.failed.Load()}
}

// runCounter counts the runs recorded, by outcome (schedules.Config.OnRun).
type runCounter struct {
	submitted, skipped, missed, failed atomic.Int64
}

func (c *runCounter) add(outcome string, n int) {
	switch outcome {
	case schedules.RunSubmitted:
		c.submitted.Add(int64(n))
	case schedules.RunSkipped:
		c.skipped.Add(int64(n))
	case schedules.RunMissed:
		c.missed.Add(int64(n))
	case schedules.RunFailed:
		c.failed.Add(int64(n))
	}
}
