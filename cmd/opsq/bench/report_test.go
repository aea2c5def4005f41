package bench

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"opsq/api/wire"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	oneToN := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values", nil, 50, 0},
		{"one value, p50", ms(7), 50, 7 * time.Millisecond},
		{"one value, p99", ms(7), 99, 7 * time.Millisecond},
		{"1..10 p50", oneToN(10), 50, 5 * time.Millisecond},
		{"1..10 p90", oneToN(10), 90, 9 * time.Millisecond},
		{"1..10 p99", oneToN(10), 99, 10 * time.Millisecond},
		{"1..10 max", oneToN(10), 100, 10 * time.Millisecond},
		{"1..2000 p99", oneToN(2000), 99, 1980 * time.Millisecond},
		{"1..2000 p50", oneToN(2000), 50, 1000 * time.Millisecond},
		{"two values p50", ms(1, 9), 50, 1 * time.Millisecond},
		{"two values p51", ms(1, 9), 51, 9 * time.Millisecond},
		{"tiny p", oneToN(10), 0.001, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v; want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	samples := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	orig := slices.Clone(samples)
	got := summarize(samples)
	want := latencyStats{N: 10, P50: 5, P90: 9, P99: 10, Max: 10}
	if got != want {
		t.Errorf("summarize = %+v; want %+v", got, want)
	}
	if !slices.Equal(samples, orig) {
		t.Errorf("summarize changed its input to %v; want it left as %v", samples, orig)
	}
}

func TestTargetMet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		op    string
		bound float64
		v     float64
		want  bool
	}{
		{"<=", 5, 5, true}, {"<=", 5, 5.01, false},
		{"<", 300, 299.9, true}, {"<", 300, 300, false},
		{">=", 200000, 200000, true}, {">=", 200000, 199999, false},
		{"==", 0, 0, true}, {"==", 0, 1, false},
		{"?", 0, 0, false},
	}
	for _, tt := range tests {
		if got := (benchTarget{Op: tt.op, Bound: tt.bound}).met(tt.v); got != tt.want {
			t.Errorf("%v %s %v: got %v; want %v", tt.v, tt.op, tt.bound, got, tt.want)
		}
	}
	for v, want := range map[float64]bool{20: true, 21: true, 19: true, 21.01: false, 18.99: false} {
		if got := (benchTarget{Op: "within", Bound: 20, Tolerance: 0.05}).met(v); got != want {
			t.Errorf("%v within 20 ± 5 %%: got %v; want %v", v, got, want)
		}
	}
}

func TestFormatValueAndTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v          float64
		unit       string
		wantValue  string
		t          benchTarget
		wantTarget string
	}{
		{3.214, unitSeconds, "3.21 s", benchTarget{Op: "<=", Bound: 5}, "≤ 5 s"},
		{0.8349, unitMillis, "0.83 ms", benchTarget{Op: "<=", Bound: 1}, "≤ 1 ms"},
		{123.4, unitMillis, "123 ms", benchTarget{Op: "<=", Bound: 5}, "≤ 5 ms"},
		{312512.7, unitRate, "313 000 chunks/s", benchTarget{Op: ">=", Bound: 200000}, "≥ 200 000 chunks/s"},
		{181.23, unitMB, "181.2 MB", benchTarget{Op: "<", Bound: 300}, "< 300 MB"},
		{1.234, unitRatio, "1.23×", benchTarget{Op: "<=", Bound: 2}, "≤ 2×"},
		{1234, unitCount, "1 234", benchTarget{Op: "==", Bound: 0}, "= 0"},
		{15234.5, unitJobRate, "15 200 jobs/s", benchTarget{Op: ">=", Bound: 0}, "≥ 0 jobs/s"},
		{41.26, unitMicros, "41.3 µs", benchTarget{Op: "<=", Bound: 25}, "≤ 25 µs"},
		{228.6, unitBytes, "229 bytes", benchTarget{Op: "<=", Bound: 200}, "≤ 200 bytes"},
		{7.04, unitPercent, "7.0 %", benchTarget{Op: "<=", Bound: 10}, "≤ 10 %"},
		{20.134, unitPerSecond, "20.13 /s", benchTarget{Op: "within", Bound: 20, Tolerance: 0.05}, "20 /s ± 5 %"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.v, tt.unit); got != tt.wantValue {
			t.Errorf("formatValue(%v, %q) = %q; want %q", tt.v, tt.unit, got, tt.wantValue)
		}
		if got := formatTarget(tt.t, tt.unit); got != tt.wantTarget {
			t.Errorf("formatTarget(%+v, %q) = %q; want %q", tt.t, tt.unit, got, tt.wantTarget)
		}
	}
}

