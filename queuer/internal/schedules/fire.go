package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// submitTimeout bounds a run's submit.
const submitTimeout = 10 * time.Second

// dueBatch is how many due schedules one lease takes: few enough that their runs are
// fired well within the lease.
const dueBatch = 16

// Firer is the loop of an instance that makes the runs that are due: every Tick it leases
// the due schedules (those no other instance holds) and fires their runs one by one. Every
// instance runs one; they share the due schedules through the leases. Its goroutine lives
// from Start until Stop.
type Firer struct {
	startstop.Loop
	s *Store
}

var _ startstop.Service = (*Firer)(nil)

// Firer returns the store's loop; Start it.
func (s *Store) Firer() *Firer { return &Firer{s: s} }

// Start starts the loop.
func (f *Firer) Start(ctx context.Context) error {
	f.Go(ctx, func(ctx context.Context) {
		t := time.NewTicker(f.s.cfg.Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			f.s.FireDue(ctx)
		}
	})
	return nil
}

// FireDue fires the runs that are due now, a batch of schedules at a time, until none is
// left or ctx ends; it logs what fails.
func (s *Store) FireDue(ctx context.Context) {
	if s.cfg.Ready != nil && !s.cfg.Ready() {
		return
	}
	db := opsqsql.New(s.cfg.Pool)
	for ctx.Err() == nil {
		var now *time.Time
		if s.cfg.Now != nil {
			n := s.cfg.Now().UTC()
			now = &n
		}
		lease := rand.Int64()
		due, err := db.SchedulesDue(ctx, opsqsql.SchedulesDueParams{Now: now, LeaseID: lease, Lease: s.cfg.Lease, Limit: dueBatch})
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Log.WarnContext(ctx, "reading the due schedules", slog.Any("error", err))
			}
			return
		}
		for _, r := range due {
			if err := s.fire(ctx, r, lease); err != nil && ctx.Err() == nil {
				s.cfg.Log.WarnContext(ctx, "firing a schedule's run", slog.String("tenant", r.Tenant),
					slog.String("schedule", r.Name), slog.Time("scheduled_at", r.NextRunAt), slog.Any("error", err))
			}
		}
		if len(due) < dueBatch {
			return
		}
	}
}

// fire makes the due run of a schedule leased under lease: the missed runs before it
// recorded, the run made (or skipped, or failed and retried later), the schedule moved on
// to its next run, in one transaction fenced by the lease.
func (s *Store) fire(ctx context.Context, r opsqsql.SchedulesDueRow, lease int64) error {
	timing, err := ParseTiming(r.Cron, r.Timezone)
	if err != nil {
		return fmt.Errorf("reading the schedule's timing: %w", err)
	}
	var plan Plan
	if err := json.Unmarshal([]byte(r.Plan), &plan); err != nil {
		return fmt.Errorf("reading the schedule's plan: %w", err)
	}
	now := r.Now
	adv := opsqsql.ScheduleAdvanceParams{ID: r.ID, LeaseID: lease}
	var runs []Run

	fireAt := r.NextRunAt
	if r.Attempts > 0 {
		// A run that failed to submit is retried until the next one is due.
		if next := timing.Next(r.NextRunAt); !next.After(now) {
			adv.NextRunAt = next
			return s.advance(ctx, adv, r.ID, nil)
		}
	} else if now.Sub(fireAt) > s.cfg.MissedAfter {
		// No instance ran at these times: the runs too late are missed (the last RunsKept
		// of them recorded), but for the latest with catch_up "last".
		var missed []time.Time
		t, n := fireAt, 0
		for ; !t.IsZero() && !t.After(now) && now.Sub(t) > s.cfg.MissedAfter; t = timing.Next(t) {
			n++
			missed = append(missed, t)
			if len(missed) > RunsKept {
				missed = missed[1:]
			}
			if n >= 10_000_000 { // a schedule down for ages: go on from now
				t = timing.Next(now)
				break
			}
		}
		switch {
		case !t.IsZero() && !t.After(now):
			fireAt = t // late, but within MissedAfter
		case r.CatchUp == CatchUpLast && len(missed) > 0:
			fireAt, missed = missed[len(missed)-1], missed[:len(missed)-1]
			n--
		default:
			fireAt = time.Time{}
			adv.NextRunAt = t
		}
		for _, m := range missed {
			runs = append(runs, Run{ScheduledAt: m, Outcome: RunMissed,
				Error: fmt.Sprintf("not made within %s of its time: no instance ran, or none could reach PostgreSQL (a failover)", s.cfg.MissedAfter)})
		}
		if n > 0 {
			s.cfg.Log.WarnContext(ctx, "schedule runs missed: no instance ran at their times", slog.String("tenant", r.Tenant),
				slog.String("schedule", r.Name), slog.Int("missed", n), slog.Time("first", r.NextRunAt))
		}
	}
	if !fireAt.IsZero() {
		var last int64
		if r.LastSubmissionID != nil {
			last = *r.LastSubmissionID
		}
		run := s.run(ctx, r.Tenant, r.Name, r.CreatedBy, plan, timing, fireAt, r.Overlap, last)
		run.Attempts = r.Attempts + 1
		runs = append(runs, run)
		adv.SubmissionID = run.SubmissionID
		adv.NextRunAt = timing.Next(fireAt)
		if run.Outcome == RunFailed {
			// Retried after a backoff, until the next run is due.
			adv.Attempts = r.Attempts + 1
			retry := now.Add(min(time.Second<<min(r.Attempts, 10), RetryMaxDefault))
			if !adv.NextRunAt.IsZero() && adv.NextRunAt.Before(retry) {
				retry = adv.NextRunAt
			}
			adv.NextRunAt, adv.RetryAt = fireAt, &retry
		}
	}
	if adv.NextRunAt.IsZero() {
		adv.NextRunAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) // it never runs again
	}
	return s.advance(ctx, adv, r.ID, runs)
}

