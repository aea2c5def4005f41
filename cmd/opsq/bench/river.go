package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
)

// River beside opsq (--river): River's own burn-down, a Go module of its own in
// cmd/opsq/bench/river (so that opsq's go.mod does not depend on River), built from source
// and run on the same PostgreSQL just before opsq's burn-down, with as many jobs as opsq
// has chunks. Its contract:
//
//	go build -o <bin> .   (in the module's directory)
//	<bin> -database-url URL -jobs N -workers 2000
//
// migrates River's schema into URL's database, inserts N no-op jobs (InsertManyFast),
// prints "ready" on stdout and waits for a line on stdin; then burns the jobs down with one
// client of 2 000 workers, prints {"jobs":N,"seconds":S,"jobs_per_second":R} on stdout
// and exits 0. Its progress and errors go to stderr. The bench samples PostgreSQL's CPU
// and WAL around the burn-down alone: from "ready" to the JSON line.

// riverWorkers is the number of workers of River's client (issue 10: River's own bench).
const riverWorkers = 2000

// How long the bench waits for River.
const (
	riverBuildTimeout = 10 * time.Minute // go build, with the module downloads of a first build
	riverReadyTimeout = 10 * time.Minute // migrate and insert the jobs
	riverRunTimeout   = 30 * time.Minute // burn them down
	riverExitTimeout  = 30 * time.Second // after its JSON line
)

// riverModuleDir is the River module's directory, relative to an opsq source tree.
const riverModuleDir = "cmd/opsq/bench/river"

