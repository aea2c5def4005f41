package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMedianOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 2, 3}, 2.5},
		{"one", []float64{7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := medianOf(tc.in); got == nil || *got != tc.want {
				t.Errorf("medianOf(%v) = %v; want %g", tc.in, got, tc.want)
			}
		})
	}
	if got := medianOf(nil); got != nil {
		t.Errorf("medianOf(nil) = %g; want nil", *got)
	}
}

// An unavailable figure is printed as n/a with its reason, never as a number.
func TestUnavailableRow(t *testing.T) {
	t.Parallel()
	row := unavailable("burndown.statements_per_chunk", "statements per chunk", unitPerItem, "not loaded")
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got["value"]; !ok || v != nil {
		t.Errorf("JSON value = %v (present %t); want null: %s", v, ok, b)
	}
	rep := benchReport{Rows: []benchRow{row}}
	var out bytes.Buffer
	if err := rep.writeTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "n/a (not loaded)") {
		t.Errorf("table:\n%s\nwant n/a (not loaded)", out.String())
	}
}

// A comparison runs each side's rounds in alternation, with instances of each side's
// binary, and reports every figure's medians and their ratio.
func TestBenchSideBySideRuns(t *testing.T) {
	t.Parallel()
	bin := buildOpsq(t)
	out, err := runBench(t, 5*time.Minute, "--workload", "burndown", "--instances", "1", "--burndown-chunks", "2000",
		"--consumers", "8", "--against-binary", bin, "--rounds", "1")
	if err != nil {
		t.Fatalf("opsq bench --against-binary: %v\nstderr:\n%s", err, out.stderr.String())
	}
	var rep abReport
	if err := json.Unmarshal(out.stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, out.stdout.String())
	}
	if got, want := strings.Join(rep.Order, ","), "this,against"; got != want {
		t.Errorf("order %s; want %s", got, want)
	}
	rows := map[string]abRow{}
	for _, r := range rep.Rows {
		rows[r.Key] = r
	}
	rate := rows["burndown.rate"]
	if rate.ThisMedian == nil || rate.AgainstMedian == nil || rate.Ratio == nil || *rate.ThisMedian <= 0 {
		t.Errorf("burndown.rate: %+v; want both medians and a ratio", rate)
	}
	if cpu := rows["burndown.instance_cpu_per_chunk"]; cpu.ThisMedian == nil || *cpu.ThisMedian <= 0 {
		t.Errorf("burndown.instance_cpu_per_chunk: %+v; want a positive median", cpu)
	}
	if rt := rows["burndown.round_trips_per_chunk"]; rt.ThisMedian != nil || rt.Unavailable == "" {
		t.Errorf("burndown.round_trips_per_chunk: %+v; want unavailable, with why", rt)
	}
}
