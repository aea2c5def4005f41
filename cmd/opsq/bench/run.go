// Package bench is "opsq bench": it measures opsq end to end, as a user would run it: real
// "opsq serve" processes on a scratch database, consumers over HTTP on loopback. It prints
// each measurement beside its target in DESIGN.md §6. Speed never makes it fail: only
// something broken does (a chunk lost or handed out twice, an error). The command's flags
// live in cmd/opsq, which builds a Config and calls Run.
//
// It writes to opsq's tables only through the engine (queuer's bulk insert and cancel;
// apikeys.Create for the keys its requests carry, keys.go, and apikeys.CreateSpec for the
// tenants workload's key limited to one tenant, tenants.go); its own SQL only reads, or
// measures the server.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"opsq/cmd/opsq/progress"
)

// Run runs the benchmark cfg asks for, writes its report to stdout (a table, or JSON) and
// its progress to stderr. It returns an error when the bench stopped early or something
// broke; missed targets are not errors.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Against != "" || cfg.AgainstBinary != "" {
		return runAB(ctx, cfg, stdout, stderr)
	}
	report, runErr := runOnce(ctx, cfg, stderr)
	if report == nil {
		return runErr
	}
	var err error
	if cfg.JSON {
		err = report.writeJSON(stdout)
	} else {
		err = report.writeTable(stdout)
	}
	switch {
	case runErr != nil:
		return runErr
	case len(report.Broken) > 0:
		return fmt.Errorf("something broke: %s", strings.Join(report.Broken, "; "))
	}
	return err
}

// runOnce runs the workloads once, on a scratch database of its own, and returns what it
// found; the report is nil when the bench could not start.
func runOnce(ctx context.Context, cfg Config, stderr io.Writer) (*benchReport, error) {
	started := time.Now()
	loadStart := loadAverage()
	env, err := startBenchEnv(ctx, cfg, stderr)
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	r := &benchRun{cfg: cfg, env: env, line: progress.NewLine(stderr),
		report: benchReport{Rows: []benchRow{}, Missed: []string{}, Broken: []string{}}} // [] in JSON, not null
	r.report.Environment = env.info(cfg)
	r.report.Environment.Started, r.report.Environment.LoadStart = started, loadStart
	fmt.Fprintf(stderr, "opsq bench: %s\n", r.report.Environment.describe())

	runErr := r.runWorkloads(ctx)
	if runErr != nil {
		runErr = interrupted(ctx, errors.Join(runErr, env.exited()))
		r.report.Error = runErr.Error()
	}
	failed := runErr != nil || len(r.report.Broken) > 0
	env.close(failed)
	r.report.Environment.LoadEnd = loadAverage()
	r.report.Environment.Seconds = time.Since(started).Seconds()
	return &r.report, runErr
}

// interrupted says "interrupted" for an error that Ctrl-C caused.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	return err
}

// benchRun is one run of the bench: its configuration, where it runs, and what it found
// so far. Its workloads run one after the other; it is not safe for concurrent use.
type benchRun struct {
	cfg    Config
	env    *benchEnv
	line   *progress.Line // progress on stderr
	report benchReport
}

// runWorkloads runs the configured workloads in order, stopping at the first error.
func (r *benchRun) runWorkloads(ctx context.Context) error {
	run := map[string]func(context.Context) error{
		workloadIngest:   r.ingest,
		workloadBurndown: r.burndown,
		workloadLatency:  r.latency,
		workloadDistinct: r.distinct,
		workloadRSS:      r.rss,
		workloadAbuse:    r.abuse,
		workloadParked:   r.parked,
		workloadFailures: r.failures,
		workloadTenants:  r.tenants,
		workloadFairness: r.fairness,
		workloadCitus:    r.citus,
	}
	run[workloadSchedules], run[workloadDependencies] = r.schedules, r.dependencies
	for _, w := range r.cfg.Workloads {
		if err := run[w](ctx); err != nil {
			r.line.Clear()
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// say writes a line of progress that stays, such as a workload's summary.
func (r *benchRun) say(format string, args ...any) {
	r.line.Note(format, args...)
}

// broke records something that must never happen, such as a chunk handed out twice: the
// bench goes on, and fails at the end.
func (r *benchRun) broke(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.report.Broken = append(r.report.Broken, msg)
	r.say("BROKEN: %s", msg)
}

// showProgress shows describe() on the live line, as often as the line wants, until stop
// is called; stop clears the line, and may be called more than once.
func (r *benchRun) showProgress(describe func() string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.line.Every())
		defer t.Stop()
		for {
			select {
			case <-quit:
				r.line.Clear()
				return
			case <-t.C:
				r.line.Show(describe())
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		<-done
	})
}
