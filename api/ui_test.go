package api

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"opsq/api/apikeys"
	"opsq/sql/pgtest"
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
		"/ui/static/app.js", "/ui/static/style.css", "/ui/submissions?state=paused", "/ui/submissions?state=scheduled",
		"/ui/submissions.json?state=running", "/ui/submissions/" + id + "/chunks/1", "/ui/submissions/" + id + "/failures.json",
		"/ui/cluster?shard=3"} {
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
	for path, want := range map[string]struct {
		status  int
		mention string
	}{
		"/ui/submissions?state=PAUSED":                     {http.StatusOK, "state: must be one of"}, // the form again, saying what is wrong
		"/ui/submissions.json?state=waiting":               {http.StatusBadRequest, "state: must be one of"},
		"/ui/submissions/" + id + "/chunks/2":              {http.StatusNotFound, "no chunk 2"},
		"/ui/submissions/" + id + "/chunks/x":              {http.StatusBadRequest, "index:"},
		"/ui/submissions/" + id + "/chunks/-1":             {http.StatusBadRequest, "index:"},
		"/ui/submissions/" + id + "/chunks?index=":         {http.StatusBadRequest, "index:"},
		"/ui/submissions/" + id + "/failures.json?after=x": {http.StatusBadRequest, "after:"},
		"/ui/submissions/42/failures.json":                 {http.StatusNotFound, "no such submission"},
		"/ui/cluster?shard=64":                             {http.StatusBadRequest, "shard:"},
	} {
		if r := getPath(t, e, path); r.Status != want.status || !strings.Contains(string(r.Body), want.mention) {
			t.Errorf("GET %s: %d %.300s; want %d saying %q", path, r.Status, r.Body, want.status, want.mention)
		}
	}
	if r := getPath(t, e, "/ui/submissions/"+id+"/chunks/1"); !strings.Contains(string(r.Body), `<pre class="blob text" data-kind="text">b</pre>`) {
		t.Errorf("GET /ui/submissions/%s/chunks/1 does not show the input b: %s", id, r.Body)
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
	if got := post("/ui/cluster/action", form, ""); got != http.StatusForbidden || !disabled() {
		t.Errorf("a POST without an Origin: %d, disabled %v; want 403 and nothing done", got, disabled())
	}
	if got := post("/ui/cluster/action", form, e.URL); got != http.StatusSeeOther || disabled() {
		t.Errorf("enable shard 3: %d, disabled %v; want 303 and enabled", got, disabled())
	}
	if got := post("/ui/cluster/action", url.Values{"action": {"drain"}, "target": {"no-such-instance"}}, e.URL); got != http.StatusNotFound {
		t.Errorf("drain an unknown instance: %d; want 404", got)
	}
	if got := post("/ui/submissions/"+id+"/cancel", nil, e.URL); got != http.StatusSeeOther {
		t.Errorf("cancel from the dashboard: %d; want 303", got)
	}
	if got := jsonString(t, statusOf(t, e, id)["state"]); got != "cancelled" {
		t.Errorf("after cancel from the dashboard the state is %s; want cancelled", got)
	}
}

// TestDashboardKeys: with keys on, the dashboard sends a browser without an admin key to
// its login page, refuses other roles' keys, exchanges an admin key for a session whose id
// (never the key) it keeps in an HttpOnly, SameSite=Strict cookie for /ui/ only, Secure
// behind a TLS proxy, and stops taking it at logout (everywhere) and once the key is
// revoked; the cookie is no key for /v1/; every answer forbids framing.
func TestDashboardKeys(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	postForm := func(path string, form url.Values, cookie *http.Cookie, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", a.URL)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	login := func(key string, header ...string) *http.Response {
		t.Helper()
		return postForm("/ui/login", url.Values{"key": {key}, "next": {"/ui/cluster"}}, nil, header...)
	}
	if resp := get("/ui/login", nil); !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the login page's headers %v; want a CSP with frame-ancestors 'none' and X-Frame-Options DENY", resp.Header)
	}
	if resp := postForm("/ui/login", url.Values{"key": {a.key["admin"]}}, nil, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("a login posted from another site: %d, cookies %v; want 403 and no session", resp.StatusCode, resp.Cookies())
	}

	if resp := get("/ui/cluster", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fcluster" {
		t.Errorf("GET /ui/cluster without a key: %d to %q; want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get("/ui/overview.json", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/overview.json without a key: %d; want 401", resp.StatusCode)
	}
	for _, path := range []string{"/ui/login", "/ui/static/style.css"} {
		if resp := get(path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a key: %d; want 200", path, resp.StatusCode)
		}
	}
	for _, key := range []string{a.key["consumer"], "not-a-key"} {
		if resp := login(key); resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 {
			t.Errorf("login with a non-admin key: %d, cookies %v; want the form again and no cookie", resp.StatusCode, resp.Cookies())
		}
	}
	resp := login(a.key["admin"])
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/cluster" || len(resp.Cookies()) != 1 {
		t.Fatalf("login with the admin key: %d to %q, cookies %v; want 303 to /ui/cluster and one cookie", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	ck := resp.Cookies()[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure ||
		ck.Value == "" || strings.Contains(ck.Value, a.key["admin"]) || ck.MaxAge != int(apikeys.SessionTTL/time.Second) {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, Path /ui/, not Secure over plain HTTP, a session id (not the key), 12 h", ck)
	}
	if n := pgtest.Count(t, a.Pool, "SELECT count(*) FROM opsq.ui_sessions WHERE id_sha256 = sha256(convert_to($1, 'UTF8'))", ck.Value); n != 1 {
		t.Errorf("%d sessions stored under the SHA-256 of the cookie's id; want 1", n)
	}
	if behind := login(a.key["admin"], "X-Forwarded-Proto", "https"); len(behind.Cookies()) != 1 || !behind.Cookies()[0].Secure {
		t.Errorf("a login behind a TLS proxy: cookies %v; want one, Secure", behind.Cookies())
	}
	// Logging out ends the session: the id no longer opens a page, here or anywhere.
	other := login(a.key["admin"]).Cookies()[0]
	if resp := postForm("/ui/logout", nil, &http.Cookie{Name: other.Name, Value: other.Value}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d; want 303", resp.StatusCode)
	}
	if resp := get("/ui/cluster", &http.Cookie{Name: other.Name, Value: other.Value}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /ui/cluster with a session ended at logout: %d; want 303 to the login page", resp.StatusCode)
	}
	for _, path := range []string{"/ui/cluster", "/ui/overview.json", "/ui/submissions"} {
		if resp := get(path, &http.Cookie{Name: ck.Name, Value: ck.Value}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %d; want 200", path, resp.StatusCode)
		}
	}
	if resp := get("/v1/cluster", &http.Cookie{Name: ck.Name, Value: ck.Value}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/cluster with only the dashboard's cookie: %d; want 401 (the API takes keys in Authorization only)", resp.StatusCode)
	}
	if _, err := apikeys.Revoke(t.Context(), a.Pool, "admin"); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 2*time.Second, "the revoked key refused by the dashboard", func() bool {
		return get("/ui/cluster", &http.Cookie{Name: ck.Name, Value: ck.Value}).StatusCode == http.StatusSeeOther
	})
}

// TestDashboardTenants: the submissions page shows each submission's tenant and filters by
// it, as its JSON does; a name that cannot be a tenant's is refused.
func TestDashboardTenants(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	acme := mustSubmit(t, e, `{"chunks": ["a"], "tenant": "acme"}`, 1)
	globex := mustSubmit(t, e, `{"chunks": ["b"], "tenant": "globex"}`, 1)
	page := string(getPath(t, e, "/ui/submissions?tenant=acme").Body)
	if !strings.Contains(page, `data-id="`+acme+`"`) || strings.Contains(page, `data-id="`+globex+`"`) ||
		!strings.Contains(page, `<td data-l="tenant">acme</td>`) || !strings.Contains(page, `id="tenant" value="acme"`) {
		t.Errorf("GET /ui/submissions?tenant=acme: want acme's submission %s with its tenant shown, not globex's %s:\n%s", acme, globex, page)
	}
	r := getPath(t, e, "/ui/submissions.json?tenant=globex")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), globex) || strings.Contains(string(r.Body), acme) {
		t.Errorf("GET /ui/submissions.json?tenant=globex: %d %s; want globex's submission only", r.Status, r.Body)
	}
	if r := getPath(t, e, "/ui/submissions/"+globex); !strings.Contains(string(r.Body), `<td id="tenant">globex</td>`) {
		t.Errorf("GET /ui/submissions/%s shows no tenant globex:\n%s", globex, r.Body)
	}
	if r := getPath(t, e, "/ui/submissions.json?tenant=Not+A+Tenant"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "tenant") {
		t.Errorf("GET /ui/submissions.json with a bad tenant: %d %s; want 400 naming tenant", r.Status, r.Body)
	}
}

