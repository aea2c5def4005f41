package sql

import (
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConfigureSession sets on cc the session parameters that every connection of an opsq
// instance runs with; each pool an instance opens (the request pool of opsq serve, the
// queuer's candidate pool, the claims manager's pool) is configured through it.
//
// jit = off. PostgreSQL decides to JIT-compile a statement from the planner's cost
// estimate alone (jit_above_cost, 100 000 by default), and some estimates grow with the
// backlog although the work does not: the cached generic plan of a candidate query cannot
// see the value of LIMIT @limit and costs it at a tenth of the rows, so with 50 000 000
// chunks the random candidate query passed the threshold, and every reserve compiled 89
// functions — 38 ms of a 63 ms execution whose index scans took under 1 ms, a reserve 30×
// slower than at 20 000 000 chunks (issue 10). The ordered leaves over an instance's shards
// and the per-submission scan pass the threshold near 20 000 000 chunks too, and a
// select_only filter passes the inlining and optimization thresholds (500 000) at a few
// million; the complete statement's estimate stays flat (docs/benchmarks.md, measured with
// EXPLAIN at 6, 20 and 100 million chunks). The hot statements each read a batch of rows
// through an index, so compiled expressions never pay for their compilation there, and the
// few bulk ones (failing or cancelling a whole submission, retention) are rare: JIT is off
// on every connection, not only on those where an estimate was seen to cross the
// threshold (raising jit_above_cost would only move the cliff). Tests keep it so: queuer's TestCandidateQueriesNotJIT (every candidate query
// on the queuer's own connections, on a database where everything else is JIT-compiled),
// claims' TestManagerPoolSession and opsq serve's TestNewPoolTurnsJITOff.
//
// citus.max_adaptive_executor_pool_size = 1. On Citus, a statement over several shards of
// one worker (a candidate query over the instance's shards, the promoter's read of the
// waiting chunks) runs its tasks on up to 16 connections to that worker by default, opened
// for the statement, and all but one (citus.max_cached_conns_per_worker) closed when its
// transaction ends: a new backend on the worker per task, most statements. One
// connection per worker, its tasks one after the other, cost a burn-down on a coordinator
// and 2 workers a quarter less PostgreSQL CPU per chunk (132 → 99 µs, the workers' new
// sessions 420 → 53; docs/citus.md). On a PostgreSQL without Citus it is a placeholder
// setting that nothing reads.
//
// A session whose host refuses writes is closed (SQLSTATE 25006, read_only_sql_transaction:
// a primary demoted by a failover manager, a standby, a server turned read-only), so that
// the pool drops it and connects anew, to whichever of the URL's hosts accepts writes
// (target_session_attrs=read-write); IsUnavailable counts the error as the database lost.
func ConfigureSession(cc *pgx.ConnConfig) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["jit"] = "off"
	cc.RuntimeParams["citus.max_adaptive_executor_pool_size"] = "1"
	cc.OnPgError = closeReadOnly
}

// closeReadOnly is a pgconn.PgErrorHandler: false (close the connection) on SQLSTATE
// 25006, and on a FATAL error as pgx's own handler does.
func closeReadOnly(_ *pgconn.PgConn, err *pgconn.PgError) bool {
	return err.Code != readOnlyState && !strings.EqualFold(err.Severity, "FATAL")
}

// ConfigureCandidateSession sets on cc what the connections of the candidate queries run
// with (the queuer's candidate pool): ConfigureSession's, and a plan that streams through
// the chunks' indexes at any backlog.
//
// plan_cache_mode = force_generic_plan: one cached plan per query text, not a custom plan
// made anew for every execution (over tens of chunk partitions, before migration 00026,
// one cost milliseconds to make, more than running it; a query over tens of shards is
// still tens of branches to plan, sql.CandidateQuery).
//
// No sort, bitmap scan, sequential scan, hash, materialization or parallel workers. A
// candidate query reads one batch in its leaf's order, which the chunks' indexes give as
// they are read, one scan per shard (a Merge Append of index scans). But the generic plan
// cannot see the value of LIMIT @limit and costs it at a tenth of the rows: at 100 000 000
// chunks, once the statistics knew the backlog, the random query's plan over 8 shards
// became a Sort of a parallel bitmap scan of every row in its random_order range, 1.7–9 s
// per execution where the index plan takes under a millisecond, and a reserve timed out
// (issue 10, the second cliff; TestCandidatePlansStreamAtAnyBacklog). With these off the planner keeps the
// streaming plan whatever the statistics say. Only the candidate queries run on these
// connections.
func ConfigureCandidateSession(cc *pgx.ConnConfig) {
	ConfigureSession(cc)
	for name, value := range map[string]string{
		"plan_cache_mode":                 "force_generic_plan",
		"enable_sort":                     "off",
		"enable_incremental_sort":         "off",
		"enable_bitmapscan":               "off",
		"enable_seqscan":                  "off",
		"enable_hashjoin":                 "off",
		"enable_hashagg":                  "off",
		"enable_material":                 "off",
		"max_parallel_workers_per_gather": "0",
	} {
		cc.RuntimeParams[name] = value
	}
	if OnCitus() {
		// Citus routes a statement by the values of its parameters, which a generic plan
		// does not have ("could not create distributed plan"); it plans each execution
		// itself. The other settings shape the coordinator's plan only: a worker plans
		// its shard's part with its own settings.
		delete(cc.RuntimeParams, "plan_cache_mode")
	}
}
