package pgtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// ExplainExecute prepares query (with pgx named arguments, @name) on conn as pgx does, its
// arguments numbered in order of appearance, and returns what EXPLAIN (options) EXECUTE of
// it prints with the values of named: the plan that conn's plan_cache_mode chooses, as the
// statement's cached plan. The plan tests of strategy and queuer read their plans with it.
func ExplainExecute(t testing.TB, conn *pgx.Conn, options, query string, named map[string]any) []byte {
	t.Helper()
	ctx := t.Context()
	var params []string
	index := map[string]int{}
	positional := namedArg.ReplaceAllStringFunc(query, func(m string) string {
		name := m[1:]
		if _, ok := index[name]; !ok {
			params = append(params, sqlLiteral(t, named[name]))
			index[name] = len(params)
		}
		return fmt.Sprintf("$%d", index[name])
	})
	if _, err := conn.Exec(ctx, "PREPARE pgtest_explain AS "+positional); err != nil {
		t.Fatalf("PREPARE: %v\n%s", err, positional)
	}
	defer conn.Exec(ctx, "DEALLOCATE pgtest_explain") //nolint:errcheck // a failed test's connection is dropped anyway
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN ("+options+") EXECUTE pgtest_explain("+strings.Join(params, ", ")+")").Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN EXECUTE: %v", err)
	}
	return plan
}

var namedArg = regexp.MustCompile(`@[a-z_0-9]+`)

// sqlLiteral writes an argument of ExplainExecute as SQL.
func sqlLiteral(t testing.TB, a any) string {
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
	case []string:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = sqlLiteral(t, x)
		}
		return "ARRAY[" + strings.Join(parts, ", ") + "]::text[]"
	case int, int32, int64:
		return fmt.Sprint(v)
	}
	t.Fatalf("pgtest: no SQL literal for %T", a)
	return ""
}

// PlanNodes returns the node types of a plan printed by EXPLAIN (FORMAT JSON) that are in
// types, each once.
func PlanNodes(t testing.TB, plan []byte, types []string) []string {
	t.Helper()
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("pgtest: reading the plan: %v\n%s", err, plan)
	}
	var found []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if slices.Contains(types, n.NodeType) && !slices.Contains(found, n.NodeType) {
			found = append(found, n.NodeType)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return found
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Plans    []planNode `json:"Plans"`
}
