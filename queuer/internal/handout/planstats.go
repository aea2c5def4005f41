package handout

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// The planner's row count of the chunk table.
//
// A large ingest fills opsq.chunks in one transaction. Autovacuum, visiting the table while
// that COPY is still open, counts none of its rows, and sets reltuples far below what the
// table holds once it commits: the planner then believes the table small, whatever its
// size, until autovacuum comes back to it. For a backlog of 10⁸ chunks (then in 64
// partitions) that took minutes, and meanwhile the complete statement's plan read a whole
// partition's primary key for each chunk: 100–260 ms a batch instead of about 1 ms (opsq
// bench --workload latency, docs/capacity.md). So every planStatsSchedule each instance
// that holds shards looks at the table, and ANALYZEs it when the planner believes it to
// hold under half of its live rows (as the cumulative statistics count them), from
// planStatsMinRows up. It is what autovacuum's ANALYZE does, done sooner and only when the
// two counts disagree; several instances at it at once skip each other (SKIP_LOCKED).
//
// And at once after a large ingest, before its submit answers (Path.AfterIngest): the
// instance that committed it knows its count before the statistics do (a backend sends
// its counts a second or more after its commit), so the first reserves and completes of a
// backlog that at least doubles the table are planned for its size, and the ANALYZE is
// the ingest's cost, not spent among the first seconds of its burn-down (where it took
// 5.5 % of PostgreSQL's CPU samples, docs/capacity.md). The job stays for the rest: an
// ANALYZE skipped (SKIP_LOCKED) or cut, autovacuum's count of an ingest still open.
const (
	planStatsSchedule = "@every 5s"
	planStatsMinRows  = 10_000
	// planStatsTimeout bounds one pass; an ANALYZE reads a sample of 30 000 rows (at the
	// default statistics target), a few seconds on a cold cache at most.
	planStatsTimeout = 2 * time.Minute
	// planStatsIngestTimeout bounds the ANALYZE a submit waits for; one cut short is the
	// job's to do again.
	planStatsIngestTimeout = 10 * time.Second
)

// planStats refreshes the planner's statistics of the chunk table (a cron job). Safe for
// concurrent use; no goroutine.
type planStats struct {
	pool   *pgxpool.Pool
	claims *claims.Manager
	log    *slog.Logger
}

// refresh ANALYZEs the chunk table when its planner row count is under half of its live
// rows, and reports whether it did.
func (p *planStats) refresh(ctx context.Context) bool {
	if len(p.claims.Reservable()) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, planStatsTimeout)
	defer cancel()
	return p.analyzeStale(ctx, 0)
}

// afterIngest ANALYZEs the chunk table when its planner row count is under half of the
// ingested chunks just committed (or of its live rows), from planStatsMinRows up, and
// reports whether it did. Not on Citus, whose coordinator holds no chunks; its workers'
// autovacuum counts theirs.
func (p *planStats) afterIngest(ctx context.Context, ingested int64) bool {
	if ingested < planStatsMinRows || opsqsql.OnCitus() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, planStatsIngestTimeout)
	defer cancel()
	return p.analyzeStale(ctx, ingested)
}

// analyzeStale ANALYZEs the chunk table when chunks_stats_stale.sql finds it stale, and
// reports whether it did.
func (p *planStats) analyzeStale(ctx context.Context, ingested int64) bool {
	db := opsqsql.New(p.pool)
	stale, err := db.ChunksStatsStale(ctx, planStatsMinRows, ingested)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading the planner's row count of the chunks", slog.Any("error", err))
		}
		return false
	}
	if !stale {
		return false
	}
	start := time.Now()
	if err := db.ChunksAnalyze(ctx); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("analyzing the chunks", slog.Any("error", err))
		}
		return false
	}
	p.log.Info("analyzed the chunks, which the planner believed far fewer than they are",
		slog.Int64("ingested", ingested), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return true
}
