//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// TestBenchBurndownAndDistinctRun runs "opsq bench --workload burndown,distinct" in a tiny
// configuration against the test server: the burn-down reports what PostgreSQL spent per
// chunk beside its rate, and the distinct workload inserts and cancels its submissions
// through the engine's bulk operations.
func TestBenchBurndownAndDistinctRun(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "burndown,distinct", "--instances", "1",
		"--burndown-chunks", "3000", "--consumers", "8", "--distinct-submissions", "3000", "--distinct-values", "100", "--distinct-held", "10",
		"--samples", "50")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	got := map[string]int{}
	for i, r := range report.Rows {
		got[r.Key] = i
	}
	local := os.Getenv(pgtest.EnvURL) == "" // else the server may be elsewhere: CPU not measured
	for _, tt := range []struct {
		key, unit string
		positive  bool
	}{
		{"burndown.rate", "chunks/s", true},
		{"burndown.pg_cpu_per_chunk", "µs", local},
		{"burndown.wal_per_chunk", "bytes", true},
		{"distinct.reserve_p50", "ms", true},
		{"distinct.saturated", "", false},
	} {
		i, ok := got[tt.key]
		if !ok {
			t.Errorf("the report has no %q", tt.key)
			continue
		}
		r := report.Rows[i]
		if r.Unit != tt.unit || (tt.positive && r.Value <= 0) {
			t.Errorf("%s = %v %s (%s); want a positive value in %s", tt.key, r.Value, r.Unit, r.Note, tt.unit)
		}
	}
	// Beside the rate: the rows that follow it.
	if i := got["burndown.rate"]; i+2 >= len(report.Rows) || report.Rows[i+1].Key != "burndown.pg_cpu_per_chunk" ||
		report.Rows[i+2].Key != "burndown.wal_per_chunk" {
		t.Errorf("the cost rows do not follow burndown.rate")
	}
	if !strings.Contains(out.stderr.String(), "bytes of WAL per chunk") {
		t.Errorf("the burn-down's summary line does not give the WAL per chunk:\n%s", out.stderr.String())
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

// TestBenchLatencyRuns runs the latency workload small, with --vacuum: each backlog's
// figures, the growth from the smallest to the largest, and the VACUUM it ran.
func TestBenchLatencyRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "latency", "--instances", "1", "--backlogs", "600,1200",
		"--samples", "50", "--vacuum")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	got, measure := map[string]float64{}, map[string]string{}
	for _, r := range report.Rows {
		got[r.Key], measure[r.Key] = r.Value, r.Measure
	}
	for _, key := range []string{"latency.600.reserve_p50", "latency.600.reserve_p99", "latency.1200.reserve_p50",
		"latency.1200.reserve_p99", "latency.growth_p50", "latency.growth_p99"} {
		if got[key] <= 0 {
			t.Errorf("%s = %v; want a positive value", key, got[key])
		}
	}
	if n := strings.Count(out.stderr.String(), "VACUUM ANALYZE opsq.chunks took"); n != 2 {
		t.Errorf("--vacuum: %d VACUUMs reported; want one per backlog (2)", n)
	}
	if m := measure["latency.1200.reserve_p50"]; !strings.Contains(m, "vacuumed") {
		t.Errorf("latency.1200.reserve_p50 is %q; want it to say the backlog was vacuumed", m)
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

// TestBenchRiverRuns runs "opsq bench --workload burndown --river" in a tiny configuration
// against the test server, with the River module of this source tree: River's three
// figures and the ratios are in the report, and River's scratch database is dropped.
func TestBenchRiverRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 10*time.Minute, "--workload", "burndown", "--river",
		"--instances", "1", "--burndown-chunks", "2000", "--consumers", "8")
	if err != nil {
		t.Fatalf("opsq bench --river: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	got := map[string]int{}
	for i, r := range report.Rows {
		got[r.Key] = i
	}
	local := os.Getenv(pgtest.EnvURL) == ""
	for _, tt := range []struct {
		key               string
		positive, targets bool
	}{
		{"burndown.rate", true, true}, // its target is River's rate
		{"burndown.river.rate", true, false},
		{"burndown.river.pg_cpu_per_job", local, false},
		{"burndown.river.wal_per_job", true, false},
		{"burndown.river_rate_ratio", true, false},
		{"burndown.river_cpu_ratio", local, true},
		{"burndown.river_wal_ratio", true, true},
	} {
		i, ok := got[tt.key]
		if !ok {
			if tt.positive {
				t.Errorf("the report has no %q", tt.key)
			}
			continue
		}
		r := report.Rows[i]
		if (tt.positive && r.Value <= 0) || (tt.targets != (r.Target != nil)) {
			t.Errorf("%s = %v (target %v, %s); want a positive value, with a target: %v", tt.key, r.Value, r.Target != nil, r.Note, tt.targets)
		}
	}
	// River's scratch database is gone.
	pool := pgtest.NewPool(t)
	river := fmt.Sprintf("opsq_bench_%d_river", out.pid)
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM pg_database WHERE datname = $1", river); n != 0 {
		t.Errorf("River's scratch database %s is still there", river)
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

func TestFindRiverDir(t *testing.T) {
	t.Parallel()
	dir, err := findRiverDir("")
	if err != nil {
		t.Fatalf("the River module of this source tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Errorf("findRiverDir = %s: %v", dir, err)
	}
	if _, err := findRiverDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "--river-dir") {
		t.Errorf("findRiverDir of an empty directory: %v; want an error that says to give --river-dir", err)
	}
}

// TestBenchFailuresRuns runs the failures workload small, two rounds: both burn-downs are
// reported, the median of their ratios with each round's, the CPU per chunk, the failed
// attempts, and no chunk was handed out while a reservation of it was live (the bench
// fails if the server ignored on_failure or retry_backoff); the speed is not checked.
func TestBenchFailuresRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "failures", "--instances", "1", "--consumers", "8",
		"--failure-chunks", "1000", "--failure-rate", "0.05", "--failure-rounds", "2")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	rows := map[string]benchRow{}
	for _, r := range report.Rows {
		rows[r.Key] = r
	}
	for _, key := range []string{"failures.rate", "failures.clean_rate", "failures.rate_ratio", "failures.attempts_failed",
		"failures.cpu_per_chunk", "failures.clean_cpu_per_chunk", "failures.cpu_ratio"} {
		if r, ok := rows[key]; !ok || r.Value <= 0 {
			t.Errorf("%s = %v (%s); want a positive value", key, r.Value, r.Note)
		}
	}
	if r := rows["failures.rate_ratio"]; !regexp.MustCompile(`rounds: [0-9.]+×, [0-9.]+×;`).MatchString(r.Note) {
		t.Errorf("failures.rate_ratio's note %q; want the two rounds' ratios", r.Note)
	}
	if _, ok := rows["failures.chunks_failed"]; !ok {
		t.Errorf("the report has no failures.chunks_failed")
	}
	for _, key := range []string{"failures.handed_out_twice", "failures.clean_handed_out_twice"} {
		r, ok := rows[key]
		if !ok || r.Value != 0 || r.Target == nil {
			t.Errorf("%s = %v (in the report: %v, target %v); want 0 against a target", key, r.Value, ok, r.Target)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

// TestBenchLatencyWaitingRuns runs the latency workload small with --waiting: the backlog
// is timed without and then beside the waiting chunks, the ratio is reported, and the
// chunks handed out of the waiting submission are counted (none, once the server keeps
// not_before; the bench marks a chunk handed out early as broken).
func TestBenchLatencyWaitingRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "latency", "--instances", "1", "--backlogs", "600",
		"--samples", "50", "--waiting", "1000")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	rows := map[string]benchRow{}
	for _, r := range report.Rows {
		rows[r.Key] = r
	}
	for _, key := range []string{"latency.600.reserve_p50", "latency.600.reserve_p99", "latency.600.waiting.reserve_p50",
		"latency.600.waiting.reserve_p99", "latency.600.waiting_p50_ratio", "latency.600.waiting_p99_ratio"} {
		if r, ok := rows[key]; !ok || r.Value <= 0 {
			t.Errorf("%s = %v (%s); want a positive value", key, r.Value, r.Note)
		}
	}
	if r := rows["latency.600.reserve_p50"]; r.Target == nil {
		t.Errorf("latency.600.reserve_p50 has no target; want the backlog's own (≤ 1 ms)")
	}
	if m := rows["latency.600.waiting.reserve_p50"].Measure; !strings.Contains(m, "beside 1 000 waiting") {
		t.Errorf("latency.600.waiting.reserve_p50 is %q; want it to say beside how many waiting chunks", m)
	}
	seen, ok := rows["latency.600.waiting_handed_out"]
	if !ok {
		t.Errorf("the report has no latency.600.waiting_handed_out")
	} else if seen.Target != nil && seen.Value != 0 {
		t.Errorf("%v waiting chunks handed out; want none", seen.Value)
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}
