package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"opsq/cmd/opsq/progress"
)

// This file holds the pure parts of "opsq bench": what a measurement is, its target,
// percentiles, and how the results are written.

// target is a number of DESIGN.md §6 that a measurement must reach: value Op Bound.
type benchTarget struct {
	Op    string  `json:"op"` // "<=", "<", ">=", "==" or "within"
	Bound float64 `json:"bound"`
	// Tolerance is, for "within", how far from Bound the value may be, a share of Bound.
	Tolerance float64 `json:"tolerance,omitempty"`
}

// met reports whether v reaches the target.
func (t benchTarget) met(v float64) bool {
	switch t.Op {
	case "<=":
		return v <= t.Bound
	case "<":
		return v < t.Bound
	case ">=":
		return v >= t.Bound
	case "==":
		return v == t.Bound
	case "within":
		return math.Abs(v-t.Bound) <= t.Tolerance*math.Abs(t.Bound)
	}
	return false
}

// Units of benchRow.Unit; a count has no unit.
const (
	unitSeconds   = "s"
	unitMillis    = "ms"
	unitRate      = "chunks/s"
	unitJobRate   = "jobs/s" // River's
	unitMicros    = "µs"
	unitBytes     = "bytes"
	unitMB        = "MB"
	unitRatio     = "×"
	unitPercent   = "%"
	unitPerSecond = "/s" // a rate that needs its decimals, such as rate_limit's
	unitCount     = ""
	unitPerItem   = "per chunk" // a count per chunk, with its decimals
)

// benchRow is one measured value, with the target DESIGN.md §6 sets for it, if any.
type benchRow struct {
	// Key names the measurement for machines, the same from run to run:
	// "<workload>.<name>", such as "latency.10000.reserve_p50".
	Key      string       `json:"key"`
	Workload string       `json:"workload"`
	Measure  string       `json:"measure"`
	Value    float64      `json:"value"`
	Unit     string       `json:"unit"`
	Target   *benchTarget `json:"target,omitempty"`
	Met      *bool        `json:"met,omitempty"`
	Note     string       `json:"note,omitempty"`
	// Unavailable says why the value could not be measured (a counter the server does not
	// keep); the value is then not a figure: the table prints "n/a (why)", JSON null.
	Unavailable string `json:"unavailable,omitempty"`
}

// MarshalJSON writes the row, its value null when it is unavailable.
func (r benchRow) MarshalJSON() ([]byte, error) {
	type plain benchRow
	if r.Unavailable == "" {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		Value *float64 `json:"value"`
	}{plain: plain(r)})
}

// unavailable returns a row whose value could not be measured, and why.
func unavailable(key, measure, unit, why string) benchRow {
	row := measured(key, measure, 0, unit)
	row.Unavailable = why
	return row
}

// measured returns a row without a target. key is "<workload>.<name>"; measure says what
// was measured, for a person.
func measured(key, measure string, value float64, unit string) benchRow {
	workload, _, _ := strings.Cut(key, ".")
	return benchRow{Key: key, Workload: workload, Measure: measure, Value: value, Unit: unit}
}

// want sets the row's target and whether it was met.
func (r benchRow) want(op string, bound float64) benchRow {
	t := benchTarget{Op: op, Bound: bound}
	met := t.met(r.Value)
	r.Target, r.Met = &t, &met
	return r
}

// wantWithin sets the row's target: bound ± tolerance × bound.
func (r benchRow) wantWithin(bound, tolerance float64) benchRow {
	t := benchTarget{Op: "within", Bound: bound, Tolerance: tolerance}
	met := t.met(r.Value)
	r.Target, r.Met = &t, &met
	return r
}

// note sets the row's note.
func (r benchRow) note(format string, args ...any) benchRow {
	r.Note = fmt.Sprintf(format, args...)
	return r
}

