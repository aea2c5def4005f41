package sql_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestListByKeyReadsOnlyTheTenant: a tenant's page by another key reads the tenant's own
// rows of strategic_metadata, however many of another tenant's submissions have the key.
// Before, the page walked every tenant's rows of the key and dropped the others', so its
// time told a producer how many another tenant had (issue 31, finding 10).
func TestListByKeyReadsOnlyTheTenant(t *testing.T) {
	t.Parallel()
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter)
	ctx := t.Context()
	// 3 submissions of tenant "alpha" and 3 000 of "beta", all with company_id 1, finished
	// (no index by tenant but strategic_metadata's).
	if _, err := pool.Exec(ctx, `
		INSERT INTO opsq.submissions_completed (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata, created_at, tenant)
		SELECT i, 1, 1, 0, 0, '', '{}', now(), CASE WHEN i <= 3 THEN 'alpha' ELSE 'beta' END FROM generate_series(1, 3003) i;
		INSERT INTO opsq.strategic_metadata (key, value, submission_id)
		SELECT k.key, k.value, i FROM generate_series(1, 3003) i,
		LATERAL (VALUES ('company_id', '1'::jsonb),
		                ('@tenant', CASE WHEN i <= 3 THEN '"alpha"' ELSE '"beta"' END::jsonb)) k(key, value);
		ANALYZE opsq.strategic_metadata; ANALYZE opsq.submissions_completed`); err != nil {
		t.Fatal(err)
	}
	db := opsqsql.New(pool)
	tenant := "alpha"
	p := opsqsql.SubmissionListParams{Key: "company_id", Value: "1", Tenant: &tenant, Limit: 100}
	if _, _, err := db.SubmissionList(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n := counter.Count(opsqsql.Source("submission_list_by_metadata_tenant.sql")); n != 1 {
		t.Fatalf("a tenant's page by key ran submission_list_by_metadata_tenant.sql %d times; want once", n)
	}

	// What the statement reads, by EXPLAIN ANALYZE: rows of alpha's, not beta's.
	var plan []struct{ Plan map[string]any }
	args := pgx.NamedArgs{"key": "company_id", "value": "1", "tenant_value": `"alpha"`, "limit": 100,
		"after": nil, "state": nil, "phase": nil}
	if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+opsqsql.Source("submission_list_by_metadata_tenant.sql"), args).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	read := rowsRead(plan[0].Plan)
	if read > 50 {
		b, _ := json.MarshalIndent(plan[0].Plan, "", " ")
		t.Errorf("the page of 3 submissions read %.0f rows; want at most 50, whatever another tenant has:\n%s", read, b)
	}
}

// rowsRead sums the rows that the plan's scans of tables read, over their loops: those
// they returned and those their filters removed.
func rowsRead(node map[string]any) float64 {
	var n float64
	if _, ok := node["Relation Name"]; ok {
		rows, _ := node["Actual Rows"].(float64)
		removed, _ := node["Rows Removed by Filter"].(float64)
		loops, _ := node["Actual Loops"].(float64)
		n += (rows + removed) * loops
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				n += rowsRead(m)
			}
		}
	}
	return n
}
