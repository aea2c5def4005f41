package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

// onceRuns returns, for the times at, one submission each (id "s<i>", created delay after
// its time), the schedule's last_runs naming them and the idempotency keys naming them: a
// schedule that ran exactly once at each time.
func onceRuns(at []time.Time, delay time.Duration) ([]wire.ScheduleRun, []scheduledSubmission, map[time.Time]string) {
	var runs []wire.ScheduleRun
	var subs []scheduledSubmission
	keys := map[time.Time]string{}
	for i, t := range at {
		id := "s" + string(rune('a'+i))
		runs = append(runs, wire.ScheduleRun{ScheduledAt: t, Outcome: "submitted", SubmissionID: id})
		subs = append(subs, scheduledSubmission{ID: id, ScheduledAt: t, CreatedAt: t.Add(delay)})
		keys[t] = id
	}
	return runs, subs, keys
}

// TestCheckRuns: a schedule that ran once at each time passes; a doubled run, a missed
// one, a run at a time not scheduled, and a run whose record or key names another
// submission are each counted, and the delays are each time's first submission's.
func TestCheckRuns(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	expected := expectedTimes(first, first.Add(4*time.Second+500*time.Millisecond), time.Second)
	if len(expected) != 5 || !expected[4].Equal(first.Add(4*time.Second)) {
		t.Fatalf("expectedTimes: %v; want 5 times, every second from %s", expected, first)
	}

	runs, subs, keys := onceRuns(expected, 300*time.Millisecond)
	c := checkRuns(expected, runs, subs, keys)
	if c.Expected != 5 || c.Made != 5 || c.Doubled != 0 || c.Missed != 0 || c.Unexpected != 0 || c.Mismatched != 0 || len(c.Problems) != 0 {
		t.Errorf("once each: %+v; want 5 expected, 5 made, nothing else", c)
	}
	if len(c.Delays) != 5 || slices.ContainsFunc(c.Delays, func(d time.Duration) bool { return d != 300*time.Millisecond }) {
		t.Errorf("once each: delays %v; want 5 × 300ms", c.Delays)
	}

	t.Run("doubled", func(t *testing.T) {
		runs, subs, keys := onceRuns(expected, 300*time.Millisecond)
		subs = append(subs, scheduledSubmission{ID: "twice", ScheduledAt: expected[2], CreatedAt: expected[2].Add(100 * time.Millisecond)})
		c := checkRuns(expected, runs, subs, keys)
		if c.Doubled != 1 || c.Made != 5 || c.Missed != 0 || c.Mismatched != 0 {
			t.Errorf("a time with 2 submissions: %+v; want 1 doubled, 5 made", c)
		}
		if c.Delays[2] != 100*time.Millisecond {
			t.Errorf("the doubled time's delay is %s; want the earliest submission's, 100ms", c.Delays[2])
		}
		if len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "2 submissions") {
			t.Errorf("problems %q; want one naming 2 submissions", c.Problems)
		}
	})
	t.Run("missed", func(t *testing.T) {
		runs, subs, keys := onceRuns(expected, 300*time.Millisecond)
		subs = slices.Delete(subs, 3, 4)
		runs[3] = wire.ScheduleRun{ScheduledAt: expected[3], Outcome: "missed"}
		delete(keys, expected[3])
		c := checkRuns(expected, runs, subs, keys)
		if c.Missed != 1 || c.Made != 4 || c.Doubled != 0 || c.Mismatched != 0 || len(c.Delays) != 4 {
			t.Errorf("a time without a submission: %+v; want 1 missed, 4 made, 4 delays", c)
		}
		if len(c.Problems) != 1 || !strings.Contains(c.Problems[0], `"missed"`) {
			t.Errorf("problems %q; want one quoting the run's outcome", c.Problems)
		}
	})
	t.Run("unexpected", func(t *testing.T) {
		runs, subs, keys := onceRuns(expected, 300*time.Millisecond)
		subs = append(subs,
			scheduledSubmission{ID: "between", ScheduledAt: expected[1].Add(500 * time.Millisecond)},
			scheduledSubmission{ID: "unnamed"},                                          // metadata without a time
			scheduledSubmission{ID: "later", ScheduledAt: expected[4].Add(time.Second)}) // after the times judged: not counted
		c := checkRuns(expected, runs, subs, keys)
		if c.Unexpected != 2 || c.Made != 5 || c.Doubled != 0 {
			t.Errorf("submissions at times not scheduled: %+v; want 2 unexpected, 5 made", c)
		}
	})
	t.Run("mismatched", func(t *testing.T) {
		runs, subs, keys := onceRuns(expected, 300*time.Millisecond)
		runs[0].SubmissionID = "other"
		keys[expected[1]] = "other"
		runs = slices.Delete(runs, 2, 3)
		c := checkRuns(expected, runs, subs, keys)
		if c.Mismatched != 3 || c.Made != 5 || c.Missed != 0 {
			t.Errorf("a run naming another submission, a key naming another, a run not recorded: %+v; want 3 mismatched", c)
		}
	})
	t.Run("none expected", func(t *testing.T) {
		if c := checkRuns(nil, runs, subs, keys); c.Expected != 0 || c.Made != 0 || c.Unexpected != 0 {
			t.Errorf("no time judged: %+v; want nothing counted", c)
		}
	})
}