// riverResult is what River's burn-down measured, and what PostgreSQL spent on it.
type riverResult struct {
	Jobs          int64   `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	Version       string  `json:"river_version"`
	spent         pgSpent
	cpuMeasured   bool
}

// river builds River's burn-down, runs it on a scratch database of its own with n jobs,
// and returns what it measured.
func (r *benchRun) river(ctx context.Context, n int64) (riverResult, error) {
	dir, err := findRiverDir(r.cfg.RiverDir)
	if err != nil {
		return riverResult{}, err
	}
	bin, err := r.buildRiver(ctx, dir)
	if err != nil {
		return riverResult{}, err
	}
	db := r.env.dbName + "_river"
	if err := r.env.createScratch(ctx, db); err != nil {
		return riverResult{}, err
	}
	defer func() {
		if err := r.env.dropScratch(db); err != nil {
			fmt.Fprintf(r.env.stderr, "dropping River's scratch database %s: %v; drop it yourself: DROP DATABASE %s WITH (FORCE)\n", db, err, db)
		}
	}()
	url, err := scratchURL(r.env.adminURL, db)
	if err != nil {
		return riverResult{}, err
	}
	res, err := r.runRiver(ctx, bin, url, n)
	if err != nil {
		return res, err
	}
	cpu, wal := res.spent.perItem(res.Jobs)
	r.say("burndown: River burned down %s jobs in %s (%s jobs/s); PostgreSQL %s, %.0f bytes of WAL per job",
		progress.GroupDigits(res.Jobs), progress.Duration(time.Duration(res.Seconds*float64(time.Second))),
		progress.GroupDigits(progress.RoundSignificant(res.JobsPerSecond, 3)), r.describeCPU(cpu, "job"), wal)
	return res, nil
}

// findRiverDir returns the River module's directory: dir if given, else the one of the
// source tree this binary was built from, else ./cmd/opsq/bench/river.
func findRiverDir(dir string) (string, error) {
	var tried []string
	candidates := []string{dir}
	if dir == "" {
		candidates = nil
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			candidates = append(candidates, filepath.Join(filepath.Dir(file), "river"))
		}
		candidates = append(candidates, riverModuleDir)
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		tried = append(tried, d)
	}
	return "", fmt.Errorf("no River module (a go.mod) in %s: --river builds River's burn-down from opsq's source tree; "+
		"run opsq bench from the root of an opsq clone, or give --river-dir the directory %s of one", strings.Join(tried, " nor in "), riverModuleDir)
}

// buildRiver builds the River module in dir into the instances' log directory.
func (r *benchRun) buildRiver(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("--river builds River's burn-down from source and needs the go command (Go 1.26 or newer) on the PATH: " +
			"install it from https://go.dev/dl/, or run without --river")
	}
	r.line.Show("burndown: building River's burn-down in " + dir)
	ctx, cancel := context.WithTimeout(ctx, riverBuildTimeout)
	defer cancel()
	bin := filepath.Join(r.env.logDir, "river-bench")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	r.line.Clear()
	if err != nil {
		return "", fmt.Errorf("building River's burn-down (go build in %s): %w\n%s", dir, err, out)
	}
	return bin, nil
}

// runRiver runs River's burn-down bin on the database at url with n jobs, and samples
// PostgreSQL around its burn-down.
func (r *benchRun) runRiver(ctx context.Context, bin, url string, n int64) (riverResult, error) {
	logPath := filepath.Join(r.env.logDir, "river.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return riverResult{}, err
	}
	defer logFile.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-database-url", url, "-jobs", strconv.FormatInt(n, 10), "-workers", strconv.Itoa(riverWorkers))
	cmd.SysProcAttr = childProcAttr() // its own process group: Ctrl-C is ours to handle
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return riverResult{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return riverResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return riverResult{}, fmt.Errorf("starting River's burn-down: %w", err)
	}
	lines := make(chan string)
	go func() { // ends with River's stdout, or with this function (cancel)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	failed := func(err error) (riverResult, error) {
		cancel()
		_ = cmd.Wait()
		return riverResult{}, fmt.Errorf("%w; its log:\n%s", err, clustertest.Tail(logPath, 20))
	}
	start := time.Now()
	stop := r.showProgress(func() string {
		return fmt.Sprintf("burndown: River migrating and inserting %s jobs, %s", progress.GroupDigits(n), progress.Duration(time.Since(start)))
	})
	line, err := nextLine(ctx, lines, riverReadyTimeout)
	stop()
	if err != nil {
		return failed(fmt.Errorf("waiting for River's burn-down to be ready: %w", err))
	}
	if line != "ready" {
		return failed(fmt.Errorf("River's burn-down said %q; want ready", line))
	}
	before, err := r.env.cost.sample(ctx)
	if err != nil {
		return failed(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return failed(fmt.Errorf("starting River's burn-down: %w", err))
	}
	start = time.Now()
	stop = r.showProgress(func() string {
		return fmt.Sprintf("burndown: River burning down %s jobs, %s", progress.GroupDigits(n), progress.Duration(time.Since(start)))
	})
	line, err = nextLine(ctx, lines, riverRunTimeout)
	stop()
	if err != nil {
		return failed(fmt.Errorf("waiting for River's burn-down: %w", err))
	}
	res := riverResult{cpuMeasured: r.env.cost.cpuMeasured()}
	if res.spent, err = r.env.cost.since(ctx, before); err != nil {
		return failed(err)
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.Jobs != n || res.JobsPerSecond <= 0 {
		return failed(fmt.Errorf("River's burn-down said %q; want {\"jobs\":%d,\"seconds\":…,\"jobs_per_second\":…} (%v)", line, n, err))
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return res, fmt.Errorf("River's burn-down: %w; its log:\n%s", err, clustertest.Tail(logPath, 20))
		}
	case <-time.After(riverExitTimeout):
		cancel()
		<-done
		return res, fmt.Errorf("River's burn-down did not exit %s after its result; its log: %s", riverExitTimeout, logPath)
	}
	return res, nil
}

// nextLine returns the next line of lines, within timeout.
func nextLine(ctx context.Context, lines <-chan string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-lines:
		if !ok {
			return "", errors.New("it exited")
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("nothing after %s", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// rows are River's figures, and opsq's over River's (opsq burned n chunks down at rate
// chunks/s, its PostgreSQL spending spent), with the targets of DESIGN.md §6.
func (res riverResult) rows(rate float64, n int64, spent pgSpent) []benchRow {
	cpu, wal := res.spent.perItem(res.Jobs)
	opsqCPU, opsqWAL := spent.perItem(n)
	rows := []benchRow{
		measured("burndown.river.rate", fmt.Sprintf("River: %s jobs, %s workers", progress.GroupDigits(res.Jobs), progress.GroupDigits(riverWorkers)),
			res.JobsPerSecond, unitJobRate).note("River %s, its own burn-down, on the same PostgreSQL just before opsq's", cmp.Or(res.Version, "(version not given)")),
	}
	cpuRow := measured("burndown.river.pg_cpu_per_job", "River: PostgreSQL CPU per job", cpu, unitMicros).
		note("%s of CPU of the server's processes (/proc)", progress.Duration(res.spent.cpu))
	if !res.cpuMeasured {
		cpuRow = measured("burndown.river.pg_cpu_per_job", "River: PostgreSQL CPU per job", 0, unitMicros).note("not measured")
	}
	rows = append(rows, cpuRow,
		measured("burndown.river.wal_per_job", "River: WAL bytes per job", wal, unitBytes).note("%s of WAL", progress.Bytes(res.spent.wal)),
		measured("burndown.river_rate_ratio", "opsq chunks/s over River's jobs/s", rate/res.JobsPerSecond, unitRatio).
			note("the target, ≥ 1×, is the rate's above; the aim is %g×", burndownAim),
	)
	if res.cpuMeasured && cpu > 0 {
		rows = append(rows, measured("burndown.river_cpu_ratio", "opsq's PostgreSQL CPU per chunk over River's per job", opsqCPU/cpu, unitRatio).
			want("<=", riverCPUTarget))
	}
	if wal > 0 {
		rows = append(rows, measured("burndown.river_wal_ratio", "opsq's WAL per chunk over River's per job", opsqWAL/wal, unitRatio).
			want("<=", riverWALTarget))
	}
	return rows
}