// sampleReport is a report with a met target, a missed one and a row without target.
func sampleReport() benchReport {
	r := benchReport{Environment: benchInfo{PostgreSQL: "15.18", Server: "127.0.0.1:5499", Database: "opsq_bench_42",
		Instances: 2, CPUs: 2, LoadStart: "1.00 0.50 0.25", LoadEnd: "2.00 1.00 0.50"}}
	r.add(
		measured("ingest.seconds", "1 000 000 chunks", 3.2, unitSeconds).want("<=", 5),
		measured("latency.10000.reserve_p50", "p50", 1.5, unitMillis).want("<=", 1),
		measured("burndown.rate", "rate", 12345, unitRate).note("no target"),
	)
	return r
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	var b strings.Builder
	if err := r.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `opsq bench: PostgreSQL 15.18 at 127.0.0.1:5499 (scratch database opsq_bench_42), 2 opsq instances, 2 CPUs (nproc), load average 1.00 0.50 0.25 at the start, 2.00 1.00 0.50 at the end

WORKLOAD  MEASURE           VALUE            TARGET          NOTE
ingest    1 000 000 chunks  3.20 s           ≤ 5 s   met     
latency   p50               1.50 ms          ≤ 1 ms  MISSED  
burndown  rate              12 300 chunks/s                  no target

1 of 2 targets missed:
  latency p50: 1.50 ms, target ≤ 1 ms
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteTableBrokenAndStopped(t *testing.T) {
	t.Parallel()
	r := benchReport{Broken: []string{"burndown: 3 chunks handed out more than once"}, Error: "latency: reserving: boom"}
	r.add(measured("burndown.handed_out_twice", "chunks handed out twice", 3, unitCount).want("==", 0))
	var b strings.Builder
	if err := r.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BROKEN: burndown: 3 chunks handed out more than once\n", "stopped early: latency: reserving: boom\n",
		"1 of 1 targets missed:\n  burndown chunks handed out twice: 3, target = 0\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table:\n%s\nwant it to contain %q", b.String(), want)
		}
	}
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	var none benchReport
	none.add(measured("x.y", "y", 1, unitCount))
	met := benchReport{}
	met.add(measured("x.y", "y", 1, unitSeconds).want("<=", 5))
	for name, tt := range map[string]struct {
		r    benchReport
		want string
	}{
		"no targets": {none, "no targets measured"},
		"all met":    {met, "all targets met"},
		"one missed": {sampleReport(), "1 of 2 targets missed:\n  latency p50: 1.50 ms, target ≤ 1 ms"},
	} {
		if got := tt.r.verdict(); got != tt.want {
			t.Errorf("%s: verdict = %q; want %q", name, got, tt.want)
		}
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Results []struct {
			Key      string       `json:"key"`
			Workload string       `json:"workload"`
			Measure  string       `json:"measure"`
			Value    float64      `json:"value"`
			Target   *benchTarget `json:"target"`
			Met      *bool        `json:"met"`
		} `json:"results"`
		Missed []string `json:"missed"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 3 || got.Results[1].Key != "latency.10000.reserve_p50" || got.Results[1].Workload != "latency" || got.Results[0].Target == nil || got.Results[0].Met == nil || !*got.Results[0].Met ||
		got.Results[2].Target != nil || got.Results[2].Met != nil || len(got.Missed) != 1 {
		t.Errorf("JSON %s: want 3 results with their keys and workloads, the first with a met target, the last without target, one missed", b)
	}
}