// advance moves a leased schedule on and records its runs, in one transaction. The lease
// fences the move only: when the lease was lost (a PUT replaced the schedule meanwhile, or
// the lease ran out and another instance took the schedule) the schedule is left as the
// other writer left it, but what this instance did is recorded all the same — a run it
// submitted is in last_runs whatever happened to the schedule's row (schedule_runs_record.sql
// keeps a run submitted once it is; a run fired twice is one submission by its key). Only
// a deleted schedule's runs go unrecorded.
func (s *Store) advance(ctx context.Context, adv opsqsql.ScheduleAdvanceParams, id int64, runs []Run) error {
	lost := false
	err := opsqsql.InTx(ctx, s.cfg.Pool, func(db opsqsql.Queries) error {
		// An instance stopped (SIGSTOP) inside this transaction must not hold the
		// schedule's row, or its run's record, past a second: PostgreSQL ends the session.
		if err := db.ClaimsTimeouts(ctx, opsqsql.ClaimsTimeoutsParams{LockTimeout: "2s", IdleInTransactionSessionTimeout: "1s"}); err != nil {
			return err
		}
		ok, err := db.ScheduleAdvance(ctx, adv)
		if err != nil {
			return err
		}
		lost = !ok
		return s.record(ctx, db, id, runs)
	})
	if lost && isForeignKeyViolation(err) {
		s.cfg.Log.InfoContext(ctx, "a schedule was deleted while its run was fired: the run is not recorded", slog.Int64("schedule", id))
		return nil
	}
	if lost && err == nil {
		s.cfg.Log.InfoContext(ctx, "a schedule's lease ended while its run was fired (replaced, or taken over): the run is recorded, the schedule left as it is", slog.Int64("schedule", id))
	}
	if err == nil {
		s.counted(runs)
	}
	return err
}

// isForeignKeyViolation: err is SQLSTATE 23503 (the schedule's row is gone).
func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

func (s *Store) record(ctx context.Context, db opsqsql.Queries, id int64, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	if err := db.ScheduleRunsRecord(ctx, id, runs); err != nil {
		return fmt.Errorf("recording runs: %w", err)
	}
	return db.ScheduleRunsPrune(ctx, id, RunsKept)
}

func (s *Store) counted(runs []Run) {
	if s.cfg.OnRun == nil {
		return
	}
	for _, r := range runs {
		s.cfg.OnRun(r.Outcome, 1)
	}
}

// run makes the run at at: skipped when overlap says so, else its submission (failed
// when it cannot be made, with why).
func (s *Store) run(ctx context.Context, tenant, name string, createdBy int64, plan Plan, timing Timing, at time.Time, overlap string, last int64) Run {
	run := Run{ScheduledAt: at}
	if last != 0 && overlap != OverlapAllow {
		st, err := s.cfg.Submitter.Status(ctx, last)
		switch {
		case err == nil && st.State == opsqtype.StateInProgress && overlap == OverlapSkip:
			run.Outcome, run.Error = RunSkipped, fmt.Sprintf("the previous run's submission %d is still in progress (overlap skip)", last)
			return run
		case err == nil && st.State == opsqtype.StateInProgress:
			if _, err := s.cfg.Submitter.Cancel(ctx, last); err != nil && !errors.Is(err, submissions.ErrFinished) {
				run.Outcome, run.Error = RunFailed, fmt.Sprintf("cancelling the previous submission %d (overlap cancel_previous): %v", last, err)
				return run
			}
		case err != nil && !errors.Is(err, submissions.ErrNotFound):
			run.Outcome, run.Error = RunFailed, fmt.Sprintf("reading the previous submission %d: %v", last, err)
			return run
		}
	}
	sub, err := plan.Render(at, timing.Location())
	if err != nil {
		run.Outcome, run.Error = RunFailed, err.Error()
		return run
	}
	sub.Tenant, sub.CreatedByKey = tenant, createdBy
	if sub.IdempotencyKey == "" {
		sub.IdempotencyKey = idempotencyKey(name, at)
	}
	// Bounded: a submit that waits on another instance's (one stopped while it held the
	// run's idempotency key) fails, and the run is retried after its backoff.
	sctx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	created, err := s.cfg.Submitter.Submit(sctx, sub, &chunkList{chunks: plan.Chunks})
	if err != nil {
		run.Outcome, run.Error = RunFailed, err.Error()
		return run
	}
	run.Outcome, run.SubmissionID = RunSubmitted, created.ID
	return run
}

