//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pglocal"
)

// scheduleFailoverGap is how long TestFailoverSchedules leaves PostgreSQL without a
// primary: long enough that runs fall due in the gap, short enough that the test stays
// within its budget (TestFailover holds the long gap of a failover manager).
const scheduleFailoverGap = 4 * time.Second

// TestFailoverSchedules: DESIGN.md §3's "every run makes exactly one submission … even when
// PostgreSQL fails over". A schedule fires every second on 2 instances; the primary (with
// a synchronous standby) is SIGKILLed and the standby promoted scheduleFailoverGap later.
// Then, on the new primary: every scheduled second from the first run to the last is
// recorded exactly once — submitted, or missed/failed with why (a run due in the gap is
// made late if an instance can fire it within MissedAfter, 10 s, of its time, else
// recorded missed) — each submission belongs to exactly one run (none doubled, none made
// for a run recorded otherwise), and once the instances are ready again the runs are made
// within a second of their time.
func TestFailoverSchedules(t *testing.T) {
	if _, err := pglocal.BinDir(); err != nil {
		t.Fatalf("this test starts its own primary and standby: %v", err)
	}
	ctx := t.Context()
	primary, standby, dbURL := primaryWithStandby(t)
	c := clustertest.New(t, opsqBinary, dbURL)
	insts := c.StartN(2)
	cl := insts[0].Client
	if _, err := cl.CreateSchedule(ctx, wire.ScheduleRequest{Name: "every-second", Cron: "@every 1s", Overlap: "allow",
		Submission: []byte(`{"chunks": ["x"], "metadata": "{{.Time}}"}`)}); err != nil {
		t.Fatal(err)
	}
	clustertest.PollUntil(t, 30*time.Second, "3 runs before the failover", func() string {
		sc, err := cl.Schedule(ctx, "", "every-second")
		if err != nil {
			return err.Error()
		}
		if len(sc.LastRuns) < 3 {
			return fmt.Sprintf("%d runs", len(sc.LastRuns))
		}
		return ""
	})
	killed := time.Now()
	if err := primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(killed.Add(scheduleFailoverGap))) // the failover manager's delay
	promoted := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	for _, inst := range insts {
		clustertest.PollUntil(t, time.Until(promoted.Add(15*time.Second)), inst.ID+" to be ready", func() string {
			if code, body := inst.Readyz(); code != 200 {
				return fmt.Sprintf("readyz %d %s", code, body)
			}
			return ""
		})
	}
	ready := time.Now()
	t.Logf("primary killed; standby promoted %s later; both instances ready %s after the promotion",
		promoted.Sub(killed).Round(time.Millisecond), ready.Sub(promoted).Round(time.Millisecond))

	db, err := pgxpool.New(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 5 runs scheduled after the instances were ready, then the schedule is paused and
	// left a lease's length (1 s) and more, for a run in flight at the pause to be recorded.
	clustertest.PollUntil(t, 30*time.Second, "5 runs after the instances were ready", func() string {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM opsq.schedule_runs WHERE scheduled_at > $1`, ready.Add(time.Second)).Scan(&n); err != nil {
			return err.Error()
		}
		if n < 5 {
			return fmt.Sprintf("%d runs", n)
		}
		return ""
	})
	if _, err := cl.PauseSchedule(ctx, "", "every-second"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the lease of a run fired at the pause (nothing to wait on)

	type run struct {
		at, recorded time.Time
		outcome, err string
		sub          *int64
	}
	rows, err := db.Query(ctx, `SELECT scheduled_at, at, outcome, error, submission_id FROM opsq.schedule_runs ORDER BY scheduled_at`)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (run, error) {
		var x run
		return x, r.Scan(&x.at, &x.recorded, &x.outcome, &x.err, &x.sub)
	})
	if err != nil {
		t.Fatal(err)
	}
	subs := map[int64]int{}
	count := map[string]int{}
	var lateAfterReady time.Duration
	for i, r := range runs {
		count[r.outcome]++
		if i > 0 && r.at.Sub(runs[i-1].at) != time.Second {
			t.Errorf("runs %s then %s: %s apart; want every second recorded once", runs[i-1].at.Format(time.RFC3339), r.at.Format(time.RFC3339), r.at.Sub(runs[i-1].at))
		}
		switch {
		case r.outcome == "submitted" && r.sub != nil:
			subs[*r.sub]++
		case r.outcome == "submitted":
			t.Errorf("run %s submitted without a submission", r.at.Format(time.RFC3339))
		case (r.outcome == "missed" || r.outcome == "failed") && strings.TrimSpace(r.err) != "":
		default:
			t.Errorf("run %s: %s %q; want submitted, or missed/failed with why", r.at.Format(time.RFC3339), r.outcome, r.err)
		}
		if r.at.After(ready.Add(time.Second)) {
			lateAfterReady = max(lateAfterReady, r.recorded.Sub(r.at))
		}
	}
	for id, n := range subs {
		if n > 1 {
			t.Errorf("submission %d is the run of %d scheduled times; want 1", id, n)
		}
	}
	var made []int64
	srows, err := db.Query(ctx, `SELECT id FROM opsq.submissions`)
	if err != nil {
		t.Fatal(err)
	}
	if made, err = pgx.CollectRows(srows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	for _, id := range made {
		if subs[id] == 0 {
			t.Errorf("submission %d is no run's: a run made twice, or made and recorded otherwise", id)
		}
	}
	t.Logf("%d scheduled seconds, %v; %d submissions; after the instances were ready, runs recorded at most %s after their time",
		len(runs), count, len(made), lateAfterReady.Round(time.Millisecond))
	if lateAfterReady > time.Second {
		t.Errorf("a run after the failover was recorded %s after its time; want within 1 s", lateAfterReady)
	}
}

// primaryWithStandby starts a primary whose commits wait for its synchronous standby, and
// the standby; the URL names both, for the host that accepts writes. Both stop at the
// test's end. The standby does not name a standby of its own: promoted, it would wait at
// each commit for nobody.
func primaryWithStandby(t *testing.T) (primary, standby *pglocal.Cluster, dbURL string) {
	t.Helper()
	ctx := t.Context()
	primary = &pglocal.Cluster{Dir: t.TempDir(), Settings: map[string]string{
		"synchronous_commit":        "on",
		"synchronous_standby_names": "standby1",
	}}
	standby = &pglocal.Cluster{Dir: t.TempDir()}
	for _, pg := range []*pglocal.Cluster{primary, standby} {
		t.Cleanup(func() {
			if err := pg.Stop(context.Background()); err != nil {
				t.Errorf("stopping PostgreSQL: %v", err)
			}
		})
	}
	if err := primary.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.InitStandby(ctx, primary, "standby1"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Start(ctx); err != nil {
		t.Fatal(err)
	}
	migrate(t, primary.URL("postgres"))
	return primary, standby, fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port, standby.Port)
}
