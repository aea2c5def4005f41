package queuer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// setClock is a clock the test sets and moves by hand, shared by instances.
type setClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *setClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// scheduleDef is a schedule of the default tenant whose runs submit one chunk, with
// metadata "{{.Date}} {{.Time}}".
func scheduleDef(name, cron string) ScheduleDef {
	return ScheduleDef{Tenant: TenantDefault, Name: name, Cron: cron, Template: `{"chunks": ["x"]}`,
		Plan: SchedulePlan{Submission: NewSubmission{Metadata: "{{.Date}} {{.Time}}"}, Chunks: []string{"x"}}}
}

// waitRuns waits until the schedule has recorded runs that ok accepts, and returns them
// (the latest first).
func waitRuns(t *testing.T, q *Queuer, name string, within time.Duration, ok func([]ScheduleRun) bool) []ScheduleRun {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sc, err := q.Schedule(t.Context(), TenantDefault, name)
		if err != nil {
			t.Fatal(err)
		}
		if ok(sc.LastRuns) {
			return sc.LastRuns
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s: the runs awaited did not come within %s; runs: %+v", name, within, sc.LastRuns)
		}
		time.Sleep(50 * time.Millisecond) // polling the condition, not waiting it out
	}
}

func outcomes(runs []ScheduleRun) map[string]int {
	m := map[string]int{}
	for _, r := range runs {
		m[r.Outcome]++
	}
	return m
}

