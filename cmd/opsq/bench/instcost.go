package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"opsq/cmd/opsq/progress"
)

// What the instances cost beside PostgreSQL's CPU (pgcost.go): the CPU time of the "opsq
// serve" processes (utime+stime of /proc/PID/stat, sampled like the server's), and what they
// ask of the server: statements and transactions per chunk.
//
// Statements come from pg_stat_statements, when the server has it loaded
// (shared_preload_libraries) and the extension can be created in the scratch database;
// transactions from pg_stat_database.xact_commit + xact_rollback of the scratch database
// (each backend flushes its counts within about a second of going idle: the sample waits
// that long). The server keeps no count of round trips (a pipelined batch is one round trip
// of several statements), so none is printed. Both counts are the scratch database's:
// the instances' background loops (claims renewal, promoter) and the bench's own few
// samples count too.

// dbCounts is one sample of the scratch database's counters; stmts is -1 when not counted.
type dbCounts struct {
	cpu   time.Duration // the instances'; 0 when not measured
	stmts int64
	xacts int64
}

// statementsSource returns whether pg_stat_statements can be read in the scratch
// database, or why not.
func (e *benchEnv) statementsSource(ctx context.Context) (bool, string) {
	var preload string
	if err := e.pool.QueryRow(ctx, "SHOW shared_preload_libraries").Scan(&preload); err != nil {
		return false, fmt.Sprintf("shared_preload_libraries unreadable: %v", err)
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		return false, "pg_stat_statements is not in the server's shared_preload_libraries"
	}
	if _, err := e.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return false, fmt.Sprintf("CREATE EXTENSION pg_stat_statements failed: %v", err)
	}
	return true, ""
}

// sampleCounts reads the instances' CPU and the database's counters.
func (e *benchEnv) sampleCounts(ctx context.Context, statements bool) (dbCounts, error) {
	c := dbCounts{stmts: -1}
	for _, inst := range e.instances {
		cpu, err := procCPU(inst.cmd.Process.Pid)
		if err != nil {
			return c, fmt.Errorf("instance %s: %w", inst.id, err)
		}
		c.cpu += cpu
	}
	if err := e.pool.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&c.xacts); err != nil {
		return c, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	if statements {
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&c.stmts); err != nil {
			return c, fmt.Errorf("reading pg_stat_statements: %w", err)
		}
	}
	return c, nil
}

// instanceCostRows returns the rows of what the instances spent and asked over n chunks,
// from before to after; why says why statements were not counted.
func instanceCostRows(prefix string, before, after dbCounts, n int64, cpuErr error, why string) []benchRow {
	per := func(v int64) float64 { return float64(v) / float64(max(n, 1)) }
	var rows []benchRow
	if cpuErr != nil {
		rows = append(rows, unavailable(prefix+".instance_cpu_per_chunk", "opsq instances' CPU per chunk", unitMicros, cpuErr.Error()))
	} else {
		cpu := after.cpu - before.cpu
		rows = append(rows, measured(prefix+".instance_cpu_per_chunk", "opsq instances' CPU per chunk", float64(cpu.Microseconds())/float64(max(n, 1)), unitMicros).
			note("%s of CPU (utime+stime, /proc/PID/stat) of the opsq serve processes over %s chunks", progress.Duration(cpu), progress.GroupDigits(n)))
	}
	if before.stmts >= 0 && after.stmts >= 0 {
		rows = append(rows, measured(prefix+".statements_per_chunk", "statements per chunk reserved and completed", per(after.stmts-before.stmts), unitPerItem).
			note("pg_stat_statements calls in the scratch database (background loops included): %s", progress.GroupDigits(after.stmts-before.stmts)))
	} else {
		rows = append(rows, unavailable(prefix+".statements_per_chunk", "statements per chunk reserved and completed", unitPerItem, why))
	}
	rows = append(rows,
		measured(prefix+".transactions_per_chunk", "transactions per chunk reserved and completed", per(after.xacts-before.xacts), unitPerItem).
			note("pg_stat_database xact_commit+xact_rollback of the scratch database (background loops included): %s", progress.GroupDigits(after.xacts-before.xacts)),
		unavailable(prefix+".round_trips_per_chunk", "round trips per chunk reserved and completed", unitPerItem,
			"PostgreSQL counts no round trips; see statements and transactions"))
	return rows
}

// statsFlushWait is how long a backend may hold its pg_stat_database counts after going
// idle before it flushes them (PGSTAT_MIN_INTERVAL, 1 s), with a margin.
const statsFlushWait = 1500 * time.Millisecond