// chunkList yields a plan's inline chunks.
type chunkList struct {
	chunks []string
	next   int
}

func (c *chunkList) Next() ([]byte, error) {
	if c.next == len(c.chunks) {
		return nil, io.EOF
	}
	c.next++
	return []byte(c.chunks[c.next-1]), nil
}

// Trigger makes one run of a schedule now (its scheduled time the current second), paused
// or not, under its overlap policy.
func (s *Store) Trigger(ctx context.Context, tenant, name string) (Run, error) {
	now, err := s.now(ctx)
	if err != nil {
		return Run{}, err
	}
	at := now.Truncate(time.Second)
	runs, err := s.runAt(ctx, tenant, name, []time.Time{at}, false)
	if err != nil || len(runs) == 1 {
		return firstRun(runs), err
	}
	// Made already this second (a trigger, or the run of the schedule's own time).
	row, err := opsqsql.New(s.cfg.Pool).ScheduleGet(ctx, tenant, name)
	if err != nil {
		return Run{}, notFound(err)
	}
	made, err := opsqsql.New(s.cfg.Pool).ScheduleRunsList(ctx, row.ID, RunsKept)
	if err != nil {
		return Run{}, err
	}
	for _, r := range made {
		if r.ScheduledAt.Equal(at) {
			return r, nil
		}
	}
	return Run{}, fmt.Errorf("the run of %s of schedule %q was made but is no longer recorded", at.Format(time.RFC3339), name)
}

func firstRun(runs []Run) Run {
	if len(runs) == 0 {
		return Run{}
	}
	return runs[0]
}

// Backfill makes the runs of a schedule scheduled in [from, to] (at most BackfillMax, to
// not after now), each once: those submitted already are passed over. The runs are made
// whatever the overlap policy (each scheduled time once), in order.
func (s *Store) Backfill(ctx context.Context, tenant, name string, from, to time.Time) ([]Run, error) {
	row, err := opsqsql.New(s.cfg.Pool).ScheduleGet(ctx, tenant, name)
	if err != nil {
		return nil, notFound(err)
	}
	timing, err := ParseTiming(row.Cron, row.Timezone)
	if err != nil {
		return nil, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	if to.After(now) {
		return nil, fieldError("to", "%s is after now (%s): a backfill makes runs whose time has come", to.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if to.Before(from) {
		return nil, fieldError("to", "before from")
	}
	var times []time.Time
	for t := timing.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = timing.Next(t) {
		if len(times) == BackfillMax {
			return nil, fieldError("to", "the range holds more than %d runs, the most a backfill makes; split it", BackfillMax)
		}
		times = append(times, t)
	}
	return s.runAt(ctx, tenant, name, times, true)
}

// runAt makes the runs of a schedule at times (a trigger's, a backfill's), passing over
// those submitted already, and records them; a backfill's are made whatever the overlap
// policy.
func (s *Store) runAt(ctx context.Context, tenant, name string, times []time.Time, backfill bool) ([]Run, error) {
	skipDone := true
	db := opsqsql.New(s.cfg.Pool)
	row, err := db.ScheduleGet(ctx, tenant, name)
	if err != nil {
		return nil, notFound(err)
	}
	timing, err := ParseTiming(row.Cron, row.Timezone)
	if err != nil {
		return nil, err
	}
	var plan Plan
	if err := json.Unmarshal([]byte(row.Plan), &plan); err != nil {
		return nil, fmt.Errorf("reading the plan of schedule %q: %w", name, err)
	}
	done := map[time.Time]bool{}
	if skipDone && len(times) > 0 {
		submitted, err := db.ScheduleRunsSubmitted(ctx, row.ID, times)
		if err != nil {
			return nil, fmt.Errorf("reading the runs of schedule %q: %w", name, err)
		}
		for _, t := range submitted {
			done[t.UTC()] = true
		}
	}
	overlap, last := row.Overlap, int64(0)
	if row.LastSubmissionID != nil {
		last = *row.LastSubmissionID
	}
	if backfill {
		overlap = OverlapAllow
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	runs := []Run{}
	for _, t := range times {
		if done[t.UTC()] {
			continue
		}
		run := s.run(ctx, row.Tenant, row.Name, row.CreatedBy, plan, timing, t, overlap, last)
		run.At, run.Attempts = now, 1
		if err := s.record(ctx, db, row.ID, []Run{run}); err != nil {
			return runs, err
		}
		if run.SubmissionID != 0 {
			if err := db.ScheduleLastSubmission(ctx, row.ID, run.SubmissionID); err != nil {
				return runs, err
			}
		}
		s.counted([]Run{run})
		runs = append(runs, run)
	}
	return runs, nil
}