// benchInfo says where a bench ran.
type benchInfo struct {
	PostgreSQL string    `json:"postgresql"` // server_version
	Server     string    `json:"server"`     // host:port
	Database   string    `json:"database"`   // the scratch database
	Instances  int       `json:"instances"`
	CPUs       int       `json:"cpus"`
	Auth       string    `json:"auth"`               // the instances' OPSQ_AUTH
	LoadStart  string    `json:"load_average_start"` // the 1, 5 and 15 minute load averages
	LoadEnd    string    `json:"load_average_end"`
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"seconds"`
}

// describe is the one line that says where the bench runs.
func (i benchInfo) describe() string {
	s := fmt.Sprintf("PostgreSQL %s at %s (scratch database %s), %d opsq instance%s, %d CPUs (nproc)",
		i.PostgreSQL, i.Server, i.Database, i.Instances, pluralS(i.Instances), i.CPUs)
	switch i.Auth {
	case AuthRequired:
		s += ", API keys required"
	case AuthOff:
		s += ", API keys off (--auth off)"
	}
	if i.LoadStart != "" {
		s += ", load average " + i.LoadStart
		if i.LoadEnd != "" {
			s += " at the start, " + i.LoadEnd + " at the end"
		}
	}
	return s
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// benchReport is everything a bench found; --json prints it as is.
type benchReport struct {
	Environment benchInfo  `json:"environment"`
	Rows        []benchRow `json:"results"`
	// Missed names the targets that were not met; the bench still succeeds.
	Missed []string `json:"missed"`
	// Broken lists what went wrong beyond speed: chunks lost or handed out twice, wrong
	// final states. The bench fails when it is not empty.
	Broken []string `json:"broken"`
	// Error is the error that stopped the bench early, if one did.
	Error string `json:"error,omitempty"`
}

// add appends rows and notes the targets they missed.
func (r *benchReport) add(rows ...benchRow) {
	for _, row := range rows {
		r.Rows = append(r.Rows, row)
		if row.Met != nil && !*row.Met {
			r.Missed = append(r.Missed, fmt.Sprintf("%s %s: %s, target %s",
				row.Workload, row.Measure, formatValue(row.Value, row.Unit), formatTarget(*row.Target, row.Unit)))
		}
	}
}

// verdict is the last line of the table: "all targets met", or which were missed.
func (r *benchReport) verdict() string {
	targets := 0
	for _, row := range r.Rows {
		if row.Target != nil {
			targets++
		}
	}
	switch {
	case targets == 0:
		return "no targets measured"
	case len(r.Missed) == 0:
		return "all targets met"
	}
	return fmt.Sprintf("%d of %d targets missed:\n  %s", len(r.Missed), targets, strings.Join(r.Missed, "\n  "))
}

// writeTable writes the report for a person: where it ran, a table of the measurements
// beside their targets, and the verdict.
func (r *benchReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "opsq bench: %s\n\n", r.Environment.describe())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tMEASURE\tVALUE\tTARGET\t\tNOTE")
	for _, row := range r.Rows {
		tgt, verdict := "", ""
		if row.Target != nil {
			tgt = formatTarget(*row.Target, row.Unit)
			verdict = "met"
			if !*row.Met {
				verdict = "MISSED"
			}
		}
		value := formatValue(row.Value, row.Unit)
		if row.Unavailable != "" {
			value = "n/a (" + row.Unavailable + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Workload, row.Measure, value, tgt, verdict, row.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, b := range r.Broken {
		fmt.Fprintf(w, "BROKEN: %s\n", b)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "stopped early: %s\n", r.Error)
	}
	_, err := fmt.Fprintln(w, r.verdict())
	return err
}

// writeJSON writes the report as indented JSON, for machines (--json).
func (r *benchReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// formatValue writes a measurement with its unit: "3.21 s", "0.84 ms", "312 000 chunks/s".
func formatValue(v float64, unit string) string {
	switch unit {
	case unitSeconds:
		return fmt.Sprintf("%.2f s", v)
	case unitMillis:
		if v >= 100 {
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.2f ms", v)
	case unitRate:
		return progress.GroupDigits(progress.RoundSignificant(v, 3)) + " chunks/s"
	case unitJobRate:
		return progress.GroupDigits(progress.RoundSignificant(v, 3)) + " jobs/s"
	case unitMicros:
		return fmt.Sprintf("%.1f µs", v)
	case unitBytes:
		return fmt.Sprintf("%.0f bytes", v)
	case unitMB:
		return fmt.Sprintf("%.1f MB", v)
	case unitRatio:
		return fmt.Sprintf("%.2f×", v)
	case unitPercent:
		return fmt.Sprintf("%.1f %%", v)
	case unitPerSecond:
		return fmt.Sprintf("%.2f /s", v)
	case unitCount:
		return progress.GroupDigits(int64(math.Round(v)))
	case unitPerItem:
		return fmt.Sprintf("%.3f per chunk", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// formatTarget writes a target: "≤ 5 s", "< 300 MB", "= 0".
func formatTarget(t benchTarget, unit string) string {
	if t.Op == "within" {
		return formatTarget(benchTarget{Op: "==", Bound: t.Bound}, unit)[len("= "):] + fmt.Sprintf(" ± %g %%", t.Tolerance*100)
	}
	op := map[string]string{"<=": "≤", "<": "<", ">=": "≥", "==": "="}[t.Op]
	var bound string
	switch unit {
	case unitRate:
		bound = progress.GroupDigits(int64(math.Round(t.Bound))) + " chunks/s"
	case unitRatio:
		bound = fmt.Sprintf("%g×", t.Bound)
	case unitCount:
		bound = progress.GroupDigits(int64(math.Round(t.Bound)))
	default:
		bound = fmt.Sprintf("%g %s", t.Bound, unit)
	}
	return op + " " + bound
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted values by the
// nearest-rank method: the smallest value that at least p% of the values do not exceed.
// It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencyStats summarizes round trips.
type latencyStats struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// summarize returns the percentiles of samples, which it leaves unchanged.
func summarize(samples []time.Duration) latencyStats {
	s := slices.Clone(samples)
	slices.Sort(s)
	return latencyStats{N: len(s), P50: percentile(s, 50), P90: percentile(s, 90), P99: percentile(s, 99), Max: percentile(s, 100)}
}

// inMillis returns d in milliseconds.
func inMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// durationRatio returns a/b, or 0 when b is 0.
func durationRatio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
