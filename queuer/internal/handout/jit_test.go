package handout

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestCandidateQueriesNotJIT checks that no candidate query is JIT-compiled on the
// connections the queuer runs them on, however large the backlog makes the estimate of its
// cached generic plan. At 50 000 000 chunks the random query's estimate passed
// jit_above_cost and JIT compilation made every reserve 30× slower (issue 10); here the
// database makes every statement eligible (jit_above_cost = 0), which a plain connection
// shows by compiling the same plans, and the queuer's candidate pool must still not
// compile them. Every leaf's query (random, oldest_first, newest_first, custom_priority;
// the other nodes only filter and combine these), with 0, 1 and 2 select_only filters, over
// a random window of shards and over all of them, and the per-submission scan.
//
// It needs a PostgreSQL built with LLVM JIT; without one it fails and says what to install.
func TestCandidateQueriesNotJIT(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDB(t)
	eager, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close(ctx)
	var available bool
	if err := eager.QueryRow(ctx, "SELECT pg_jit_available()").Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Fatal("this PostgreSQL cannot JIT-compile (pg_jit_available() is false), so the test cannot tell whether the instance's connections would: " +
			"use a server built with LLVM JIT (Debian's and Ubuntu's postgresql-NN package ships it as /usr/lib/postgresql/NN/lib/llvmjit.so; " +
			"on other systems install the server's llvmjit package, e.g. postgresql15-llvmjit; check the jit_provider setting)")
	}
	// Every statement of the connections opened from now on is costed above the threshold,
	// unless the connection turns JIT off itself.
	if _, err := eager.Exec(ctx, "DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET jit = on', current_database()); "+
		"EXECUTE format('ALTER DATABASE %I SET jit_above_cost = 0', current_database()); END$$"); err != nil {
		t.Fatalf("making JIT eager on the test database: %v", err)
	}
	if _, err := eager.Exec(ctx, "SET jit = on; SET jit_above_cost = 0"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := startEngine(t, pool)
	conn, err := q.path.scans.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	scans := candidateScans()
	for _, s := range scans {
		if n := jitFunctions(t, eager, s.query, s.args); n == 0 {
			t.Fatalf("%s: a connection with jit_above_cost = 0 compiled no function; want some, or the test shows nothing\n%s", s.name, s.query)
		}
		if n := jitFunctions(t, conn.Conn(), s.query, s.args); n != 0 {
			t.Errorf("%s: the queuer's candidate connection JIT-compiled %d functions; want none (sql.ConfigureSession turns JIT off)", s.name, n)
		}
	}
}

// candidateScan is a candidate query as the queuer runs it, with arguments.
type candidateScan struct {
	name  string
	query string
	args  pgx.NamedArgs
}

// candidateScans returns every leaf's query (random, oldest_first, newest_first,
// custom_priority; the other nodes only filter and combine these), with 0, 1 and 2
// select_only filters, over a random window of shards and over all of them, and the
// per-submission scan.
func candidateScans() []candidateScan {
	window := []int32{0, 8, 16, 24, 32, 40, 48, 56} // randomWindow shards
	all := make([]int32, 64)
	for i := range all {
		all[i] = int32(i)
	}
	// The third is a consumer's limit to two tenants (a value among several).
	filters := []strategy.Filter{{Key: "mode", Value: []byte(`"preview"`)}, {Key: "company_id", Value: []byte(`7`)},
		strategy.TenantFilter([]string{"acme", "globex"})}
	var scans []candidateScan
	for _, kind := range []strategy.Kind{strategy.Random, strategy.OldestFirst, strategy.NewestFirst, strategy.CustomPriority} {
		for _, shards := range [][]int32{window, all} {
			for nf := range len(filters) + 1 {
				query, fargs := strategy.CandidateQuery(kind, filters[:nf], shards)
				args := pgx.NamedArgs(strategy.NewCursor(kind).Args(14))
				for k, v := range fargs {
					args[k] = v
				}
				scans = append(scans, candidateScan{fmt.Sprintf("%s, %d shards, %d filters", kind, len(shards), nf), query, args})
			}
		}
	}
	for nf := range len(filters) + 1 {
		query, fargs := strategy.SubmissionQuery(filters[:nf], all)
		args := pgx.NamedArgs{"only_submission": int64(1), "after_chunk": int32(-1), "limit": 14}
		for k, v := range fargs {
			args[k] = v
		}
		scans = append(scans, candidateScan{fmt.Sprintf("submission scan, %d filters", nf), query, args})
	}
	return scans
}

// jitFunctions runs query on conn as the queuer runs it, a prepared statement whose plan is
// the one conn's plan_cache_mode chooses, under EXPLAIN ANALYZE, and returns how many
// functions its execution JIT-compiled.
func jitFunctions(t *testing.T, conn *pgx.Conn, query string, named pgx.NamedArgs) int {
	t.Helper()
	plan := pgtest.ExplainExecute(t, conn, "ANALYZE, FORMAT JSON", query, named)
	var doc []struct {
		JIT *struct{ Functions int }
	}
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("reading the plan: %v\n%s", err, plan)
	}
	if doc[0].JIT == nil {
		return 0
	}
	return doc[0].JIT.Functions
}
