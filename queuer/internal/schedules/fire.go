package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// submitTimeout bounds a run's submit.
const submitTimeout = 10 * time.Second

// holdLimit bounds how long a run's submit may hold its locks (NewSubmission.HoldLimit):
// half of submitTimeout, so that another instance's submit of the same run, waiting on a
// stopped holder, still has time to make it.
const holdLimit = submitTimeout / 2

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
		busy, err := s.inProgress(ctx, db, due)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Log.WarnContext(ctx, "reading the due schedules' previous submissions", slog.Any("error", err))
			}
			return
		}
		moves := make([]move, 0, len(due))
		for _, r := range due {
			m, err := s.fire(ctx, r, lease, busy)
			if err != nil {
				if ctx.Err() == nil {
					s.cfg.Log.WarnContext(ctx, "firing a schedule's run", slog.String("tenant", r.Tenant),
						slog.String("schedule", r.Name), slog.Time("scheduled_at", r.NextRunAt), slog.Any("error", err))
				}
				continue
			}
			moves = append(moves, m)
		}
		if err := s.advance(ctx, lease, moves...); err != nil && ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "recording the due schedules' runs", slog.Int("schedules", len(moves)), slog.Any("error", err))
		}
		if len(due) < dueBatch {
			return
		}
	}
}

// move is what firing a leased schedule did: its runs to record and where it moves on to.
type move struct {
	adv  opsqsql.ScheduleAdvanceParams
	runs []Run
}

// inProgress reads which of the due schedules' previous submissions are still in progress,
// in one statement for the batch: the overlap policies ask it of every run.
func (s *Store) inProgress(ctx context.Context, db opsqsql.Queries, due []opsqsql.SchedulesDueRow) (map[int64]bool, error) {
	var ids []int64
	for _, r := range due {
		if r.LastSubmissionID != nil && *r.LastSubmissionID != 0 && r.Overlap != OverlapAllow {
			ids = append(ids, *r.LastSubmissionID)
		}
	}
	busy := map[int64]bool{}
	if len(ids) == 0 {
		return busy, nil
	}
	in, err := db.SubmissionsInProgress(ctx, ids)
	for _, id := range in {
		busy[id] = true
	}
	return busy, err
}

