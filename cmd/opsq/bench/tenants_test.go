//go:build linux

package bench

import (
	"strings"
	"testing"
	"time"
)

// TestBenchTenantsRuns runs the tenants workload small: both consumers' percentiles and
// their ratio are reported, and no chunk of another tenant reached the limited consumer.
func TestBenchTenantsRuns(t *testing.T) {
	t.Parallel()
	out, err := runBench(t, 5*time.Minute, "--workload", "tenants", "--instances", "2", "--tenant-chunks", "5050", "--samples", "25")
	if err != nil {
		t.Fatalf("opsq bench: %v\n%s", err, out.stderr.String())
	}
	report := out.report(t)
	if len(report.Broken) > 0 {
		t.Errorf("broken: %q", report.Broken)
	}
	got := map[string]benchRow{}
	for _, r := range report.Rows {
		got[r.Key] = r
	}
	for _, key := range []string{"tenants.unlimited.reserve_p50", "tenants.unlimited.reserve_p99", "tenants.limited.reserve_p50",
		"tenants.limited.reserve_p99", "tenants.p50_ratio", "tenants.p99_ratio", "tenants.insert_seconds"} {
		if r, ok := got[key]; !ok || r.Value <= 0 {
			t.Errorf("%s = %v (in the report: %t); want a positive value", key, r.Value, ok)
		}
	}
	if r := got["tenants.p50_ratio"]; r.Target == nil || r.Target.Op != "<=" || r.Target.Bound != tenantP50Target {
		t.Errorf("tenants.p50_ratio's target is %+v; want <= %d", r.Target, tenantP50Target)
	}
	if r := got["tenants.p50_ratio"]; !strings.Contains(r.Note, "10 000 000") {
		t.Errorf("tenants.p50_ratio's note is %q; want it to say the target is for 10 000 000 chunks", r.Note)
	}
	if r, ok := got["tenants.violations"]; !ok || r.Value != 0 || r.Met == nil || !*r.Met {
		t.Errorf("tenants.violations = %+v; want 0, met", r)
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", out.stdout.String(), out.stderr.String())
	}
}

// TestTenantShare: the backlog is spread evenly, every chunk given to one tenant.
func TestTenantShare(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{100, 5050, 10_000_000, 10_000_099} {
		var sum, lo, hi int64 = 0, n, 0
		for i := range tenantCount {
			s := tenantShare(n, i)
			sum, lo, hi = sum+s, min(lo, s), max(hi, s)
		}
		if sum != n || hi-lo > 1 {
			t.Errorf("tenantShare(%d, …): %d chunks in all, from %d to %d per tenant; want %d, at most 1 apart", n, sum, lo, hi, n)
		}
	}
}
