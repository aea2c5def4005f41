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
const (
	planStatsSchedule = "@every 5s"
	planStatsMinRows  = 10_000
	// planStatsTimeout bounds one pass; an ANALYZE reads a sample of 30 000 rows (at the
	// default statistics target), a few seconds on a cold cache at most.
	planStatsTimeout = 2 * time.Minute
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
	db := opsqsql.New(p.pool)
	stale, err := db.ChunksStatsStale(ctx, planStatsMinRows)
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
		slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return true
}
