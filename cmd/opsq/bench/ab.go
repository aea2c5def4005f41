package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Side by side (--against, --against-binary): the workloads run for two opsq binaries in
// alternating rounds (this, against, this, against, …) on the same PostgreSQL, each round
// on a fresh scratch database with instances of that round's binary; the driver (clients,
// River's burn-down, the report) is always this binary. The report gives, for each figure,
// the median of each side over its rounds and their ratio, this over against. Alternating
// spreads a drift of the machine (another engineer's build, autovacuum) over both sides
// rather than onto one.

// Sides of a comparison.
const (
	sideThis    = "this"
	sideAgainst = "against"
)

// abRow is one figure of both sides: every round's value and the medians.
type abRow struct {
	Key      string    `json:"key"`
	Workload string    `json:"workload"`
	Measure  string    `json:"measure"`
	Unit     string    `json:"unit"`
	This     []float64 `json:"this"`    // one value a round, in order
	Against  []float64 `json:"against"` // one value a round, in order
	// ThisMedian and AgainstMedian are nil, and Unavailable says why, when a side measured
	// it in no round.
	ThisMedian    *float64 `json:"this_median"`
	AgainstMedian *float64 `json:"against_median"`
	Ratio         *float64 `json:"ratio"` // this median over against median; nil when either is nil or against is 0
	Unavailable   string   `json:"unavailable,omitempty"`
	Note          string   `json:"note,omitempty"` // the last round's note of this side
}

// abReport is what a comparison found; --json prints it as is.
type abReport struct {
	Environment benchInfo `json:"environment"` // the first round's
	This        string    `json:"this"`        // which binary, for a person
	Against     string    `json:"against"`
	Rounds      int       `json:"rounds"` // of each side
	Order       []string  `json:"order"`  // the sides in the order they ran
	Rows        []abRow   `json:"results"`
	Broken      []string  `json:"broken"`
	Error       string    `json:"error,omitempty"`
}

// runAB runs the comparison cfg asks for and writes its report.
func runAB(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	against, describeAgainst := cfg.AgainstBinary, "binary "+cfg.AgainstBinary
	if cfg.Against != "" {
		dir, err := os.MkdirTemp("", "opsq-bench-against-")
		if err != nil {
			return fmt.Errorf("making a scratch folder for --against %s: %w", cfg.Against, err)
		}
		defer os.RemoveAll(dir)
		if against, err = buildRevision(ctx, cfg.Against, dir, stderr); err != nil {
			return err
		}
		describeAgainst = "revision " + cfg.Against
	} else if _, err := os.Stat(against); err != nil {
		return fmt.Errorf("--against-binary: %w: give the path of an opsq executable", err)
	}
	describeThis := "this binary"
	if cfg.Binary != "" {
		describeThis = "binary " + cfg.Binary
	}
	rounds := cfg.Rounds
	rep := abReport{This: describeThis, Against: describeAgainst, Rounds: rounds, Broken: []string{}, Rows: []abRow{}}
	values := map[string]map[string][]float64{sideThis: {}, sideAgainst: {}}
	var keys []string
	rows := map[string]benchRow{} // the last row of each key, for its measure, unit and note
	var runErr error
	for i := range 2 * rounds {
		side, bin := sideThis, cfg.Binary
		if i%2 == 1 {
			side, bin = sideAgainst, against
		}
		fmt.Fprintf(stderr, "opsq bench: round %d of %d: %s (%s)\n", i/2+1, rounds, side, map[string]string{sideThis: describeThis, sideAgainst: describeAgainst}[side])
		one := cfg
		one.Against, one.AgainstBinary, one.Binary = "", "", bin
		report, err := runOnce(ctx, one, stderr)
		if report != nil {
			if i == 0 {
				rep.Environment = report.Environment
			}
			for _, b := range report.Broken {
				rep.Broken = append(rep.Broken, fmt.Sprintf("round %d, %s: %s", i/2+1, side, b))
			}
			for _, row := range report.Rows {
				if _, seen := rows[row.Key]; !seen {
					keys = append(keys, row.Key)
				}
				if _, seen := rows[row.Key]; !seen || side == sideThis {
					rows[row.Key] = row
				}
				if row.Unavailable == "" {
					values[side][row.Key] = append(values[side][row.Key], row.Value)
				}
			}
		}
		rep.Order = append(rep.Order, side)
		if err != nil {
			runErr = fmt.Errorf("round %d of %d, %s side: %w", i/2+1, rounds, side, err)
			rep.Error = runErr.Error()
			break
		}
	}
	for _, k := range keys {
		row := rows[k]
		ar := abRow{Key: k, Workload: row.Workload, Measure: row.Measure, Unit: row.Unit, Note: row.Note,
			This: values[sideThis][k], Against: values[sideAgainst][k]}
		ar.ThisMedian, ar.AgainstMedian = medianOf(ar.This), medianOf(ar.Against)
		switch {
		case ar.ThisMedian != nil && ar.AgainstMedian != nil && *ar.AgainstMedian != 0:
			r := *ar.ThisMedian / *ar.AgainstMedian
			ar.Ratio = &r
		case ar.ThisMedian == nil || ar.AgainstMedian == nil:
			ar.Unavailable = cmpOr(row.Unavailable, "not measured in every round")
		}
		rep.Rows = append(rep.Rows, ar)
	}
	var err error
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.writeTable(stdout)
	}
	switch {
	case runErr != nil:
		return runErr
	case len(rep.Broken) > 0:
		return fmt.Errorf("something broke: %s", strings.Join(rep.Broken, "; "))
	}
	return err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// medianOf returns the median of values, or nil for none.
