//go:build citus

// The citus workload end to end, on real clusters: `make test-citus` (-tags citus) runs it.
// It starts its own clusters (one PostgreSQL, a single-node Citus, a coordinator and 2
// workers), so it needs Citus in the local PostgreSQL server, not OPSQ_TEST_CITUS.

package bench

import (
	"strings"
	"testing"
	"time"
)

func TestCitusWorkload(t *testing.T) {
	if err := citusInstalled(); err != nil {
		t.Fatal(err) // never skipped: install Citus as the message says
	}
	const chunks = 2000
	out, err := runBench(t, 5*time.Minute, "--workload", "citus", "--citus-chunks", "2000", "--citus-backlog", "10000",
		"--samples", "200", "--consumers", "16")
	if err != nil {
		t.Fatalf("opsq bench: %v\nstderr:\n%s", err, out.stderr.String())
	}
	t.Logf("stderr:\n%s", out.stderr.String())
	rep := out.report(t)
	rows := map[string]benchRow{}
	for _, row := range rep.Rows {
		rows[row.Key] = row
	}
	want := func(key string) benchRow {
		t.Helper()
		row, ok := rows[key]
		if !ok {
			t.Errorf("no row %s", key)
		} else if row.Unavailable != "" {
			t.Errorf("%s: unavailable (%s)", key, row.Unavailable)
		}
		return row
	}
	for _, s := range citusSetups {
		p := "citus." + s.key + "."
		if r := want(p + "rate"); r.Value <= 0 {
			t.Errorf("%s: %g chunks/s", r.Key, r.Value)
		}
		if r := want(p + "completed"); r.Value != chunks || r.Met == nil || !*r.Met {
			t.Errorf("%s: %g; want %d, met", r.Key, r.Value, chunks)
		}
		if r := want(p + "ledger_completed"); r.Value != chunks {
			t.Errorf("%s: %g; want %d", r.Key, r.Value, chunks)
		}
		for _, k := range []string{"handed_out_twice", "never_handed_out", "ledger_duplicates"} {
			if r := want(p + k); r.Value != 0 {
				t.Errorf("%s: %g; want 0", r.Key, r.Value)
			}
		}
		var cpuSum float64
		for _, node := range s.nodeNames() {
			cpu := want(p + "pg_cpu_per_chunk." + node)
			if cpu.Value <= 0 {
				t.Errorf("%s: %g µs; want some CPU on every node", cpu.Key, cpu.Value)
			}
			cpuSum += cpu.Value
			if r := want(p + "wal_per_chunk." + node); r.Value <= 0 {
				t.Errorf("%s: %g bytes; want some WAL on every node", r.Key, r.Value)
			}
		}
		if !s.citus || s.workers == 0 {
			continue
		}
		total := want(p + "pg_cpu_per_chunk")
		if d := total.Value - cpuSum; d < -0.01*cpuSum || d > 0.01*cpuSum {
			t.Errorf("%s: %g µs; the nodes' rows sum to %g", total.Key, total.Value, cpuSum)
		}
		want(p + "wal_per_chunk")
		if share := want(p + "coordinator_cpu_share"); share.Value <= 0 || share.Value >= 100 || share.Target == nil {
			t.Errorf("%s: %g %% (target %v); want within (0, 100), with a target", share.Key, share.Value, share.Target)
		}
	}
	for _, k := range []string{"citus.single.rate_ratio", "citus.workers.rate_ratio"} {
		if r := want(k); r.Value <= 0 {
			t.Errorf("%s: %g", k, r.Value)
		}
	}
	if r := want("citus.workers.rate_ratio"); r.Target == nil || r.Target.Bound != citusRatioTarget {
		t.Errorf("citus.workers.rate_ratio: target %v; want >= %g", r.Target, citusRatioTarget)
	}
	want("citus.workers.backlog_ingest_seconds")
	if r := want("citus.workers.reserve_p50"); r.Value <= 0 || r.Target == nil {
		t.Errorf("reserve p50: %g ms, target %v", r.Value, r.Target)
	}
	if r := want("citus.workers.reserve_p99"); r.Value < rows["citus.workers.reserve_p50"].Value {
		t.Errorf("reserve p99 %g ms < p50", r.Value)
	}
	var placed float64
	for _, node := range citusSetups[2].nodeNames() {
		r := want("citus.workers.backlog_chunks." + node)
		placed += r.Value
		if (node == "coordinator") != (r.Value == 0) {
			t.Errorf("%s: %g chunks; want none on the coordinator, some on each worker", r.Key, r.Value)
		}
	}
	if placed != 10_000 {
		t.Errorf("the backlog's chunks on the nodes: %g; want 10000", placed)
	}
	if len(rep.Broken) > 0 {
		t.Errorf("broken: %s", strings.Join(rep.Broken, "; "))
	}
	for _, row := range rep.Rows {
		if strings.HasPrefix(row.Key, "citus.") {
			t.Logf("%s = %.2f %s %s", row.Key, row.Value, row.Unit, row.Note)
		}
	}
}
