//go:build linux

package bench

import (
	"math"
	"testing"
	"time"
)

// rowsOf returns a report's rows by key.
func rowsOf(report benchReport) map[string]benchRow {
	got := map[string]benchRow{}
	for _, r := range report.Rows {
		got[r.Key] = r
	}
	return got
}

// TestBenchSchedulesRuns runs "opsq bench --workload schedules" small on 3 instances: the
// schedule firing every second through a SIGKILL and a SIGSTOP is read back with every run
// made once (none doubled, none missed, each key and record naming its submission), its
// delays are reported against the 1 s target, and the idle part reports the CPU of the
// instances, of PostgreSQL and their sum, with the runs it saw made.
func TestBenchSchedulesRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "schedules", "--schedule-duration", "12s",
		"--schedule-count", "30", "--schedule-idle-period", "5s", "--schedule-idle-duration", "6s")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	if report.Environment.Instances != 3 {
		t.Errorf("%d instances; want 3 unless --instances is given", report.Environment.Instances)
	}
	got := rowsOf(report)
	expected := got["schedules.runs_expected"].Value
	if expected < 8 { // 12 s, less the first second and the 2 s before the pause
		t.Errorf("schedules.runs_expected = %v; want at least 8 of the 12 s", expected)
	}
	if r := got["schedules.runs_made"]; r.Value != expected || r.Met == nil || !*r.Met {
		t.Errorf("schedules.runs_made = %+v; want %v, met", r, expected)
	}
	for _, key := range []string{"schedules.runs_doubled", "schedules.runs_missed", "schedules.runs_unexpected", "schedules.runs_mismatched"} {
		if r, ok := got[key]; !ok || r.Value != 0 || r.Target == nil || r.Target.Op != "==" {
			t.Errorf("%s = %+v (in the report: %t); want 0 with the target == 0", key, r, ok)
		}
	}
	if r := got["schedules.delay_p99"]; r.Value <= 0 || r.Target == nil || r.Target.Op != "<=" || r.Target.Bound != scheduleDelayP99TargetMs {
		t.Errorf("schedules.delay_p99 = %+v; want a positive delay with the target <= %d ms", r, scheduleDelayP99TargetMs)
	}
	if r := got["schedules.delay_p50"]; r.Value <= 0 {
		t.Errorf("schedules.delay_p50 = %+v; want a positive delay", r)
	}
	for _, key := range []string{"schedules.idle.instances_cpu_percent", "schedules.idle.postgres_cpu_percent", "schedules.idle.cpu_percent",
		"schedules.idle.baseline_cpu_percent"} {
		if r, ok := got[key]; !ok || r.Value <= 0 || r.Unit != unitPercent {
			t.Errorf("%s = %+v (in the report: %t); want a positive %%", key, r, ok)
		}
	}
	inst, pg, sum := got["schedules.idle.instances_cpu_percent"].Value, got["schedules.idle.postgres_cpu_percent"].Value, got["schedules.idle.cpu_percent"].Value
	if d := sum - inst - pg; d > 1e-9 || d < -1e-9 {
		t.Errorf("schedules.idle.cpu_percent %v; want the instances' %v plus PostgreSQL's %v", sum, inst, pg)
	}
	if added, base := got["schedules.idle.added_cpu_percent"], got["schedules.idle.baseline_cpu_percent"].Value; added.Unit != unitPercent || math.Abs(added.Value-(sum-base)) > 1e-9 {
		t.Errorf("schedules.idle.added_cpu_percent %+v; want the cluster's %v less the baseline %v", added, sum, base)
	}
	// 30 schedules every 5 s over about 6 s: about 36 runs, all but the first of each
	// skipped (no consumer, overlap skip).
	if r := got["schedules.idle.runs"]; r.Value < 20 {
		t.Errorf("schedules.idle.runs = %+v; want about 36 runs of 30 schedules due every 5 s over 6 s", r)
	}
	if r := got["schedules.idle.runs_missed"]; r.Value != 0 {
		t.Errorf("schedules.idle.runs_missed = %+v; want 0", r)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

// TestBenchDependenciesRuns runs "opsq bench --workload dependencies" small: the chains'
// start delays are reported against the 1 s target, no child started before its parent
// completed, and the backlog is timed alone and beside the waiting child, none of whose
// chunks is handed out.
func TestBenchDependenciesRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "dependencies", "--dependency-chains", "3",
		"--dependency-backlog", "2000", "--dependency-waiting", "5000", "--samples", "50")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	got := rowsOf(report)
	if r := got["dependencies.start_delay_max"]; r.Value <= 0 || r.Target == nil || r.Target.Op != "<=" || r.Target.Bound != dependencyStartTargetMs {
		t.Errorf("dependencies.start_delay_max = %+v; want a positive delay with the target <= %d ms", r, dependencyStartTargetMs)
	}
	if r := got["dependencies.start_delay_p50"]; r.Value <= 0 || r.Value > got["dependencies.start_delay_max"].Value {
		t.Errorf("dependencies.start_delay_p50 = %+v; want a positive delay, at most the max", r)
	}
	for _, key := range []string{"dependencies.started_early", "dependencies.waiting_handed_out"} {
		if r, ok := got[key]; !ok || r.Value != 0 || r.Met == nil || !*r.Met {
			t.Errorf("%s = %+v (in the report: %t); want 0, met", key, r, ok)
		}
	}
	for _, key := range []string{"dependencies.alone.reserve_p50", "dependencies.waiting.reserve_p50", "dependencies.waiting_p50_ratio", "dependencies.waiting_p99_ratio"} {
		if r, ok := got[key]; !ok || r.Value <= 0 {
			t.Errorf("%s = %+v (in the report: %t); want a positive value", key, r, ok)
		}
	}
	if r := got["dependencies.waiting_p50_ratio"]; r.Target == nil || r.Target.Op != "<=" || r.Target.Bound != dependencyP50Target {
		t.Errorf("dependencies.waiting_p50_ratio's target is %+v; want <= %g", r.Target, dependencyP50Target)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}
