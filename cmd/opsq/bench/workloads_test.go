//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"opsq/migrations/pgtest"
)

// TestBenchBurndownAndDistinctRun runs "opsq bench --workload burndown,distinct" in a tiny
// configuration against the test server: the burn-down reports what PostgreSQL spent per
// chunk beside its rate, and the distinct workload inserts and cancels its submissions
// through the engine's bulk operations.
func TestBenchBurndownAndDistinctRun(t *testing.T) {
	t.Parallel()
	bin := buildOpsq(t)
	dbURL := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "--database-url", dbURL, "--workload", "burndown,distinct", "--json", "--instances", "1",
		"--burndown-chunks", "3000", "--consumers", "8", "--distinct-submissions", "3000", "--distinct-values", "100", "--distinct-held", "10",
		"--samples", "50")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, stderr.String())
	}
	var report struct {
		Results []struct {
			Key   string  `json:"key"`
			Value float64 `json:"value"`
			Unit  string  `json:"unit"`
			Note  string  `json:"note"`
		} `json:"results"`
		Broken []string `json:"broken"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout.String())
	}
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	got := map[string]int{}
	for i, r := range report.Results {
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
		r := report.Results[i]
		if r.Unit != tt.unit || (tt.positive && r.Value <= 0) {
			t.Errorf("%s = %v %s (%s); want a positive value in %s", tt.key, r.Value, r.Unit, r.Note, tt.unit)
		}
	}
	// Beside the rate: the rows that follow it.
	if i := got["burndown.rate"]; i+2 >= len(report.Results) || report.Results[i+1].Key != "burndown.pg_cpu_per_chunk" ||
		report.Results[i+2].Key != "burndown.wal_per_chunk" {
		t.Errorf("the cost rows do not follow burndown.rate")
	}
	if !strings.Contains(stderr.String(), "bytes of WAL per chunk") {
		t.Errorf("the burn-down's summary line does not give the WAL per chunk:\n%s", stderr.String())
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