// TestDashboardSchedules: the schedules page and a schedule's page render a name and a
// template given by a user as text (a schedule named <script>… is no script), and a
// schedule's Pause, Resume and Trigger forms act as the API's verbs do; a submission after
// others links its parents, and a cancelled child names the parent that cancelled it.
func TestDashboardSchedules(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const safe = `<script>alert(1);%y`
	body := `{"name": ` + strconv.Quote(safe) + `, "cron": "@hourly", "timezone": "Europe/Amsterdam",
		"submission": {"chunks": ["a"], "metadata": "<img src=x onerror=alert(2)>"}}`
	if r := httpCall(t, http.MethodPost, e.URL+"/v1/schedules", "application/json", strings.NewReader(body)); r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/schedules: %d %s", r.Status, r.Body)
	}
	page := url.PathEscape("default") + "/" + url.PathEscape(safe)
	for _, path := range []string{"/ui/schedules", "/ui/schedules/" + page} {
		r := getPath(t, e, path)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "<script>alert") || !strings.Contains(string(r.Body), "&lt;script&gt;alert(1);%y") {
			t.Errorf("GET %s does not show the schedule's name as text: %s", path, r.Body)
		}
		if strings.Contains(string(r.Body), "<img") {
			t.Errorf("GET %s renders the template's metadata as HTML: %s", path, r.Body)
		}
	}
	if r := getPath(t, e, "/ui/schedules/default/nope"); r.Status != http.StatusNotFound {
		t.Errorf("GET an unknown schedule: %d; want 404", r.Status)
	}
	if r := getPath(t, e, "/ui/schedules/"+page+"/confirm?action=delete"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "action:") {
		t.Errorf("GET a confirmation of an unknown action: %d %.200s; want 400 naming action", r.Status, r.Body)
	}
	act := func(action, origin string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/ui/schedules/"+page+"/action",
			strings.NewReader(url.Values{"action": {action}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	apiPaused := func() string {
		// The API reads its {name} unescaped only from a path in Go's default escaping (";" as is).
		r := getPath(t, e, "/v1/schedules/"+strings.ReplaceAll(url.PathEscape(safe), "%3B", ";"))
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/schedules/{name}: %d %s", r.Status, r.Body)
		}
		return cmp.Or(string(decodeObject(t, r.Body)["paused"]), "false")
	}
	if got := act("pause", "https://evil.example"); got != http.StatusForbidden || apiPaused() != "false" {
		t.Errorf("a pause from another site: %d, paused %s; want 403 and not paused", got, apiPaused())
	}
	if got := act("pause", e.URL); got != http.StatusSeeOther || apiPaused() != "true" {
		t.Errorf("pause: %d, paused %s; want 303 and paused", got, apiPaused())
	}
	if r := getPath(t, e, "/ui/schedules/"+page); !strings.Contains(string(r.Body), `id="resume"`) {
		t.Errorf("the page of a paused schedule offers no Resume: %s", r.Body)
	}
	if got := act("resume", e.URL); got != http.StatusSeeOther || apiPaused() != "false" {
		t.Errorf("resume: %d, paused %s; want 303 and not paused", got, apiPaused())
	}
	if got := act("trigger", e.URL); got != http.StatusSeeOther {
		t.Errorf("trigger: %d; want 303", got)
	}
	r := getPath(t, e, "/ui/schedules/"+page)
	if !strings.Contains(string(r.Body), `class="run-submission" href="/ui/submissions/`) {
		t.Errorf("after a trigger, the schedule's page links no submission in its last runs: %s", r.Body)
	}

	parent := mustSubmit(t, e, `{"chunks": ["p"]}`, 1)
	child := mustSubmit(t, e, `{"chunks": ["c"], "after": ["`+parent+`"]}`, 1)
	r = getPath(t, e, "/ui/submissions/"+child)
	for _, want := range []string{`class="parent" data-id="` + parent + `" href="/ui/submissions/` + parent + `"`, `id="after-policy">completed`,
		`id="waiting-on"><a href="/ui/submissions/` + parent + `"`} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("the child's page does not show %s: %s", want, r.Body)
		}
	}
	if r := getPath(t, e, "/ui/submissions/"+parent); !strings.Contains(string(r.Body), `class="child" data-id="`+child+`" href="/ui/submissions/`+child+`"`) {
		t.Errorf("the parent's page does not link its child %s: %s", child, r.Body)
	}
	if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+parent+"/cancel", "application/json", nil); r.Status != http.StatusOK {
		t.Fatalf("cancelling the parent: %d %s", r.Status, r.Body)
	}
	want := "parent " + parent + " cancelled"
	var body2 string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if body2 = string(getPath(t, e, "/ui/submissions/"+child).Body); strings.Contains(body2, want) {
			break
		}
	}
	if !strings.Contains(body2, want) || !strings.Contains(body2, `id="waiting-on"><span class="muted">none`) {
		t.Errorf("the cancelled child's page does not name its parent (%q) or still waits: %s", want, body2)
	}
}
