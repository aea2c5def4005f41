package main

import (
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestClusterScheduleSurvivesKillAndStop: one schedule firing every second over 3 real
// instances, one SIGKILLed and another SIGSTOPped for 5 s on the way (DESIGN.md §6's
// schedule line, shortened): every scheduled second has exactly one run, submitted, each
// by its own submission, and the database holds exactly those submissions.
func TestClusterScheduleSurvivesKillAndStop(t *testing.T) {
	c := clustertest.New(t, opsqBinary, pgtest.NewDB(t))
	insts := c.StartN(3)
	ctx := t.Context()
	cl := insts[2].Client
	if _, err := cl.CreateSchedule(ctx, wire.ScheduleRequest{Name: "every-second", Cron: "@every 1s", Overlap: "allow",
		Submission: []byte(`{"chunks": ["x"], "metadata": "{{.Time}}"}`)}); err != nil {
		t.Fatal(err)
	}
	submitted := func(n int) func() string {
		return func() string {
			sc, err := cl.Schedule(ctx, "", "every-second")
			if err != nil {
				return err.Error()
			}
			got := 0
			for _, r := range sc.LastRuns {
				if r.Outcome == "submitted" {
					got++
				}
			}
			if got < n {
				return "runs submitted so far: " + strconv.Itoa(got)
			}
			return ""
		}
	}
	clustertest.PollUntil(t, 30*time.Second, "3 runs", submitted(3))
	insts[0].Kill()
	clustertest.PollUntil(t, 30*time.Second, "6 runs", submitted(6))
	insts[1].Signal(syscall.SIGSTOP)
	stopped := time.Now()
	clustertest.PollUntil(t, 30*time.Second, "11 runs", submitted(11))
	for time.Since(stopped) < 5*time.Second {
		time.Sleep(100 * time.Millisecond) // the stop lasts 5 s, as a long pause would
	}
	insts[1].Signal(syscall.SIGCONT)
	clustertest.PollUntil(t, 30*time.Second, "14 runs", submitted(14))
	if _, err := cl.PauseSchedule(ctx, "", "every-second"); err != nil {
		t.Fatal(err)
	}
	// A run being fired at the pause is recorded within its lease (1 s).
	var runs []wire.ScheduleRun
	clustertest.PollUntil(t, 10*time.Second, "the runs to settle", func() string {
		a, err := cl.Schedule(ctx, "", "every-second")
		if err != nil {
			return err.Error()
		}
		time.Sleep(1500 * time.Millisecond) // longer than a lease: a run fired then is recorded
		b, err := cl.Schedule(ctx, "", "every-second")
		if err != nil {
			return err.Error()
		}
		if len(a.LastRuns) != len(b.LastRuns) {
			return "runs still recorded"
		}
		runs = b.LastRuns
		return ""
	})
	slices.Reverse(runs)
	ids := map[string]bool{}
	var lates []time.Duration
	for i, r := range runs {
		if r.Outcome != "submitted" {
			t.Errorf("run %s: %s (%s); want submitted", r.ScheduledAt, r.Outcome, r.Error)
		}
		if ids[r.SubmissionID] {
			t.Errorf("run %s: submission %s made twice", r.ScheduledAt, r.SubmissionID)
		}
		ids[r.SubmissionID] = true
		if i > 0 && r.ScheduledAt.Sub(runs[i-1].ScheduledAt) != time.Second {
			t.Errorf("runs %s then %s: %s apart; want 1s (none missed, none doubled)", runs[i-1].ScheduledAt, r.ScheduledAt, r.ScheduledAt.Sub(runs[i-1].ScheduledAt))
		}
		lates = append(lates, r.At.Sub(r.ScheduledAt))
	}
	var n int
	if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM opsq.submissions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ids) {
		t.Errorf("%d submissions in the database; want %d, one per run", n, len(ids))
	}
	slices.Sort(lates)
	p99 := lates[min(len(lates)-1, len(lates)*99/100)]
	t.Logf("%d runs over %s, each one submission; recorded after their time: median %s, p99 %s, max %s",
		len(runs), runs[len(runs)-1].ScheduledAt.Sub(runs[0].ScheduledAt), lates[len(lates)/2], p99, lates[len(lates)-1])
	if worst := lates[len(lates)-1]; worst > 5*time.Second {
		t.Errorf("a run was recorded %s after its time; want within a few seconds", worst)
	}
}
