package strategy_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/migrations/pgtest"
	"opsq/queuer/queuertest"
	"opsq/strategy"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

// loadBacklog fills the database with submissions × perSubmission chunks (queuertest's
// load through queuer.SubmitMany, quicker than Submit for a plan test, the same rows) and
// ANALYZEs it: strategic metadata company_id (50 values) and mode (preview for one in
// ten), priorities 0–9.
func loadBacklog(t *testing.T, pool *pgxpool.Pool, submissions, perSubmission int) {
	t.Helper()
	subs := make([]queuertest.Submission, submissions)
	for i := range subs {
		s := i + 1
		mode := "full"
		if s%10 == 0 {
			mode = "preview"
		}
		subs[i] = queuertest.Submission{ID: int64(s), Chunks: perSubmission, Priority: s % 10, MaxRetries: 3,
			StrategicMetadata: map[string]any{"company_id": s % 50, "mode": mode}, Input: []byte("x")}
	}
	queuertest.LoadBacklog(t, pool, subs)
}

// forbiddenPlanNodes are the plan nodes that read or hold the backlog before returning the
// first row, instead of streaming it.
var forbiddenPlanNodes = []string{"Sort", "Incremental Sort", "Hash", "Hash Join", "Materialize", "HashAggregate", "Bitmap Heap Scan"}

// TestCandidateQueriesStream checks, with EXPLAIN on a backlog large enough that the planner
// would rather sort (200 000 chunks over 2 000 submissions), that the candidate query of
// every leaf of every strategy is a stream: no sort, hash, materialization or bitmap scan.
func TestCandidateQueriesStream(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	loadBacklog(t, pool, 2000, 100)
	shards := make([]int32, 0, 22)
	for s := int32(0); s < 64; s += 3 {
		shards = append(shards, s)
	}
	for _, text := range []string{
		"random", "oldest_first", "newest_first", "custom_priority",
		"select_only(mode=preview, random)",
		"select_only(mode=preview, oldest_first)",
		"select_only(company_id=7, newest_first)",
		"select_only(company_id=7, custom_priority)",
		"select_only(mode=preview, select_only(company_id=10, random))",
		"prefer_distinct(company_id, 1, random)",
		"prefer_distinct(company_id, 2, select_only(mode=full, oldest_first))",
		"max_simultaneous(company_id, 3, random)",
		"max_simultaneous(company_id, 3, select_only(mode=preview, custom_priority))",
		"or_else(select_only(mode=preview, random), random)",
		"or_else(select_only(mode=preview, custom_priority), prefer_distinct(company_id, 1, oldest_first))",
	} {
		t.Run(text, func(t *testing.T) {
			tree := queuertest.Strategy(t, text)
			for _, leaf := range leaves(tree, nil) {
				query, fargs := strategy.CandidateQuery(leaf.kind, leaf.filters, shards)
				args := pgx.NamedArgs(strategy.NewCursor(leaf.kind).Args(14))
				for k, v := range fargs {
					args[k] = v
				}
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					plan := explain(t, pool, mode, query, args)
					if bad := findNodes(t, plan, forbiddenPlanNodes); len(bad) > 0 {
						t.Errorf("leaf %s (filters %d), %s: plan has %v; want a stream of index scans\n%s",
							leaf.kind, len(leaf.filters), mode, bad, indentPlan(plan))
					}
				}
			}
		})
	}
}

// explain returns the plan PostgreSQL makes for query under plan_cache_mode mode: a
// prepared statement, as the instances run it, explained with its arguments bound.
func explain(t *testing.T, pool *pgxpool.Pool, mode, query string, named pgx.NamedArgs) []byte {
	t.Helper()
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Number the named arguments in order of appearance, as pgx does.
	var args []any
	index := map[string]int{}
	positional := namedArg.ReplaceAllStringFunc(query, func(m string) string {
		name := m[1:]
		if _, ok := index[name]; !ok {
			args = append(args, named[name])
			index[name] = len(args)
		}
		return fmt.Sprintf("$%d", index[name])
	})
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = literal(t, a)
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "PREPARE plan_test AS "+positional); err != nil {
		t.Fatalf("PREPARE: %v\n%s", err, positional)
	}
	defer conn.Exec(ctx, "DEALLOCATE plan_test; RESET plan_cache_mode") //nolint:errcheck // the connection is released either way
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE plan_test("+strings.Join(params, ", ")+")").Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN EXECUTE: %v", err)
	}
	return plan
}

var namedArg = regexp.MustCompile(`@[a-z_0-9]+`)

// literal writes an argument of a candidate query as SQL.
func literal(t *testing.T, a any) string {
	t.Helper()
	switch v := a.(type) {
	case []int32:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return "'{" + strings.Join(parts, ",") + "}'"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int, int32, int64:
		return fmt.Sprint(v)
	}
	t.Fatalf("no SQL literal for %T", a)
	return ""
}

// TestSubmissionQueryStreams checks the plan of the per-submission scan that select_only
// uses for a value few submissions have. Instances run it with a generic plan, as every
// candidate query; a custom plan for one small submission may well gather and sort its few
// chunks, which is cheap, so only the generic plan is held to streaming.
func TestSubmissionQueryStreams(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	loadBacklog(t, pool, 2000, 100)
	shards := []int32{0, 3, 6, 9, 12, 15, 18, 21}
	for _, filters := range [][]strategy.Filter{nil, {{Key: "mode", Value: []byte(`"preview"`)}}} {
		query, fargs := strategy.SubmissionQuery(filters, shards)
		args := pgx.NamedArgs{"only_submission": int64(1000), "after_chunk": int32(-1), "limit": 14}
		for k, v := range fargs {
			args[k] = v
		}
		plan := explain(t, pool, "force_generic_plan", query, args)
		if bad := findNodes(t, plan, forbiddenPlanNodes); len(bad) > 0 {
			t.Errorf("submission scan (filters %d): generic plan has %v; want a stream\n%s", len(filters), bad, indentPlan(plan))
		}
	}
}

type leafQuery struct {
	kind    strategy.Kind
	filters []strategy.Filter
}

// leaves lists the leaf scans a strategy runs, with the select_only filters above each.
func leaves(n strategy.Node, filters []strategy.Filter) []leafQuery {
	switch n.Kind {
	case strategy.OrElse:
		return append(leaves(*n.First, filters), leaves(*n.Fallback, filters)...)
	case strategy.SelectOnly:
		return leaves(*n.Then, append(append([]strategy.Filter(nil), filters...), n.Filter()))
	case strategy.PreferDistinct, strategy.MaxSimultaneous:
		return leaves(*n.Then, filters)
	}
	return []leafQuery{{kind: n.Kind, filters: filters}}
}

// findNodes returns the node types of plan that are in forbidden.
func findNodes(t *testing.T, plan []byte, forbidden []string) []string {
	t.Helper()
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("reading plan: %v", err)
	}
	var found []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		typ, _ := node["Node Type"].(string)
		for _, f := range forbidden {
			if typ == f {
				found = append(found, typ)
			}
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			if m, ok := c.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(doc[0].Plan)
	return found
}

func indentPlan(plan []byte) string {
	var v any
	_ = json.Unmarshal(plan, &v)
	b, _ := json.MarshalIndent(v, "", "  ")
	s := string(b)
	if len(s) > 4000 {
		s = s[:4000] + "\n…"
	}
	return strings.TrimSpace(fmt.Sprint(s))
}
