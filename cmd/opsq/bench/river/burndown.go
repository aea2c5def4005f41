package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// pgx5Tx is the transaction type of River's pgx v5 driver.
type pgx5Tx = pgx.Tx

// progressEvery is how often the burn-down reports its progress on stderr.
const progressEvery = 2 * time.Second

// burnDown starts the client and returns the wall-clock time from just before its start
// to the last job's completion. It counts completions from River's event subscription,
// as riverbench does: an event is sent once the completer has written the job's new
// state, so the last one marks the end of the work in the database, not in the workers.
// The client is left running; the caller stops it.
func burnDown(ctx context.Context, client *river.Client[pgx5Tx], pool *pgxpool.Pool, cfg config, stderr io.Writer) (time.Duration, error) {
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: min(cfg.jobs, eventBufferMax),
		Kinds: []river.EventKind{
			river.EventKindJobCompleted,
			river.EventKindJobFailed,
			river.EventKindJobCancelled,
		},
	})
	defer unsubscribe()

	waitCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	// The clock includes the client's start (a few queries: leader election, the queue's
	// row), which is part of what it takes River to burn the jobs down.
	start := time.Now()
	// Start gets ctx, not waitCtx: cancelling Start's context stops the client hard, and
	// the client must outlive this function to be stopped cleanly by the caller.
	if err := client.Start(ctx); err != nil {
		return 0, fmt.Errorf("starting the River client: %w", err)
	}

	var (
		completed   int
		lastEvent   = start
		ticker      = time.NewTicker(progressEvery)
		lastReport  = start
		lastCounted int
	)
	defer ticker.Stop()
	for completed < cfg.jobs {
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return 0, fmt.Errorf("interrupted after %d of %d jobs: %w", completed, cfg.jobs, ctx.Err())
			}
			return 0, fmt.Errorf("the burn-down did not finish within -timeout %s: %d of %d jobs completed; give a longer -timeout or fewer -jobs", cfg.timeout, completed, cfg.jobs)

		case ev, ok := <-events:
			if !ok {
				return 0, fmt.Errorf("River closed the completion subscription after %d of %d jobs", completed, cfg.jobs)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("job %d ended %s instead of completed%s; the no-op worker never fails, so look at the database's log", ev.Job.ID, ev.Kind, lastError(ev.Job))
			}
			completed++
			lastEvent = time.Now()

		case now := <-ticker.C:
			fmt.Fprintf(stderr, "river: completed %d/%d jobs (%.0f jobs/s)\n",
				completed, cfg.jobs, float64(completed-lastCounted)/now.Sub(lastReport).Seconds())
			lastReport, lastCounted = now, completed

			if now.Sub(lastEvent) < quietCheckAfter {
				continue
			}
			// No completion for a while: River may have dropped events, so ask the
			// database. If nothing is left, the end is now, an upper bound.
			left, err := countLeft(waitCtx, pool)
			if err != nil {
				return 0, err
			}
			if left == 0 {
				fmt.Fprintf(stderr, "river: warning: %d completion events were missed; the time is measured up to now, an upper bound\n", cfg.jobs-completed)
				completed, lastEvent = cfg.jobs, now
			}
		}
	}

	return lastEvent.Sub(start), nil
}

// lastError formats the last error River recorded on a job, if any.
func lastError(job *rivertype.JobRow) string {
	if job == nil || len(job.Errors) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s)", job.Errors[len(job.Errors)-1].Error)
}

// countLeft returns how many jobs are not completed yet.
func countLeft(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&left); err != nil {
		return 0, fmt.Errorf("counting the jobs left: %w", err)
	}
	return left, nil
}

// checkCompleted makes sure the table holds exactly the jobs inserted, all completed. It
// runs after the result line, so that its scan of river_job (40-200 ms at 300 000 jobs,
// about 1 % of River's PostgreSQL CPU per job) stays out of the caller's readings; a
// failure still makes the exit status non-zero, which tells the caller to drop the line.
func checkCompleted(ctx context.Context, pool *pgxpool.Pool, jobs int) error {
	var completed, total int
	err := pool.QueryRow(ctx,
		"SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM river_job").Scan(&completed, &total)
	if err != nil {
		return fmt.Errorf("counting the completed jobs: %w", err)
	}
	if completed != jobs || total != jobs {
		return fmt.Errorf("river_job holds %d jobs of which %d completed; want %d, all completed (did another process use River's tables in this database?)", total, completed, jobs)
	}
	return nil
}
