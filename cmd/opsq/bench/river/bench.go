package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const (
	// insertBatchSize is the number of jobs per InsertManyFast call (one COPY each), the
	// batch riverbench inserts with.
	insertBatchSize = 5000

	// The client's fetch timings are riverbench's, not River's defaults (100 ms cooldown,
	// 1 s poll): riverbench, River's own burn-down, sets them so because they give River
	// its best throughput, and a comparison with opsq is only fair against River tuned
	// the way its authors benchmark it. FetchCooldown is the shortest time between two
	// fetches of a producer, so it bounds how often the 2 000 workers are refilled;
	// FetchPollInterval is the fallback fetch when no LISTEN/NOTIFY wakes the producer.
	fetchCooldown     = 2 * time.Millisecond
	fetchPollInterval = 20 * time.Millisecond

	// eventBufferMax bounds the completion subscription's buffer. River drops an event
	// when the buffer is full; the counting goroutine drains it at once, and the
	// completer hands out at most a few thousand events per flush, so this is far more
	// than needed. A dropped event would still not hang the run: see checkRemaining.
	eventBufferMax = 1_000_000

	// quietCheckAfter is how long without a completion event before the database is asked
	// how many jobs are left, in case River dropped events.
	quietCheckAfter = 3 * time.Second

	// stopTimeout bounds the client's clean stop after the burn-down.
	stopTimeout = 30 * time.Second
)

// result is the JSON line printed at the end; the caller parses it.
type result struct {
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	RiverVersion  string  `json:"river_version"`
}

// benchArgs are the arguments of one job: a number, as riverbench's jobs carry.
type benchArgs struct {
	Num int `json:"num"`
}

func (benchArgs) Kind() string { return "opsq_bench_noop" }

// noopWorker completes every job at once.
type noopWorker struct {
	river.WorkerDefaults[benchArgs]
}

func (noopWorker) Work(context.Context, *river.Job[benchArgs]) error { return nil }

// benchmark runs the whole protocol described in the package comment.
func benchmark(ctx context.Context, cfg config, stdin io.Reader, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	pool, err := openPool(ctx, cfg.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)

	if err := migrate(ctx, driver, logger, stderr); err != nil {
		return err
	}
	// Like riverbench, start from an empty, compacted job table so that an earlier run's
	// rows change neither the counts nor the scans.
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("emptying river_job: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM FULL river_job"); err != nil {
		return fmt.Errorf("vacuuming river_job: %w", err)
	}

	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &noopWorker{}); err != nil {
		return fmt.Errorf("registering the no-op worker: %w", err)
	}
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: fetchPollInterval,
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.workers}},
		Workers:           workers,
	})
	if err != nil {
		return fmt.Errorf("creating the River client: %w", err)
	}

	if err := insertJobs(ctx, client, cfg.jobs, stderr); err != nil {
		return err
	}

	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return fmt.Errorf("writing ready: %w", err)
	}
	if err := waitForLine(ctx, stdin); err != nil {
		return err
	}

	elapsed, err := burnDown(ctx, client, pool, cfg, stderr)
	if err != nil {
		// Stop what was started, without letting the stop hide the error.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
		return err
	}

	line, err := json.Marshal(result{
		Jobs:          cfg.jobs,
		Seconds:       math.Round(elapsed.Seconds()*1000) / 1000,
		JobsPerSecond: math.Round(float64(cfg.jobs)/elapsed.Seconds()*10) / 10,
		RiverVersion:  riverVersion(),
	})
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stopping the River client within %s: %w", stopTimeout, err)
	}
	return checkCompleted(stopCtx, pool, cfg.jobs)
}

// openPool connects to the database and checks that it answers. The pool keeps pgxpool's
// default size, as River's CLI (which runs riverbench) does.
func openPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("-database-url is not a PostgreSQL URL (%w): give one like postgres://user:password@127.0.0.1:5432/database", err)
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "opsq bench river"
	}
	where := fmt.Sprintf("%s:%d/%s", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database)

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s: %w; check -database-url and that the server is running and accepts this user", where, err)
	}
	return pool, nil
}

// migrate brings River's schema up to the version this binary was built with.
func migrate(ctx context.Context, driver *riverpgxv5.Driver, logger *slog.Logger, stderr io.Writer) error {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("creating River's migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrating River's schema up: %w; the database user needs to create tables in the first schema of its search_path", err)
	}
	if n := len(res.Versions); n > 0 {
		fmt.Fprintf(stderr, "river: applied %d schema migrations (up to version %d)\n", n, res.Versions[n-1].Version)
	}
	return nil
}

// insertJobs inserts n jobs in batches of insertBatchSize, each with InsertManyFast.
func insertJobs(ctx context.Context, client *river.Client[pgx5Tx], n int, stderr io.Writer) error {
	start := time.Now()
	lastReport := start
	batch := make([]river.InsertManyParams, 0, insertBatchSize)
	for inserted := 0; inserted < n; {
		batch = batch[:0]
		for i := 0; i < insertBatchSize && inserted+i < n; i++ {
			batch = append(batch, river.InsertManyParams{Args: benchArgs{Num: inserted + i + 1}})
		}
		count, err := client.InsertManyFast(ctx, batch)
		if err != nil {
			return fmt.Errorf("inserting jobs %d to %d: %w", inserted+1, inserted+len(batch), err)
		}
		if count != len(batch) {
			return fmt.Errorf("inserting jobs %d to %d: River inserted %d of %d", inserted+1, inserted+len(batch), count, len(batch))
		}
		inserted += count
		if now := time.Now(); now.Sub(lastReport) >= time.Second || inserted == n {
			fmt.Fprintf(stderr, "river: inserted %d/%d jobs (%.1fs)\n", inserted, n, now.Sub(start).Seconds())
			lastReport = now
		}
	}
	return nil
}

// waitForLine returns once a line (or the last, unterminated one) has been read.
func waitForLine(ctx context.Context, stdin io.Reader) error {
	read := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if errors.Is(err, io.EOF) && line != "" {
			err = nil
		}
		read <- err
	}()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for the start line: %w", ctx.Err())
	case err := <-read:
		if errors.Is(err, io.EOF) {
			return errors.New("standard input closed before the start line: write one line to this program's stdin after it prints ready")
		}
		if err != nil {
			return fmt.Errorf("reading the start line: %w", err)
		}
		return nil
	}
}

// riverVersion is the version of github.com/riverqueue/river this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/riverqueue/river" {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}
