package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