// TestScheduleEverySecondAcrossInstances: "@every 1s" over 3 instances makes one submission
// per scheduled second, none doubled and none missed, while one instance is stopped
// mid-way and another instance's lease is left to run out (a killed or stopped instance
// holding the due schedule): every run is submitted, each by its own submission, and
// within a few seconds of its time.
func TestScheduleEverySecondAcrossInstances(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	qs := []*Queuer{startQueuer(t, pool), startQueuer(t, pool), startQueuer(t, pool)}
	def := scheduleDef("every-second", "@every 1s")
	def.Overlap = "allow"
	if _, err := qs[0].CreateSchedule(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	submitted := func(n int) func([]ScheduleRun) bool {
		return func(runs []ScheduleRun) bool { return outcomes(runs)[ScheduleRunSubmitted] >= n }
	}
	waitRuns(t, qs[1], def.Name, 20*time.Second, submitted(3))
	qs[0].Stop() // mid-way: the others go on
	// A lease taken and never given back, as by an instance killed while firing.
	db := opsqsql.New(pool)
	waitFor := time.Now().Add(10 * time.Second)
	for {
		due, err := db.SchedulesDue(t.Context(), opsqsql.SchedulesDueParams{LeaseID: 42, Lease: time.Second, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 1 || time.Now().After(waitFor) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitRuns(t, qs[1], def.Name, 20*time.Second, submitted(8))
	if _, err := qs[2].PauseSchedule(t.Context(), TenantDefault, def.Name); err != nil {
		t.Fatal(err)
	}
	runs := waitRuns(t, qs[2], def.Name, 5*time.Second, func(r []ScheduleRun) bool { return true })

	slices.Reverse(runs)
	ids := map[int64]bool{}
	var latest time.Duration
	for i, r := range runs {
		if r.Outcome != ScheduleRunSubmitted {
			t.Errorf("run %s: %s (%s); want submitted", r.ScheduledAt, r.Outcome, r.Error)
			continue
		}
		if ids[r.SubmissionID] {
			t.Errorf("run %s: submission %d made twice", r.ScheduledAt, r.SubmissionID)
		}
		ids[r.SubmissionID] = true
		if i > 0 && r.ScheduledAt.Sub(runs[i-1].ScheduledAt) != time.Second {
			t.Errorf("runs %s and %s: %s apart; want 1s, none missed", runs[i-1].ScheduledAt, r.ScheduledAt, r.ScheduledAt.Sub(runs[i-1].ScheduledAt))
		}
		latest = max(latest, r.At.Sub(r.ScheduledAt))
	}
	list, _, err := qs[1].List(t.Context(), ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(ids) {
		t.Errorf("%d submissions; want %d, one per run", len(list), len(ids))
	}
	if latest > 5*time.Second {
		t.Errorf("a run was recorded %s after its time; want within a few seconds", latest)
	}
	t.Logf("%d runs, the latest recorded %s after its time", len(runs), latest)
}

// TestScheduleOverlapAndCatchUp: with overlap skip a run whose previous submission is in
// progress is recorded skipped, and cancel_previous cancels that submission; with catch_up
// none the runs passed while no instance ran are recorded missed, with last the latest of
// them is made.
func TestScheduleOverlapAndCatchUp(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	clock := &setClock{now: time.Now().Truncate(time.Minute).Add(30 * time.Second)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	skip, cancel := scheduleDef("skip", "* * * * *"), scheduleDef("cancel", "* * * * *")
	cancel.Overlap = "cancel_previous"
	none, last := scheduleDef("none", "* * * * *"), scheduleDef("last", "* * * * *")
	none.Overlap, last.Overlap, last.CatchUp = "allow", "allow", "last"
	for _, d := range []ScheduleDef{skip, cancel, none, last} {
		if _, err := q.CreateSchedule(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	count := func(outcome string, n int) func([]ScheduleRun) bool {
		return func(runs []ScheduleRun) bool { return outcomes(runs)[outcome] >= n }
	}
	clock.Add(30 * time.Second) // the first run of each, on time
	for _, name := range []string{"skip", "cancel", "none", "last"} {
		waitRuns(t, q, name, 10*time.Second, count(ScheduleRunSubmitted, 1))
	}
	clock.Add(time.Minute) // the second: the first submissions are in progress
	runs := waitRuns(t, q, "skip", 10*time.Second, count(ScheduleRunSkipped, 1))
	if got := outcomes(runs); got[ScheduleRunSubmitted] != 1 {
		t.Errorf("skip: runs %v; want 1 submitted, 1 skipped", got)
	}
	runs = waitRuns(t, q, "cancel", 10*time.Second, count(ScheduleRunSubmitted, 2))
	st, err := q.Status(ctx, runs[1].SubmissionID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateCancelled {
		t.Errorf("cancel_previous: the first run's submission is %s; want cancelled", st.State)
	}
	waitRuns(t, q, "none", 10*time.Second, count(ScheduleRunSubmitted, 2))
	waitRuns(t, q, "last", 10*time.Second, count(ScheduleRunSubmitted, 2))

	// Every instance down for 10 minutes.
	q.Stop()
	clock.Add(10*time.Minute + 30*time.Second)
	q = startQueuerClock(t, pool, clock)
	runs = waitRuns(t, q, "none", 10*time.Second, count(ScheduleRunMissed, 10))
	if got := outcomes(runs); got[ScheduleRunSubmitted] != 2 || got[ScheduleRunMissed] != 10 {
		t.Errorf("catch_up none: runs %v; want 2 submitted before, 10 missed", got)
	}
	runs = waitRuns(t, q, "last", 10*time.Second, count(ScheduleRunSubmitted, 3))
	if got := outcomes(runs); got[ScheduleRunMissed] != 9 {
		t.Errorf("catch_up last: runs %v; want 9 missed and the latest submitted", got)
	}
	if want := clock.Now().Truncate(time.Minute); !runs[0].ScheduledAt.Equal(want) || runs[0].Outcome != ScheduleRunSubmitted {
		t.Errorf("catch_up last: the latest run is %s %s; want %s submitted", runs[0].ScheduledAt, runs[0].Outcome, want)
	}
}

// TestScheduleTriggerAndBackfill: a trigger makes one run now (twice in a second, still
// one); a backfill makes each scheduled time of its range once, and again makes none;
// {{.Date}} is the date in the schedule's time zone.
func TestScheduleTriggerAndBackfill(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	// 23:30 UTC is 08:30 the next day in Tokyo.
	clock := &setClock{now: time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	def := scheduleDef("tokyo", "0 * * * *")
	def.Timezone = "Asia/Tokyo"
	def.Paused = true
	if _, err := q.CreateSchedule(ctx, def); err != nil {
		t.Fatal(err)
	}
	run, err := q.TriggerSchedule(ctx, TenantDefault, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	again, err := q.TriggerSchedule(ctx, TenantDefault, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	if run.Outcome != ScheduleRunSubmitted || again.SubmissionID != run.SubmissionID {
		t.Errorf("triggers in one second: %+v then %+v; want one submission", run, again)
	}
	st, err := q.Status(ctx, run.SubmissionID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-03-02 2026-03-02T08:30:00+09:00"; st.Metadata != want {
		t.Errorf("metadata %q; want %q ({{.Date}} and {{.Time}} in Asia/Tokyo)", st.Metadata, want)
	}
	from, to := time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	runs, err := q.BackfillSchedule(ctx, TenantDefault, def.Name, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 {
		t.Fatalf("backfill made %d runs; want 5 (18:00 to 22:00)", len(runs))
	}
	for _, r := range runs {
		if r.Outcome != ScheduleRunSubmitted {
			t.Errorf("backfill run %s: %s (%s); want submitted", r.ScheduledAt, r.Outcome, r.Error)
		}
	}
	runs, err = q.BackfillSchedule(ctx, TenantDefault, def.Name, from, to)
	if err != nil || len(runs) != 0 {
		t.Errorf("backfill again: %d runs, %v; want none (each scheduled time once)", len(runs), err)
	}
	var field *ScheduleFieldError
	if _, err := q.BackfillSchedule(ctx, TenantDefault, def.Name, from, from.AddDate(1, 0, 0)); !errors.As(err, &field) || field.Field != "to" {
		t.Errorf("backfill of a year of hours: %v; want an error naming to", err)
	}
	if _, err := q.TriggerSchedule(ctx, TenantDefault, "nothing"); !errors.Is(err, ErrScheduleNotFound) {
		t.Errorf("trigger of an unknown schedule: %v; want ErrScheduleNotFound", err)
	}
	if _, err := q.CreateSchedule(ctx, def); !errors.Is(err, ErrScheduleExists) {
		t.Errorf("a second schedule of the name: %v; want ErrScheduleExists", err)
	}
}

// TestScheduleFailingRunBacksOff: a run that cannot be submitted (over the tenant's quota)
// is recorded failed with why, and retried after a backoff by the schedule's clock, not in
// a loop; once the quota allows it, the same run is submitted.
func TestScheduleFailingRunBacksOff(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	clock := &setClock{now: time.Now().Truncate(time.Minute).Add(30 * time.Second)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	zero := int64(0)
	db := opsqsql.New(pool)
	if _, err := db.TenantSet(ctx, opsqsql.TenantSetParams{Name: TenantDefault, MaxPendingChunks: &zero, KeepInProgress: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.CreateSchedule(ctx, scheduleDef("quota", "* * * * *")); err != nil {
		t.Fatal(err)
	}
	clock.Add(30 * time.Second)
	attempts := func(n int) func([]ScheduleRun) bool {
		return func(runs []ScheduleRun) bool { return len(runs) == 1 && runs[0].Attempts >= n }
	}
	runs := waitRuns(t, q, "quota", 10*time.Second, attempts(1))
	if runs[0].Outcome != ScheduleRunFailed || !strings.Contains(runs[0].Error, "max_pending_chunks") {
		t.Fatalf("run %+v; want failed, naming the quota", runs[0])
	}
	// The clock stands still: no retry comes before its backoff, however many ticks pass.
	time.Sleep(1500 * time.Millisecond) // six ticks of the loop, each of which could retry
	runs = waitRuns(t, q, "quota", time.Second, attempts(1))
	if runs[0].Attempts != 1 {
		t.Fatalf("%d attempts with the clock standing before the backoff's end; want 1", runs[0].Attempts)
	}
	clock.Add(2 * time.Second)
	waitRuns(t, q, "quota", 10*time.Second, attempts(2))
	if _, err := db.TenantSet(ctx, opsqsql.TenantSetParams{Name: TenantDefault, KeepInProgress: true}); err != nil {
		t.Fatal(err)
	}
	clock.Add(5 * time.Second)
	runs = waitRuns(t, q, "quota", 10*time.Second, func(r []ScheduleRun) bool { return len(r) == 1 && r[0].Outcome == ScheduleRunSubmitted })
	if runs[0].Attempts != 3 || runs[0].Error != "" {
		t.Errorf("run %+v; want submitted at the third attempt, without an error", runs[0])
	}
}

// TestSchedulePerTenantLimitConcurrent: a tenant at 999 schedules and 16 creates at once
// (several rounds): exactly one is made each round, the others are refused as too many,
// and the tenant never holds more than 1 000.
func TestSchedulePerTenantLimitConcurrent(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	q := startQueuer(t, pool)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `INSERT INTO opsq.schedules (tenant, name, cron, timezone, template, plan, overlap, catch_up, paused, next_run_at)
		SELECT $1, 'pre-' || i, '@hourly', 'UTC', '{}', '{}', 'skip', 'none', true, now() + interval '1 hour'
		FROM generate_series(1, 999) AS i`, TenantDefault); err != nil {
		t.Fatal(err)
	}
	for round := range 8 {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				def := scheduleDef(fmt.Sprintf("r%d-%d", round, i), "@hourly")
				def.Paused = true
				_, errs[i] = q.CreateSchedule(ctx, def)
			}()
		}
		wg.Wait()
		made := 0
		for _, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, ErrTooManySchedules):
				t.Fatalf("round %d: create: %v; want made or too many", round, err)
			}
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM opsq.schedules WHERE tenant = $1`, TenantDefault).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if made != 1 || n != 1000 {
			t.Fatalf("round %d: 16 creates at 999 schedules made %d, the tenant has %d; want 1 made, 1000", round, made, n)
		}
		if _, err := pool.Exec(ctx, `DELETE FROM opsq.schedules WHERE tenant = $1 AND name LIKE 'r%'`, TenantDefault); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScheduleReplaceDuringFire: a PUT of a schedule while one of its runs is being fired
// (its submit waiting on the run's idempotency key, held by the test's transaction as by a
// slow submit) does not lose the run's record: once the submit goes on, the run is in
// last_runs, submitted with its one submission, and the replaced definition's next run
// is the one after now, not the run fired again.
func TestScheduleReplaceDuringFire(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	clock := &setClock{now: time.Now().Truncate(time.Minute).Add(30 * time.Second)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	def := scheduleDef("put-while-firing", "* * * * *")
	def.Overlap = "allow"
	if _, err := q.CreateSchedule(ctx, def); err != nil {
		t.Fatal(err)
	}
	at := clock.Now().Truncate(time.Minute).Add(time.Minute)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `INSERT INTO opsq.idempotency_keys (tenant, key, submission_id) VALUES ($1, $2, 1)`,
		TenantDefault, "schedule:"+def.Name+":"+at.UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	clock.Add(30 * time.Second) // the run is due; its submit waits on the key
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%idempotency_keys%' AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run's submit did not come to wait on its idempotency key within 10 s")
		}
		time.Sleep(20 * time.Millisecond) // polling the condition
	}
	def.Plan.Submission.Metadata = "replaced {{.Time}}"
	if _, err := q.ReplaceSchedule(ctx, def); err != nil {
		t.Fatal(err)
	}
	if err := hold.Rollback(ctx); err != nil { // the submit goes on
		t.Fatal(err)
	}
	runs := waitRuns(t, q, def.Name, 10*time.Second, func(r []ScheduleRun) bool { return len(r) >= 1 })
	if len(runs) != 1 || !runs[0].ScheduledAt.Equal(at) || runs[0].Outcome != ScheduleRunSubmitted || runs[0].SubmissionID == 0 {
		t.Fatalf("runs %+v; want the run of %s recorded submitted", runs, at)
	}
	sc, err := q.Schedule(ctx, TenantDefault, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.NextRuns) == 0 || !sc.NextRuns[0].Equal(at.Add(time.Minute)) {
		t.Errorf("next runs %v; want %s first (the replaced definition counts from now)", sc.NextRuns, at.Add(time.Minute))
	}
	list, _, err := q.List(ctx, ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d submissions; want 1", len(list))
	}
}

// TestScheduleDSTRunsOnce: a nightly run at 02:30 in Europe/Amsterdam, by the engine's
// clock. On the night the clocks skip 02:30 it is made once, when they jump to 03:00
// ({{.Time}} says 03:00+02:00); on the night 02:30 comes twice it is made once, the first
// time, and the second 02:30 makes nothing.
func TestScheduleDSTRunsOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	clock := &setClock{now: time.Date(2026, 3, 29, 0, 59, 0, 0, time.UTC)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	spring := scheduleDef("spring", "30 2 * * *")
	spring.Timezone = "Europe/Amsterdam"
	if _, err := q.CreateSchedule(ctx, spring); err != nil {
		t.Fatal(err)
	}
	clock.Add(61 * time.Second)
	runs := waitRuns(t, q, "spring", 10*time.Second, func(r []ScheduleRun) bool { return len(r) >= 1 })
	if jump := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC); len(runs) != 1 || !runs[0].ScheduledAt.Equal(jump) || runs[0].Outcome != ScheduleRunSubmitted {
		t.Fatalf("spring: runs %+v; want one, submitted, scheduled at %s (03:00 local, when the clocks jump)", runs, jump)
	}
	st, err := q.Status(ctx, runs[0].SubmissionID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-03-29 2026-03-29T03:00:00+02:00"; st.Metadata != want {
		t.Errorf("spring: metadata %q; want %q", st.Metadata, want)
	}
	if _, err := q.PauseSchedule(ctx, TenantDefault, "spring"); err != nil {
		t.Fatal(err)
	}

	clock.Add(time.Date(2026, 10, 25, 0, 29, 0, 0, time.UTC).Sub(clock.Now()))
	autumn := scheduleDef("autumn", "30 2 * * *")
	autumn.Timezone = "Europe/Amsterdam"
	if _, err := q.CreateSchedule(ctx, autumn); err != nil {
		t.Fatal(err)
	}
	clock.Add(61 * time.Second) // 02:30 CEST, the first
	runs = waitRuns(t, q, "autumn", 10*time.Second, func(r []ScheduleRun) bool { return len(r) >= 1 })
	if first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC); len(runs) != 1 || !runs[0].ScheduledAt.Equal(first) {
		t.Fatalf("autumn: runs %+v; want one, at %s (02:30 CEST)", runs, first)
	}
	clock.Add(time.Hour) // 02:30 CET, the second: nothing is due
	sc, err := q.Schedule(ctx, TenantDefault, "autumn")
	if err != nil {
		t.Fatal(err)
	}
	if next := time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC); len(sc.NextRuns) == 0 || !sc.NextRuns[0].Equal(next) {
		t.Errorf("autumn: next runs %v; want %s first (the next night)", sc.NextRuns, next)
	}
	time.Sleep(time.Second) // four ticks of the loop, any of which would fire a run due
	if sc, err = q.Schedule(ctx, TenantDefault, "autumn"); err != nil || len(sc.LastRuns) != 1 {
		t.Errorf("autumn: runs %+v, %v; want the one of 02:30 CEST only", sc.LastRuns, err)
	}
}

// TestScheduleRunsPruned: a schedule keeps its last ScheduleRunsKept runs. The engine
// prunes at one recording in 8 of an instance (schedules.pruneEvery), so 120 runs leave
// between ScheduleRunsKept and ScheduleRunsKept + 7 rows, and a read shows exactly
// ScheduleRunsKept, the latest first.
func TestScheduleRunsPruned(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	clock := &setClock{now: time.Date(2026, 3, 10, 0, 30, 0, 0, time.UTC)}
	q := startQueuerClock(t, pool, clock)
	ctx := t.Context()
	def := scheduleDef("hourly", "0 * * * *")
	def.Paused = true
	if _, err := q.CreateSchedule(ctx, def); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	runs, err := q.BackfillSchedule(ctx, TenantDefault, def.Name, from, from.Add(119*time.Hour))
	if err != nil || len(runs) != 120 {
		t.Fatalf("backfill: %d runs, %v; want 120", len(runs), err)
	}
	n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.schedule_runs r JOIN opsq.schedules s ON s.id = r.schedule_id WHERE s.name = $1", def.Name)
	if n < ScheduleRunsKept || n > ScheduleRunsKept+7 {
		t.Errorf("%d runs kept after 120; want %d to %d", n, ScheduleRunsKept, ScheduleRunsKept+7)
	}
	sc, err := q.Schedule(ctx, TenantDefault, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.LastRuns) != ScheduleRunsKept || !sc.LastRuns[0].ScheduledAt.Equal(from.Add(119*time.Hour)) {
		t.Errorf("read %d runs, the latest %v; want %d, the latest %v", len(sc.LastRuns), sc.LastRuns[0].ScheduledAt, ScheduleRunsKept, from.Add(119*time.Hour))
	}
}
