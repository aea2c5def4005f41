//go:build linux

package bench

import (
	"testing"
	"time"
)

// TestBenchParkedRuns runs "opsq bench --workload parked" small, with API keys (the
// default): the parked consumers' raw reserves carry the consumer key and each gets a
// chunk, none twice, and the report has the figures.
func TestBenchParkedRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "parked", "--instances", "2",
		"--parked-consumers", "200", "--parked-producers", "50")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q\n%s", report.Broken, out.stderr.String())
	}
	got := map[string]float64{}
	for _, r := range report.Rows {
		got[r.Key] = r.Value
	}
	for _, key := range []string{"parked.served_last_seconds", "parked.served_p50"} {
		if v, ok := got[key]; !ok || v <= 0 {
			t.Errorf("%s = %v (reported: %v); want a positive figure", key, v, ok)
		}
	}
}
