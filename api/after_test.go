package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// POST /v1/submissions with after and after_policy (DESIGN.md §3 "Dependencies"): each
// bad parent is a 400 naming after[i] (unknown, another tenant's and malformed alike),
// in JSON and NDJSON, leaving nothing; a good child's status shows after and waiting_on,
// and a cancelled parent cancels it, its failure naming the parent.
func TestSubmitAfter(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	parent := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	theirs := mustSubmit(t, e, `{"chunks": ["a"], "tenant": "other"}`, 1)
	many := `"` + strings.Repeat(parent+`", "`, 100) + parent + `"`
	for _, tc := range []struct {
		name, fields, wantField string
	}{
		{"not an array", `"after": "` + parent + `"`, "after"},
		{"a number", `"after": [` + parent + `]`, "after[0]"},
		{"not decimal", `"after": ["` + parent + `", "12ab"]`, "after[1]"},
		{"zero", `"after": ["0"]`, "after[0]"},
		{"unknown", `"after": ["` + parent + `", "999"]`, "after[1]"},
		{"another tenant's", `"after": ["` + theirs + `"]`, "after[0]"},
		{"101 parents", `"after": [` + many + `]`, "after"},
		{"bad policy", `"after": ["` + parent + `"], "after_policy": "sometimes"`, "after_policy"},
		{"policy not a string", `"after_policy": 1`, "after_policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectFieldError(t, postSubmission(t, e, "application/json", `{"chunks": ["b"], `+tc.fields+`}`), tc.wantField)
			expectFieldError(t, postSubmission(t, e, "application/x-ndjson", `{`+tc.fields+"}\n\"b\"\n"), tc.wantField)
		})
	}
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.submission_status"); n != 2 {
		t.Fatalf("%d submissions after the refused ones; want the 2 parents", n)
	}

	strict := mustSubmit(t, e, `{"chunks": ["b"], "after": ["`+parent+`"]}`, 1)
	loose := expectCreated(t, postSubmission(t, e, "application/x-ndjson",
		`{"after": ["`+parent+`", "`+parent+`"], "after_policy": "finished"}`+"\n\"b\"\n"), http.StatusCreated, 1)
	st := statusOf(t, e, strict)
	expectField(t, st, "after", `["`+parent+`"]`)
	expectField(t, st, "waiting_on", `["`+parent+`"]`)
	expectField(t, st, "after_policy", `"completed"`)
	expectField(t, statusOf(t, e, loose), "after", `["`+parent+`"]`) // named twice, one parent
	if _, ok := statusOf(t, e, parent)["after"]; ok {
		t.Errorf("a submission without after shows after in its status; want the field left out")
	}

	if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+parent+"/cancel", "application/json", strings.NewReader("{}")); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	pgtest.Eventually(t, 30*time.Second, "the strict child cancelled", func() bool {
		return jsonString(t, statusOf(t, e, strict)["state"]) == "cancelled"
	})
	st = statusOf(t, e, strict)
	expectField(t, st, "failure", fmt.Sprintf(`{"error": "parent %s cancelled"}`, parent))
	if _, ok := st["waiting_on"]; ok {
		t.Errorf("a child whose parent finished shows waiting_on %s; want it left out", st["waiting_on"])
	}
	pgtest.Eventually(t, 30*time.Second, "the loose child's chunk reservable", func() bool {
		return pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", mustInt64(t, loose)) == 1
	})
}
