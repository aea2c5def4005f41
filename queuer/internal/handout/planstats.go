package handout

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// The planner's row counts of this instance's chunk partitions.
//
// A large ingest fills every chunk partition in one transaction. Autovacuum, visiting a
// partition while that COPY is still open, counts none of its rows, and sets the
// partition's reltuples to 0 with its pages already there: the planner then believes the
// partition empty, whatever its size, until autovacuum comes back to it. For a backlog of
// 10⁸ chunks that took minutes, one partition after another, and meanwhile the complete
// statement's plan read such a partition's whole primary key for each chunk: 100–260 ms a
// batch instead of about 1 ms (opsq bench --workload latency, docs/capacity.md). So every
// planStatsSchedule each instance looks at its own shards' partitions, and ANALYZEs those
// the planner believes to hold under half of their live rows (as the cumulative statistics
// count them), from planStatsMinRows up. It is what autovacuum's ANALYZE does, done sooner
// and only where the two counts disagree.
const (
	planStatsSchedule = "@every 5s"
	planStatsMinRows  = 10_000
	// planStatsTimeout bounds one pass; an ANALYZE of a partition of a few million rows
	// takes seconds.
	planStatsTimeout = 2 * time.Minute
)

// planStats refreshes the planner's statistics of the instance's chunk partitions (a cron
// job). Safe for concurrent use; no goroutine.
type planStats struct {
	pool   *pgxpool.Pool
	claims *claims.Manager
	log    *slog.Logger
}

// refresh ANALYZEs the instance's chunk partitions whose planner row count is under half of
// their live rows, and returns their shards.
func (p *planStats) refresh(ctx context.Context) []int32 {
	leases := p.claims.Reservable()
	if len(leases) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, planStatsTimeout)
	defer cancel()
	shards := make([]int32, len(leases))
	for i, l := range leases {
		shards[i] = int32(l.Shard)
	}
	db := opsqsql.New(p.pool)
	stale, err := db.ChunkPartitionsStale(ctx, opsqsql.ChunkPartitionsStaleParams{Shards: shards, MinRows: planStatsMinRows})
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading the planner's row counts of the chunk partitions", slog.Any("error", err))
		}
		return nil
	}
	start := time.Now()
	var analyzed []int32
	for _, part := range stale {
		if err := db.AnalyzePartition(ctx, part.Partition); err != nil {
			if ctx.Err() == nil {
				p.log.Warn("analyzing a chunk partition", slog.String("partition", part.Partition), slog.Any("error", err))
			}
			break
		}
		analyzed = append(analyzed, part.Shard)
	}
	if len(analyzed) > 0 {
		p.log.Info("analyzed chunk partitions the planner believed far smaller than they are",
			slog.Any("shards", analyzed), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	}
	return analyzed
}