func medianOf(values []float64) *float64 {
	if len(values) == 0 {
		return nil
	}
	m := median(values)
	return &m
}

// writeTable writes the comparison for a person.
func (r *abReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "opsq bench, side by side: %s\n", r.Environment.describe())
	fmt.Fprintf(w, "this: %s; against: %s; %d rounds each, in the order %s; medians over the rounds\n\n",
		r.This, r.Against, r.Rounds, strings.Join(r.Order, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tMEASURE\tTHIS\tAGAINST\tTHIS/AGAINST\tROUNDS (this | against)")
	for _, row := range r.Rows {
		this, against, ratio := "n/a", "n/a", "n/a"
		if row.ThisMedian != nil {
			this = formatValue(*row.ThisMedian, row.Unit)
		}
		if row.AgainstMedian != nil {
			against = formatValue(*row.AgainstMedian, row.Unit)
		}
		if row.Ratio != nil {
			ratio = fmt.Sprintf("%.3f×", *row.Ratio)
		} else if row.Unavailable != "" {
			ratio = "n/a (" + row.Unavailable + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s | %s\n", row.Workload, row.Measure, this, against, ratio,
			formatRounds(row.This, row.Unit), formatRounds(row.Against, row.Unit))
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
	_, err := fmt.Fprintln(w, "targets are not judged side by side: run without --against for them")
	return err
}

// formatRounds writes each round's value, short: "41 000, 40 200, 39 800".
func formatRounds(values []float64, unit string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = strings.TrimSuffix(strings.TrimSuffix(formatValue(v, unit), " "+unit), unit)
	}
	return strings.Join(parts, ", ")
}

// buildRevision builds cmd/opsq of git revision rev of the repository the working
// directory is in, into dir, and returns the executable's path. It shows its steps on
// stderr.
func buildRevision(ctx context.Context, rev, dir string, stderr io.Writer) (string, error) {
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("--against %s: finding the repository (run opsq bench from within a clone of opsq, with git on the PATH): %w", rev, gitErr(err))
	}
	root := strings.TrimSpace(string(top))
	commit, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--verify", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("--against %s: not a revision of %s (git fetch it, or check its spelling): %w", rev, root, gitErr(err))
	}
	fmt.Fprintf(stderr, "opsq bench: extracting %s (%s) into %s\n", rev, strings.TrimSpace(string(commit))[:12], dir)
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", strings.TrimSpace(string(commit)))
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var archiveErr, untarErr strings.Builder
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		return "", fmt.Errorf("--against %s: starting tar: %w", rev, err)
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return "", fmt.Errorf("--against %s: git archive: %w: %s", rev, err, strings.TrimSpace(archiveErr.String()))
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("--against %s: extracting the archive into %s: %w: %s", rev, src, err, strings.TrimSpace(untarErr.String()))
	}
	exe := filepath.Join(dir, "opsq")
	fmt.Fprintf(stderr, "opsq bench: building %s: go build -o %s ./cmd/opsq (a minute or two)\n", rev, exe)
	started := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", exe, "./cmd/opsq")
	build.Dir = src
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("--against %s: building it failed (its output is above; does that revision build with this Go, %s?): %w", rev, goVersion(), err)
	}
	fmt.Fprintf(stderr, "opsq bench: built %s in %s\n", rev, time.Since(started).Round(100*time.Millisecond))
	return exe, nil
}

// gitErr adds git's own message to err.
func gitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

// goVersion returns `go version`, or "unknown".
func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
