// Command river burns down N no-op River jobs with one River client, so that
// `opsq bench --workload burndown --river` can set River's figures beside opsq's on the
// same PostgreSQL.
//
// It is a module of its own so that opsq's go.mod does not depend on River. The
// protocol with the caller, on the standard streams:
//
//  1. it migrates River's schema up, empties river_job and inserts -jobs jobs with
//     InsertManyFast (progress on stderr);
//  2. it prints the line "ready" on stdout and waits for one line on stdin, so that the
//     caller can start its own measurements (PostgreSQL CPU, WAL) at that point;
//  3. it starts one client with -workers workers on the default queue, waits until every
//     job is completed, prints one JSON line on stdout
//     {"jobs":N,"seconds":S,"jobs_per_second":R,"river_version":"vX"},
//     stops the client, checks in river_job that every job is completed and exits 0.
//
// Any error goes to stderr with a non-zero exit status, even after the result line: the
// caller trusts the line only if the exit status is 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	// workersDefault is the size of the client's default queue, as in River's own
	// riverbench.
	workersDefault = 2000
	// workersMax is River's own upper bound on a queue's MaxWorkers.
	workersMax = 10000
	// timeoutDefault bounds the burn-down itself, from the start line to the last job.
	timeoutDefault = 30 * time.Minute
)

// config is what the command line says.
type config struct {
	databaseURL string
	jobs        int
	workers     int
	timeout     time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process around it; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "river bench: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := benchmark(ctx, cfg, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "river bench: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.databaseURL, "database-url", "",
		"PostgreSQL URL (postgres://user:password@host:port/database) where River's tables are created")
	fs.IntVar(&cfg.jobs, "jobs", 0, "number of no-op jobs to insert and burn down")
	fs.IntVar(&cfg.workers, "workers", workersDefault, "MaxWorkers of the client's default queue")
	fs.DurationVar(&cfg.timeout, "timeout", timeoutDefault,
		"longest the burn-down may take, from the start line to the last completed job")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: river -database-url URL -jobs N [-workers %d]\n\n", workersDefault)
		fmt.Fprintln(stderr, "Inserts N no-op River jobs, prints \"ready\", waits for a line on stdin,")
		fmt.Fprintln(stderr, "burns the jobs down and prints one JSON line with the jobs per second.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	case cfg.databaseURL == "":
		return config{}, errors.New("-database-url is required: give the URL of the PostgreSQL database to benchmark River on")
	case cfg.jobs < 1:
		return config{}, fmt.Errorf("-jobs is %d: give the number of jobs to burn down, at least 1", cfg.jobs)
	case cfg.workers < 1 || cfg.workers > workersMax:
		return config{}, fmt.Errorf("-workers is %d: River allows 1 to %d workers on a queue", cfg.workers, workersMax)
	case cfg.timeout <= 0:
		return config{}, fmt.Errorf("-timeout is %s: give a positive duration such as 30m", cfg.timeout)
	}
	return cfg, nil
}
