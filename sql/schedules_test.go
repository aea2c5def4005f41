package sql_test

import (
	"errors"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestScheduleInsertBounds: a tenant's schedules are bounded and their names unique per
// tenant (another tenant's count and names are its own); a lease is taken once until it
// ends, and an advance under a lost lease changes nothing.
func TestScheduleInsertBounds(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	ctx := t.Context()
	def := func(tenant, name string) opsqsql.ScheduleDef {
		return opsqsql.ScheduleDef{Tenant: tenant, Name: name, Cron: "@hourly", Timezone: "UTC", Template: "{}", Plan: "{}",
			Overlap: "skip", CatchUp: "none", NextRunAt: time.Now().Add(-time.Second)}
	}
	for _, c := range []struct {
		tenant, name string
		made, taken  bool
	}{
		{"a", "one", true, false}, {"a", "two", true, false}, {"a", "three", false, false}, {"a", "one", false, true},
		{"b", "one", true, false},
	} {
		got, err := db.ScheduleInsert(ctx, def(c.tenant, c.name), 2)
		if err != nil {
			t.Fatal(err)
		}
		if (got.ID != nil) != c.made || got.Taken != c.taken {
			t.Errorf("insert %s/%s with at most 2: made %t, taken %t; want made %t, taken %t", c.tenant, c.name, got.ID != nil, got.Taken, c.made, c.taken)
		}
	}
	due, err := db.SchedulesDue(ctx, opsqsql.SchedulesDueParams{LeaseID: 1, Lease: time.Hour, Limit: 10})
	if err != nil || len(due) != 3 {
		t.Fatalf("due: %d schedules, %v; want the 3 made", len(due), err)
	}
	if again, err := db.SchedulesDue(ctx, opsqsql.SchedulesDueParams{LeaseID: 2, Lease: time.Hour, Limit: 10}); err != nil || len(again) != 0 {
		t.Errorf("due again under live leases: %d schedules, %v; want none", len(again), err)
	}
	run := opsqsql.ScheduleRun{ScheduledAt: due[0].NextRunAt, Outcome: "skipped", Error: "why"}
	move := []opsqsql.ScheduleMove{{ScheduleAdvanceParams: opsqsql.ScheduleAdvanceParams{ID: due[0].ID, NextRunAt: time.Now().Add(time.Hour)}, Runs: []opsqsql.ScheduleRun{run}}}
	runs := func() int64 {
		return pgtest.Count(t, pool, "SELECT count(*) FROM opsq.schedule_runs WHERE schedule_id = $1", due[0].ID)
	}
	// Under a lost lease the schedule stays as it is, but the run is recorded (a PUT may
	// have replaced the schedule while the run was fired).
	if moved, kept, err := db.SchedulesAdvance(ctx, 2, move); err != nil || len(moved) != 0 || len(kept) != 1 || runs() != 1 {
		t.Errorf("advance under another lease: moved %v, kept %v, %v, %d runs recorded; want not moved, its run recorded", moved, kept, err, runs())
	}
	if moved, _, err := db.SchedulesAdvance(ctx, 1, move); err != nil || len(moved) != 1 || moved[0] != due[0].ID || runs() != 1 {
		t.Errorf("advance under its lease: moved %v, %v, %d runs recorded; want it moved, its run recorded once", moved, err, runs())
	}
	// A deleted schedule: nothing moved, nothing recorded, no error.
	gone := []opsqsql.ScheduleMove{{ScheduleAdvanceParams: opsqsql.ScheduleAdvanceParams{ID: 1 << 40, NextRunAt: time.Now()}, Runs: []opsqsql.ScheduleRun{run}}}
	if moved, kept, err := db.SchedulesAdvance(ctx, 1, gone); err != nil || len(moved) != 0 || len(kept) != 0 {
		t.Errorf("advance of a deleted schedule: moved %v, kept %v, %v; want neither, no error", moved, kept, err)
	}
	if err := db.ScheduleDelete(ctx, "a", "nothing"); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("delete of an unknown schedule: %v; want ErrNotFound", err)
	}
}

// TestScheduleAdvanceLostLeaseNotesSubmission: a run submitted under a lost lease becomes
// the schedule's last submission when it is the newest run submitted, and leaves a newer
// run's submission there when it is older.
func TestScheduleAdvanceLostLeaseNotesSubmission(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	ctx := t.Context()
	def := opsqsql.ScheduleDef{Tenant: "a", Name: "lost", Cron: "@hourly", Timezone: "UTC", Template: "{}", Plan: "{}",
		Overlap: "skip", CatchUp: "none", NextRunAt: time.Now().Add(-time.Second)}
	if got, err := db.ScheduleInsert(ctx, def, 10); err != nil || got.ID == nil {
		t.Fatalf("insert: %+v, %v", got, err)
	}
	due, err := db.SchedulesDue(ctx, opsqsql.SchedulesDueParams{LeaseID: 1, Lease: time.Hour, Limit: 10})
	if err != nil || len(due) != 1 {
		t.Fatalf("due: %d schedules, %v; want 1", len(due), err)
	}
	at := due[0].NextRunAt.Truncate(time.Second)
	last := func() int64 {
		row, err := db.ScheduleGet(ctx, "a", "lost")
		if err != nil {
			t.Fatal(err)
		}
		if row.LastSubmissionID == nil {
			return 0
		}
		return *row.LastSubmissionID
	}
	for _, c := range []struct {
		at        time.Time
		sub, want int64
	}{
		{at, 77, 77},                 // the only run: noted though its lease was lost
		{at.Add(-time.Hour), 66, 77}, // an older run submitted late: the newer one's stays
		{at.Add(time.Hour), 88, 88},  // a newer one: noted
	} {
		run := opsqsql.ScheduleRun{ScheduledAt: c.at, Outcome: "submitted", SubmissionID: c.sub}
		move := []opsqsql.ScheduleMove{{ScheduleAdvanceParams: opsqsql.ScheduleAdvanceParams{ID: due[0].ID, NextRunAt: c.at.Add(time.Hour), SubmissionID: c.sub},
			Runs: []opsqsql.ScheduleRun{run}}}
		if moved, kept, err := db.SchedulesAdvance(ctx, 2, move); err != nil || len(moved) != 0 || len(kept) != 1 {
			t.Fatalf("advance under a lost lease: moved %v, kept %v, %v; want not moved, kept", moved, kept, err)
		}
		if got := last(); got != c.want {
			t.Errorf("after the run at %s submitted as %d under a lost lease: last submission %d; want %d", c.at, c.sub, got, c.want)
		}
	}
}
