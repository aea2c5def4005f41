package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// The citus workload's per-node accounting, without a database: the shares sum to the
// total, node 0 is the coordinator, and its share is judged against ⅓.
func TestCitusNodeAccounting(t *testing.T) {
	spent := []pgSpent{
		{cpu: 100 * time.Millisecond, wal: 1000}, // the coordinator
		{cpu: 300 * time.Millisecond, wal: 3000},
		{cpu: 600 * time.Millisecond, wal: 6000},
	}
	a := accountNodes(spent)
	if a.total.cpu != time.Second || a.total.wal != 10_000 {
		t.Errorf("total %v, %d bytes; want 1s, 10000", a.total.cpu, a.total.wal)
	}
	var cpuSum, walSum float64
	for i := range spent {
		cpuSum += a.cpuShare[i]
		walSum += a.walShare[i]
	}
	if math.Abs(cpuSum-100) > 1e-9 || math.Abs(walSum-100) > 1e-9 {
		t.Errorf("shares sum to %g %% of CPU, %g %% of WAL; want 100", cpuSum, walSum)
	}
	if a.cpuShare[0] != 10 || a.cpuShare[2] != 60 {
		t.Errorf("CPU shares %v; want 10, 30, 60", a.cpuShare)
	}
	if z := accountNodes([]pgSpent{{}, {}}); z.cpuShare[0] != 0 || z.walShare[1] != 0 {
		t.Errorf("nothing spent: shares %v, %v; want 0, not NaN", z.cpuShare, z.walShare)
	}

	s := citusSetups[2]
	rows := map[string]benchRow{}
	for _, r := range nodeCostRows("citus.workers.", s, spent, 1000, "") {
		rows[r.Key] = r
	}
	share := rows["citus.workers.coordinator_cpu_share"]
	if share.Value != 10 || share.Met == nil || !*share.Met {
		t.Errorf("coordinator's share: %g %%, met %v; want 10 %%, met", share.Value, share.Met)
	}
	if r := rows["citus.workers.pg_cpu_per_chunk"]; r.Value != 1000 {
		t.Errorf("CPU per chunk, all nodes: %g µs; want 1000 (1 s over 1000 chunks)", r.Value)
	}
	if r := rows["citus.workers.pg_cpu_per_chunk.worker2"]; r.Value != 600 || !strings.Contains(r.Note, "60.0%") {
		t.Errorf("worker2: %g µs, %q; want 600, 60.0%%", r.Value, r.Note)
	}
	if r := rows["citus.workers.wal_per_chunk.coordinator"]; r.Value != 1 {
		t.Errorf("coordinator's WAL per chunk: %g; want 1", r.Value)
	}

	// The coordinator spending half: the target missed.
	heavy := []pgSpent{{cpu: 500 * time.Millisecond}, {cpu: 250 * time.Millisecond}, {cpu: 250 * time.Millisecond}}
	for _, r := range nodeCostRows("citus.workers.", s, heavy, 1000, "") {
		if r.Key == "citus.workers.coordinator_cpu_share" && (r.Value != 50 || r.Met == nil || *r.Met) {
			t.Errorf("coordinator's share: %g %%, met %v; want 50 %%, missed", r.Value, r.Met)
		}
	}
	// CPU not measured: unavailable, not 0.
	for _, r := range nodeCostRows("citus.workers.", s, heavy, 1000, "not local") {
		if strings.Contains(r.Key, "cpu") && r.Unavailable != "not local" {
			t.Errorf("%s: unavailable %q; want \"not local\"", r.Key, r.Unavailable)
		}
	}
}

func TestCitusValidate(t *testing.T) {
	cfg := Config{Instances: 2, Consumers: 1, Max: 1, Samples: 100, IngestChunks: 1, BurndownChunks: 1, DistinctSubmissions: 1000,
		DistinctValues: 10, RSSReservations: 1, ParkedConsumers: 1, ParkedProducers: 1, FailureChunks: 1, FailureRounds: 1,
		AbuseDuration: time.Second, AbuseBigChunks: 1, AbuseMemoryBytes: 64 << 10, AbuseKeys: 33,
		FairnessWindow: time.Second, FairnessDuration: time.Second, FairnessRateDuration: time.Second, FairnessThrottle: time.Second,
		Workloads:   []string{workloadCitus},
		CitusConfig: CitusConfig{CitusChunks: 10, CitusBacklog: 1000, CitusRounds: 1}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for flag, bad := range map[string]CitusConfig{
		"--citus-chunks":  {CitusChunks: 0, CitusBacklog: 1000, CitusRounds: 1},
		"--citus-rounds":  {CitusChunks: 10, CitusBacklog: 1000, CitusRounds: 0},
		"--citus-backlog": {CitusChunks: 10, CitusBacklog: 120, CitusRounds: 1}, // not more than 100 samples + 20
	} {
		c := cfg
		c.CitusConfig = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: %v; want an error naming %s", bad, err, flag)
		}
	}
}

// The rounds alternate: one PostgreSQL first, then last, and every setup in every round.
func TestCitusOrder(t *testing.T) {
	for round, want := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}} {
		if got := citusOrder(round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v; want %v", round, got, want)
		}
	}
}
