package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDashboardRoutes: every page of the dashboard renders, its JSON answers, and the
// cluster actions run the sql/admin recipes; a POST from another site is refused. The
// browser test (cmd/opsq, TestDashboard) drives the same pages in Chromium.
func TestDashboardRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b"], "strategic_metadata": {"company_id": 7}}`, 2)
	for _, path := range []string{"/ui/", "/ui/overview.json", "/ui/submissions", "/ui/submissions?state=in_progress&key=company_id&value=7",
		"/ui/submissions/" + id, "/ui/submissions/" + id + "/cancel", "/ui/cluster", "/ui/cluster.json",
		"/ui/cluster/confirm?action=disable&target=3", "/ui/strategy?strategy=oldest_first", "/ui/strategy?strategy=bogus",
		"/ui/static/app.js", "/ui/static/style.css"} {
		r := getPath(t, e, path)
		if r.Status != http.StatusOK {
			t.Errorf("GET %s: %d %s; want 200", path, r.Status, r.Body)
		}
	}
	if r := getPath(t, e, "/ui/submissions/"+id); !strings.Contains(string(r.Body), `data-total="2"`) {
		t.Errorf("GET /ui/submissions/%s shows no progress bar of 2 chunks: %s", id, r.Body)
	}
	if r := getPath(t, e, "/ui/submissions/42"); r.Status != http.StatusNotFound {
		t.Errorf("GET /ui/submissions/42: %d; want 404", r.Status)
	}

	post := func(path string, form url.Values, origin string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	disabled := func() bool {
		var d bool
		if err := e.Pool.QueryRow(t.Context(), "SELECT disabled FROM opsq.shard_claims WHERE shard = 3").Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	form := url.Values{"action": {"disable"}, "target": {"3"}}
	if got := post("/ui/cluster/action", form, "http://evil.example"); got != http.StatusForbidden || disabled() {
		t.Errorf("a cross-site POST: %d, shard 3 disabled %v; want 403 and nothing done", got, disabled())
	}
	if got := post("/ui/cluster/action", form, e.URL); got != http.StatusSeeOther || !disabled() {
		t.Errorf("disable shard 3: %d, disabled %v; want 303 and disabled", got, disabled())
	}
	form.Set("action", "enable")
	if got := post("/ui/cluster/action", form, ""); got != http.StatusSeeOther || disabled() {
		t.Errorf("enable shard 3: %d, disabled %v; want 303 and enabled", got, disabled())
	}
	if got := post("/ui/cluster/action", url.Values{"action": {"drain"}, "target": {"no-such-instance"}}, ""); got != http.StatusNotFound {
		t.Errorf("drain an unknown instance: %d; want 404", got)
	}
	if got := post("/ui/submissions/"+id+"/cancel", nil, ""); got != http.StatusSeeOther {
		t.Errorf("cancel from the dashboard: %d; want 303", got)
	}
	if got := jsonString(t, statusOf(t, e, id)["state"]); got != "cancelled" {
		t.Errorf("after cancel from the dashboard the state is %s; want cancelled", got)
	}
}