// fire makes the due run of a schedule leased under lease (busy: the previous submissions
// still in progress): the missed runs before it, the run made (or skipped, or failed and
// retried later), and the schedule's next run, which advance records, fenced by the lease.
func (s *Store) fire(ctx context.Context, r opsqsql.SchedulesDueRow, lease int64, busy map[int64]bool) (move, error) {
	timing, err := s.timing(r.Cron, r.Timezone)
	if err != nil {
		return move{}, fmt.Errorf("reading the schedule's timing: %w", err)
	}
	now := r.Now
	adv := opsqsql.ScheduleAdvanceParams{ID: r.ID, LeaseID: lease}
	var runs []Run

	fireAt := r.NextRunAt
	if r.Attempts > 0 {
		// A run that failed to submit is retried until the next one is due.
		if next := timing.Next(r.NextRunAt); !next.After(now) {
			adv.NextRunAt = next
			return move{adv: adv}, nil
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
		plan := func() (p Plan, err error) { return p, json.Unmarshal([]byte(r.Plan), &p) }
		run := s.run(ctx, r.Tenant, r.Name, r.CreatedBy, plan, timing, fireAt, r.Overlap, last, busy[last])
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
	return move{adv: adv, runs: runs}, nil
}

// advance moves leased schedules on and records their runs, in one statement for the
// batch (leased together under lease). Each schedule's lease fences its move only: when it
// was lost (a PUT replaced the schedule meanwhile, or the lease ran out and another
// instance took the schedule) the schedule is left as the other writer left it (but for its
// last_submission_id, which a run submitted here sets when it is the newest run
// submitted), and what this instance did is recorded all the same — a run it submitted is in last_runs whatever
// happened to the schedule's row (a run recorded submitted stays so; a run fired twice is
// one submission by its key). Only a deleted schedule's runs go unrecorded.
func (s *Store) advance(ctx context.Context, lease int64, moves ...move) error {
	if len(moves) == 0 {
		return nil
	}
	db := opsqsql.New(s.cfg.Pool)
	ms := make([]opsqsql.ScheduleMove, len(moves))
	for i, m := range moves {
		ms[i] = opsqsql.ScheduleMove{ScheduleAdvanceParams: m.adv, Runs: m.runs}
	}
	moved, kept, err := db.SchedulesAdvance(ctx, lease, ms)
	if err != nil {
		return err
	}
	for _, m := range moves {
		id := m.adv.ID
		switch {
		case !slices.Contains(kept, id):
			s.cfg.Log.InfoContext(ctx, "a schedule was deleted while its run was fired: the run is not recorded", slog.Int64("schedule", id))
			continue
		case !slices.Contains(moved, id):
			s.cfg.Log.InfoContext(ctx, "a schedule's lease ended while its run was fired (replaced, or taken over): the run is recorded, the schedule left as it is", slog.Int64("schedule", id))
		}
		s.counted(m.runs)
		if len(m.runs) > 1 || len(m.runs) == 1 && s.recorded.Add(1)%pruneEvery == 0 {
			if err := db.ScheduleRunsPrune(ctx, id, RunsKept); err != nil {
				return fmt.Errorf("pruning the runs of schedule %d: %w", id, err)
			}
		}
	}
	return nil
}

// pruneEvery: the runs beyond RunsKept are deleted at one recording in pruneEvery of an
// instance (and whenever several runs are recorded at once), not at every one: the prune
// reads the schedule's last RunsKept runs, more than the recording itself costs. A
// schedule keeps at most RunsKept + pruneEvery - 1 runs recorded by one instance between
// two prunes; reads list at most RunsKept, so those are never shown.
const pruneEvery = 8

func (s *Store) record(ctx context.Context, db opsqsql.Queries, id int64, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	if err := db.ScheduleRunsRecord(ctx, id, runs); err != nil {
		return fmt.Errorf("recording runs: %w", err)
	}
	if len(runs) == 1 && s.recorded.Add(1)%pruneEvery != 0 {
		return nil
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
// busy says whether the previous run's submission, last, was still in progress when read.
// plan reads the schedule's plan; it is called only for a run that submits (most runs of a
// busy schedule skip).
func (s *Store) run(ctx context.Context, tenant, name string, createdBy int64, plan func() (Plan, error), timing Timing, at time.Time, overlap string, last int64, busy bool) Run {
	run := Run{ScheduledAt: at}
	if last != 0 && busy {
		switch overlap {
		case OverlapSkip:
			run.Outcome, run.Error = RunSkipped, fmt.Sprintf("the previous run's submission %d is still in progress (overlap skip)", last)
			return run
		case OverlapCancelPrevious:
			if _, err := s.cfg.Submitter.Cancel(ctx, last); err != nil && !errors.Is(err, submissions.ErrFinished) {
				run.Outcome, run.Error = RunFailed, fmt.Sprintf("cancelling the previous submission %d (overlap cancel_previous): %v", last, err)
				return run
			}
		}
	}
	p, err := plan()
	if err != nil {
		run.Outcome, run.Error = RunFailed, fmt.Sprintf("reading the schedule's plan: %v", err)
		return run
	}
	sub, err := p.Render(at, timing.Location())
	if err != nil {
		run.Outcome, run.Error = RunFailed, err.Error()
		return run
	}
	sub.Tenant, sub.CreatedByKey = tenant, createdBy
	if sub.IdempotencyKey == "" {
		sub.IdempotencyKey = idempotencyKey(name, at)
	}
	// Bounded: a submit that waits on another instance's fails, and the run is retried
	// after its backoff. The locks this submit takes are bounded shorter, by PostgreSQL: an
	// instance stopped (SIGSTOP) while it holds the run's idempotency key has its
	// transaction ended within holdLimit, so the instance that takes the run over gets the
	// key within its own submitTimeout and makes the run late, not lost.
	sub.HoldLimit = holdLimit
	sctx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	created, err := s.cfg.Submitter.Submit(sctx, sub, &chunkList{chunks: p.Chunks})
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
	timing, err := s.timing(row.Cron, row.Timezone)
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
	busy := false
	if last != 0 && overlap != OverlapAllow {
		in, err := db.SubmissionsInProgress(ctx, []int64{last})
		if err != nil {
			return nil, fmt.Errorf("reading the previous submission %d of schedule %q: %w", last, name, err)
		}
		busy = len(in) > 0
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
		run := s.run(ctx, row.Tenant, row.Name, row.CreatedBy, func() (Plan, error) { return plan, nil }, timing, t, overlap, last, busy)
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
