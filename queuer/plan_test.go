package queuer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/strategy"
)

// loadBacklog fills the database with submissions × perSubmission chunks straight through
// SQL (quicker than the API for a plan test) and ANALYZEs it: strategic metadata
// company_id (50 values) and mode (preview for one in ten), priorities 0–9.
func loadBacklog(t *testing.T, pool *pgxpool.Pool, submissions, perSubmission int) {
	t.Helper()
	ctx := t.Context()
	for _, stmt := range []string{
		`INSERT INTO opsq.submissions (id, chunks_total, priority, max_retries, strategic_metadata)
		 SELECT s, @per, s % 10, 3,
		        jsonb_build_object('company_id', s % 50, 'mode', CASE WHEN s % 10 = 0 THEN 'preview' ELSE 'full' END)
		 FROM generate_series(1, @subs) AS s`,
		`INSERT INTO opsq.strategic_metadata (key, value, submission_id)
		 SELECT kv.key, kv.value, s.id FROM opsq.submissions s, jsonb_each(s.strategic_metadata) kv`,
		`INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, input)
		 SELECT s, i, (s * 7 + i) % 64, ((s * 2654435761) % 65536 + i / 64) % 65536, 'x'::bytea
		 FROM generate_series(1, @subs) AS s, generate_series(0, @per - 1) AS i`,
		`ANALYZE opsq.chunks`,
		`ANALYZE opsq.submissions`,
		`ANALYZE opsq.strategic_metadata`,
	} {
		if _, err := pool.Exec(ctx, stmt, pgx.NamedArgs{"subs": submissions, "per": perSubmission}); err != nil {
			t.Fatalf("loading the backlog: %v", err)
		}
	}
}

// forbiddenPlanNodes are the plan nodes that read or hold the backlog before returning the
// first row, instead of streaming it.
var forbiddenPlanNodes = []string{"Sort", "Incremental Sort", "Hash", "Hash Join", "Materialize", "HashAggregate", "Bitmap Heap Scan"}

// TestCandidateQueriesStream checks, with EXPLAIN on a backlog large enough that the planner
// would rather sort (200 000 chunks over 2 000 submissions), that the candidate query of
// every leaf of every strategy is a stream: no sort, hash, materialization or bitmap scan.
func TestCandidateQueriesStream(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
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
			tree := strategy.MustParseText(text)
			for _, leaf := range leaves(tree, nil) {
				query, fargs := strategy.CandidateQuery(leaf.kind, leaf.filters)
				args := newScan(leaf.kind).args(14)
				args["shards"] = shards
				for k, v := range fargs {
					args[k] = v
				}
				var plan []byte
				if err := pool.QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+query, args).Scan(&plan); err != nil {
					t.Fatalf("EXPLAIN %s: %v", leaf.kind, err)
				}
				if bad := findNodes(t, plan, forbiddenPlanNodes); len(bad) > 0 {
					t.Errorf("leaf %s (filters %d): plan has %v; want a stream of index scans\n%s", leaf.kind, len(leaf.filters), bad, indentPlan(plan))
				}
			}
		})
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
		return leaves(*n.Then, append(append([]strategy.Filter(nil), filters...), strategy.Filter{Key: n.Key, Value: n.Value.JSON()}))
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

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	_, pool := setup(t)
	return pool
}