// TestSpreadCron: the idle schedules are due once a period each, spread over its seconds.
func TestSpreadCron(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		i      int
		period time.Duration
		want   string
	}{
		{0, time.Minute, "0 * * * * *"},
		{61, time.Minute, "1 * * * * *"},
		{7, 5 * time.Second, "2/5 * * * * *"},
		{3, time.Second, "0/1 * * * * *"},
	} {
		if got := spreadCron(tc.i, tc.period); got != tc.want {
			t.Errorf("spreadCron(%d, %s) = %q; want %q", tc.i, tc.period, got, tc.want)
		}
	}
	if idleTenant(999) != "bench-sched-0" || idleTenant(1000) != "bench-sched-1" {
		t.Errorf("idleTenant(999), idleTenant(1000) = %s, %s; want 1 000 schedules a tenant", idleTenant(999), idleTenant(1000))
	}
}

// TestScheduleConfigValidate: the schedules workload's flags are checked only when it
// runs, and each bad one is named.
func TestScheduleConfigValidate(t *testing.T) {
	t.Parallel()
	good := ScheduleConfig{ScheduleDuration: ScheduleDurationDefault, ScheduleCount: ScheduleCountDefault, ScheduleIdlePeriod: ScheduleIdlePeriodDefault,
		ScheduleIdleDuration: ScheduleIdleDurationDefault, ScheduleIdleOverlap: ScheduleIdleOverlapDefault}
	cfg := Config{Instances: 3, Workloads: []string{workloadSchedules}}
	if err := good.validate(cfg); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if err := (ScheduleConfig{}).validate(Config{Instances: 1, Workloads: []string{workloadLatency}}); err != nil {
		t.Errorf("not running: %v; want nil", err)
	}
	for flag, mutate := range map[string]func(*ScheduleConfig, *Config){
		"--instances":              func(_ *ScheduleConfig, c *Config) { c.Instances = 2 },
		"--schedule-duration":      func(s *ScheduleConfig, _ *Config) { s.ScheduleDuration = 2 * time.Minute },
		"--schedule-count":         func(s *ScheduleConfig, _ *Config) { s.ScheduleCount = 0 },
		"--schedule-idle-period":   func(s *ScheduleConfig, _ *Config) { s.ScheduleIdlePeriod = 7 * time.Second },
		"--schedule-idle-duration": func(s *ScheduleConfig, _ *Config) { s.ScheduleIdleDuration = time.Hour },
		"--schedule-idle-overlap":  func(s *ScheduleConfig, _ *Config) { s.ScheduleIdleOverlap = "cancel_previous" },
	} {
		s, c := good, cfg
		mutate(&s, &c)
		if err := s.validate(c); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("bad %s: %v; want an error naming it", flag, err)
		}
	}
}