func TestChunkLines(t *testing.T) {
	t.Parallel()
	var want strings.Builder
	for i := range 1000 {
		want.WriteString(`"operation ` + strconv.Itoa(i) + " of the opsq bench\"\n")
	}
	if err := iotest.TestReader(&chunkLines{n: 1000}, []byte(want.String())); err != nil {
		t.Error(err)
	}
	g := &chunkLines{n: 1000}
	got, err := io.ReadAll(iotest.OneByteReader(g))
	if err != nil || string(got) != want.String() {
		t.Errorf("read one byte at a time: %d bytes, %v; want %d bytes", len(got), err, want.Len())
	}
	if g.made.Load() != 1000 {
		t.Errorf("made = %d; want 1000", g.made.Load())
	}
	// Every line is one chunk of the NDJSON body: a JSON string of about 40 bytes.
	for line := range strings.Lines(want.String()) {
		var s string
		if err := json.Unmarshal([]byte(line), &s); err != nil || len(line) > 48 {
			t.Fatalf("line %q: %v; want a JSON string of about 40 bytes", line, err)
		}
	}
}

func TestScratchURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5499/postgres", "postgres://postgres@127.0.0.1:5499/opsq_bench_7"},
		{"postgresql://u:p%40ss@h/db?sslmode=disable&pool_max_conns=8", "postgresql://u:p%40ss@h/opsq_bench_7?sslmode=disable&pool_max_conns=8"},
		{"postgres://h", "postgres://h/opsq_bench_7"},
		{"host=h port=1 dbname=postgres", "host=h port=1 dbname=postgres dbname=opsq_bench_7"},
	}
	for _, tt := range tests {
		if got, err := scratchURL(tt.in, "opsq_bench_7"); err != nil || got != tt.want {
			t.Errorf("scratchURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestAllHoldShards(t *testing.T) {
	t.Parallel()
	insts := []*benchInstance{{id: "a"}, {id: "b"}}
	shards := func(state wire.ClaimState, n int) []wire.ClusterShard {
		out := make([]wire.ClusterShard, n)
		for i := range out {
			out[i] = wire.ClusterShard{Shard: i, State: state, Inflight: 2}
		}
		return out
	}
	tests := []struct {
		name string
		cl   wire.Cluster
		want bool
	}{
		{"both hold shards", wire.Cluster{Instances: []wire.ClusterInstance{{ID: "a", Shards: shards("active", 32)}, {ID: "b", Shards: shards("active", 32)}}}, true},
		{"one holds none", wire.Cluster{Instances: []wire.ClusterInstance{{ID: "a", Shards: shards("active", 64)}, {ID: "b"}}}, false},
		{"one missing", wire.Cluster{Instances: []wire.ClusterInstance{{ID: "a", Shards: shards("active", 64)}}}, false},
		{"draining", wire.Cluster{Instances: []wire.ClusterInstance{{ID: "a", Shards: shards("draining", 32)}, {ID: "b", Shards: shards("active", 32)}}}, false},
		{"unclaimed", wire.Cluster{Unclaimed: []int{3}, Instances: []wire.ClusterInstance{{ID: "a", Shards: shards("active", 31)}, {ID: "b", Shards: shards("active", 32)}}}, false},
	}
	for _, tt := range tests {
		if got := allHoldShards(tt.cl, insts); got != tt.want {
			t.Errorf("%s: allHoldShards = %v; want %v", tt.name, got, tt.want)
		}
	}
	if n, inflight := shardsHeld(tests[0].cl, "b"); n != 32 || inflight != 64 {
		t.Errorf("shardsHeld = %d, %d; want 32 shards, 64 in flight", n, inflight)
	}
}
