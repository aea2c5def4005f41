package strategy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
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
		"rate_limit(company_id, 10/s, 20, random)",
		"rate_limit(@tenant, 100/s, 20, select_only(mode=preview, oldest_first))",
		"or_else(rate_limit(company_id, 5/s, 1, custom_priority), newest_first)",
		"weighted_fair(@tenant, {acme: 3, globex: 1}, 1, random)",
		"weighted_fair(company_id, {42: 2}, 1, prefer_distinct(k, 1, oldest_first))",
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
					if bad := pgtest.PlanNodes(t, plan, forbiddenPlanNodes); len(bad) > 0 {
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
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode") //nolint:errcheck // the connection is released either way
	return pgtest.ExplainExecute(t, conn.Conn(), "FORMAT JSON", query, named)
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
		if bad := pgtest.PlanNodes(t, plan, forbiddenPlanNodes); len(bad) > 0 {
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
	case strategy.PreferDistinct, strategy.MaxSimultaneous, strategy.RateLimit:
		return leaves(*n.Then, filters)
	case strategy.WeightedFair:
		// Each value's turn reads then's leaves under a filter of the value, as a
		// select_only does; the fill after the turns reads them as they are.
		value := `"v"`
		if vs := n.WeightedValues(); len(vs) > 0 {
			value = vs[0]
		}
		each := append(append([]strategy.Filter(nil), filters...), strategy.ValueFilter(n.Key, value))
		return append(leaves(*n.Then, each), leaves(*n.Then, filters)...)
	}
	return []leafQuery{{kind: n.Kind, filters: filters}}
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
