package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

// authEnv is an API server that requires keys, and a key of each role.
type authEnv struct {
	*env
	keys *apikeys.Set
	// key is a key of each role, by name: "producer" (tenant default), "producer2" (tenant
	// beta), "consumer" (every tenant), "consumer2" (beta only), "metrics", "admin".
	key  map[string]string
	logs *bytes.Buffer
}

type lockedWriter struct {
	mu  chan struct{}
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu <- struct{}{}
	defer func() { <-w.mu }()
	return w.buf.Write(p)
}

func setupAuth(t *testing.T) *authEnv {
	t.Helper()
	return setupAuthWith(t, Config{})
}

// setupAuthWith is setupAuth with cfg's limits (zero: the defaults), served as opsq serve
// serves (ConnContext).
func setupAuthWith(t *testing.T, cfg Config) *authEnv {
	t.Helper()
	return setupAuthOn(t, cfg, pgtest.NewPool(t), nil)
}

// setupAuthOn is setupAuthWith on pool, its handler wrapped in wrap (nil: none).
func setupAuthOn(t *testing.T, cfg Config, pool *pgxpool.Pool, wrap func(http.Handler) http.Handler) *authEnv {
	t.Helper()
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(lockedWriter{mu: make(chan struct{}, 1), buf: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	set := apikeys.NewSet(pool, log)
	if err := set.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Stop)
	q := queuertest.Start(t, queuer.Config{Pool: pool, Logger: log, Notified: map[string]func(string){apikeys.Channel: set.Notified}})
	cfg.Queuer, cfg.Keys, cfg.Logger = q, set, log
	h := New(cfg)
	var served http.Handler = h
	if wrap != nil {
		served = wrap(h)
	}
	srv := httptest.NewUnstartedServer(served)
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	a := &authEnv{env: &env{URL: srv.URL, Q: q, Pool: pool, H: h, Limit: cfg}, keys: set, key: map[string]string{}, logs: logs}
	for name, spec := range map[string]apikeys.Spec{
		"producer": {Role: apikeys.Producer}, "producer2": {Role: apikeys.Producer, Tenant: "beta"},
		"consumer": {Role: apikeys.Consumer}, "consumer2": {Role: apikeys.Consumer, Tenants: []string{"beta"}},
		"metrics": {Role: apikeys.Metrics}, "admin": {Role: apikeys.Admin},
	} {
		spec.Name = name
		_, key, err := apikeys.CreateSpec(t.Context(), pool, spec)
		if err != nil {
			t.Fatal(err)
		}
		a.key[name] = key
	}
	pgtest.Eventually(t, time.Second, "the instance knowing the new keys", func() bool {
		for _, k := range a.key {
			if _, err := set.Check(k); err != nil {
				return false
			}
		}
		return true
	})
	return a
}

// call sends a request with key ("" for none) and reads the whole answer.
func (a *authEnv) call(t *testing.T, key, method, path, body string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, a.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (a *authEnv) submit(t *testing.T, key string) string {
	t.Helper()
	r := a.call(t, key, http.MethodPost, "/v1/submissions", `{"chunks": ["a"]}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	var c struct{ ID string }
	if err := json.Unmarshal(r.Body, &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func expectUnauthorized(t *testing.T, r reply, mentions ...string) {
	t.Helper()
	expectError(t, r, http.StatusUnauthorized, "unauthorized", mentions...)
	if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate %q; want Bearer", got)
	}
}

// TestAuthMatrix: every route of Routes, with no key and with a key of each role, gets the
// status Routes gives it; "allowed" is anything but 401 and 403 (an empty body may be a
// 400, an unknown id a 404). Routes must list every route the server registers. The
// dashboard's routes, which take their key from a cookie, and the same matrix on real
// instances are cmd/opsq/authmatrix_test.go's.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	// One keyless call per route: more than the default bound of failures per address.
	a := setupAuthWith(t, Config{AuthFailuresPerSecond: 1000})
	id := a.submit(t, a.key["producer"])

	var listed []string
	for _, r := range Routes {
		listed = append(listed, r.Method+" "+r.Path)
	}
	for _, r := range a.H.Handler.(*echo.Echo).Routes() {
		switch route := r.Method + " " + r.Path; {
		case r.Method == echo.RouteNotFound:
		case !slices.Contains(listed, route):
			t.Errorf("the server registers %s; Routes (auth.go) does not give its roles", route)
		default:
			listed = slices.DeleteFunc(listed, func(l string) bool { return l == route })
		}
	}
	for _, l := range listed {
		t.Errorf("Routes (auth.go) lists %s; the server does not register it", l)
	}

	for _, r := range Routes {
		if r.Dashboard {
			continue
		}
		path := strings.ReplaceAll(r.Path, ":id", id)
		if r.Own {
			path = strings.ReplaceAll(r.Path, ":id", "999") // cancelling nothing; TestAuthProducerCancelsItsOwn cancels
		}
		body := ""
		if r.Method == http.MethodPost {
			body = "{}"
		}
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			if r.Open() {
				if got := a.call(t, "", r.Method, path, body); got.Status != http.StatusOK {
					t.Errorf("without a key: %d %s; want 200", got.Status, got.Body)
				}
				return
			}
			expectUnauthorized(t, a.call(t, "", r.Method, path, body), "Authorization: Bearer")
			for _, role := range apikeys.Roles {
				got := a.call(t, a.key[string(role)], r.Method, path, body)
				switch {
				case r.Allows(role) && (got.Status == http.StatusUnauthorized || got.Status == http.StatusForbidden):
					t.Errorf("%s key: %d %s; want it let through", role, got.Status, got.Body)
				case !r.Allows(role):
					expectError(t, got, http.StatusForbidden, "forbidden", string(role))
					if h := got.Header.Get("WWW-Authenticate"); !strings.Contains(h, "insufficient_scope") {
						t.Errorf("%s key: WWW-Authenticate %q; want Bearer with insufficient_scope", role, h)
					}
				}
			}
		})
	}
	// An unknown route is 404 with or without a key.
	if r := a.call(t, "", http.MethodGet, "/v1/nothing", ""); r.Status != http.StatusNotFound {
		t.Errorf("GET /v1/nothing without a key: %d; want 404", r.Status)
	}
}

func TestAuthRefusesBadKeys(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	for name, header := range map[string]string{
		"unknown":      "Bearer " + apikeys.Generate(),
		"basic scheme": "Basic " + a.key["admin"],
		"empty bearer": "Bearer ",
		"no scheme":    a.key["admin"],
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL+"/v1/submissions", nil)
		req.Header.Set("Authorization", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Run(name, func(t *testing.T) { expectUnauthorized(t, reply{resp.StatusCode, resp.Header, b}) })
	}
	// Lower-case "bearer" is the same scheme (RFC 7235).
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL+"/v1/submissions", nil)
	req.Header.Set("Authorization", "bearer "+a.key["admin"])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("bearer in lower case: %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// Revoked: refused within a second, saying so.
	if _, err := apikeys.Revoke(t.Context(), a.Pool, "consumer"); err != nil {
		t.Fatal(err)
	}
	took := pgtest.Eventually(t, time.Second, "the revoked key refused", func() bool {
		return a.call(t, a.key["consumer"], http.MethodPost, "/v1/reserve", `{}`).Status == http.StatusUnauthorized
	})
	t.Logf("revocation took effect after %s", took)
	expectUnauthorized(t, a.call(t, a.key["consumer"], http.MethodPost, "/v1/reserve", `{}`), "revoked")

	// Expired.
	_, short, err := apikeys.Create(t.Context(), a.Pool, "short", apikeys.Admin, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 3*time.Second, "the expired key refused", func() bool {
		r := a.call(t, short, http.MethodGet, "/v1/cluster", "")
		return r.Status == http.StatusUnauthorized && strings.Contains(string(r.Body), "expired")
	})

	// No key, nor any part of one, reaches the log or an answer.
	logs := a.logs.String()
	for name, key := range a.key {
		if strings.Contains(logs, key) || strings.Contains(logs, key[len(apikeys.Prefix):len(apikeys.Prefix)+12]) {
			t.Errorf("the log holds the %s key", name)
		}
	}
}

// TestAuthTenants: nothing of one tenant's submissions is visible or actionable with
// another tenant's keys — an id of another tenant is answered as an unknown id, route by
// route — while an admin key sees and acts on every tenant; idempotency keys are per
// tenant; a consumer limited to a tenant reserves only its chunks, and another's token is
// unknown to it.
func TestAuthTenants(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	mine := a.submit(t, a.key["producer"])
	theirs := a.submit(t, a.key["producer2"])

	unknown := a.call(t, a.key["producer"], http.MethodGet, "/v1/submissions/999", "")
	expectError(t, unknown, http.StatusNotFound, "not_found")
	for _, r := range submissionIDRoutes {
		for _, who := range []struct{ key, id string }{{"producer", theirs}, {"producer2", mine}, {"consumer2", mine}} {
			if who.key == "consumer2" && !r.consumers {
				continue // not a consumer's route: 403 whatever the id
			}
			path := strings.Replace(r.path, "%s", who.id, 1)
			got := a.call(t, a.key[who.key], r.method, path, r.body)
			expectError(t, got, http.StatusNotFound, "not_found")
			if !bytes.Equal(got.Body, unknown.Body) {
				t.Errorf("%s %s with %s: %s; want the answer for an unknown id, %s", r.method, path, who.key, got.Body, unknown.Body)
			}
		}
	}
	// Still there, untouched: another tenant's cancel did nothing.
	for _, who := range []struct{ key, id, tenant string }{{"producer", mine, "default"}, {"producer2", theirs, "beta"}, {"admin", theirs, "beta"}} {
		r := a.call(t, a.key[who.key], http.MethodGet, "/v1/submissions/"+who.id, "")
		var st struct{ State, Tenant string }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &st) != nil || st.State != "in_progress" || st.Tenant != who.tenant {
			t.Errorf("%s reading %s: %d %s; want 200, in_progress, tenant %s", who.key, who.id, r.Status, r.Body, who.tenant)
		}
	}

	// Lists: a producer sees its tenant's only; an admin every tenant, or one.
	list := func(key, query string) []string {
		t.Helper()
		r := a.call(t, key, http.MethodGet, "/v1/submissions"+query, "")
		var page struct{ Submissions []struct{ ID, Tenant string } }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil {
			t.Fatalf("list%s: %d %s", query, r.Status, r.Body)
		}
		var ids []string
		for _, s := range page.Submissions {
			ids = append(ids, s.ID+"@"+s.Tenant)
		}
		return ids
	}
	for _, c := range []struct {
		key, query string
		want       []string
	}{
		{"producer", "", []string{mine + "@default"}},
		{"producer", "?tenant=default", []string{mine + "@default"}},
		{"producer2", "", []string{theirs + "@beta"}},
		{"producer2", "?state=in_progress", []string{theirs + "@beta"}},
		{"admin", "", []string{theirs + "@beta", mine + "@default"}},
		{"admin", "?tenant=beta", []string{theirs + "@beta"}},
	} {
		if got := list(a.key[c.key], c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s lists%s: %v; want %v", c.key, c.query, got, c.want)
		}
	}
	expectError(t, a.call(t, a.key["producer"], http.MethodGet, "/v1/submissions?tenant=beta", ""), http.StatusForbidden, "forbidden")
	expectError(t, a.call(t, a.key["producer"], http.MethodGet, "/v1/submissions?tenant=Beta!", ""), http.StatusBadRequest, "", "tenant")

	// Submitting: a producer's tenant is its key's; an admin names any.
	expectError(t, a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions", `{"chunks": ["x"], "tenant": "beta"}`), http.StatusForbidden, "forbidden", "tenant")
	expectError(t, a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions", `{"chunks": ["x"], "strategic_metadata": {"@tenant": "beta"}}`), http.StatusBadRequest, "", "@tenant")
	if r := a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions", `{"chunks": ["x"], "tenant": "default"}`); r.Status != http.StatusCreated {
		t.Errorf("a producer naming its own tenant: %d %s; want 201", r.Status, r.Body)
	}
	byAdmin := a.call(t, a.key["admin"], http.MethodPost, "/v1/submissions", `{"chunks": ["x"], "tenant": "gamma"}`)
	var created struct{ ID string }
	if byAdmin.Status != http.StatusCreated || json.Unmarshal(byAdmin.Body, &created) != nil {
		t.Fatalf("admin submitting for gamma: %d %s", byAdmin.Status, byAdmin.Body)
	}
	if got := list(a.key["admin"], "?tenant=gamma"); !slices.Equal(got, []string{created.ID + "@gamma"}) {
		t.Errorf("gamma's list: %v; want the admin's submission", got)
	}

	// Idempotency keys are per tenant: the same text is another key in another tenant.
	idem := func(key string) reply {
		return a.call(t, key, http.MethodPost, "/v1/submissions", `{"chunks": ["x"], "idempotency_key": "run-7"}`)
	}
	first, again, other := idem(a.key["producer"]), idem(a.key["producer"]), idem(a.key["producer2"])
	if first.Status != http.StatusCreated || again.Status != http.StatusOK || other.Status != http.StatusCreated {
		t.Fatalf("run-7 by producer, again, by producer2: %d, %d, %d; want 201, 200, 201", first.Status, again.Status, other.Status)
	}
	if bytes.Equal(first.Body, other.Body) {
		t.Errorf("producer2's run-7 got producer's submission back: %s", other.Body)
	}

	// Consumers: consumer2 (beta only) reserves beta's chunks only; a token of another
	// tenant's chunk is unknown to it, and stays the consumer's to complete.
	reserve := func(key string) []string {
		t.Helper()
		r := a.call(t, key, http.MethodPost, "/v1/reserve", `{"max": 100, "strategy": "oldest_first"}`)
		var got struct {
			Chunks []struct {
				Token        string
				SubmissionID string `json:"submission_id"`
			}
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
			t.Fatalf("reserve: %d %s", r.Status, r.Body)
		}
		var out []string
		for _, c := range got.Chunks {
			out = append(out, c.SubmissionID, c.Token)
		}
		return out
	}
	preview := a.call(t, a.key["consumer2"], http.MethodPost, "/v1/reserve/preview", `{"max": 100}`)
	if preview.Status != http.StatusOK || bytes.Contains(preview.Body, []byte(mine)) || !bytes.Contains(preview.Body, []byte(theirs)) {
		t.Errorf("consumer2's preview: %d %s; want beta's chunks only", preview.Status, preview.Body)
	}
	got2 := reserve(a.key["consumer2"])
	for i := 0; i < len(got2); i += 2 {
		if st := a.call(t, a.key["admin"], http.MethodGet, "/v1/submissions/"+got2[i], ""); !bytes.Contains(st.Body, []byte(`"tenant":"beta"`)) {
			t.Errorf("consumer2 reserved a chunk of %s: %s; want beta's only", got2[i], st.Body)
		}
	}
	if len(got2) != 4 { // theirs and producer2's run-7
		t.Errorf("consumer2 reserved %d chunks; want 2, beta's", len(got2)/2)
	}
	got := reserve(a.key["consumer"])
	if len(got) != 8 { // mine, the producer's two others, gamma's
		t.Fatalf("consumer reserved %d chunks; want the other 4", len(got)/2)
	}
	tok := got[1]
	for _, r := range []struct{ path, body, want string }{
		{"/v1/complete", `{"completions": [{"token": "` + tok + `", "output": "x"}, {"token": "` + got2[1] + `", "output": "y"}]}`, `"status":"unknown"},{"token":"` + got2[1] + `","status":"completed"`},
		{"/v1/fail", `{"failures": [{"token": "` + tok + `", "error": "x"}]}`, `"status":"unknown"`},
		{"/v1/extend", `{"tokens": ["` + tok + `"]}`, `"status":"unknown"`},
	} {
		if got := a.call(t, a.key["consumer2"], http.MethodPost, r.path, r.body); got.Status != http.StatusOK || !bytes.Contains(got.Body, []byte(r.want)) {
			t.Errorf("consumer2 %s of another tenant's token: %d %s; want 200 with %s", r.path, got.Status, got.Body, r.want)
		}
	}
	if r := a.call(t, a.key["consumer"], http.MethodPost, "/v1/complete", `{"completions": [{"token": "`+tok+`", "output": "x"}]}`); !bytes.Contains(r.Body, []byte(`"completed"`)) {
		t.Errorf("the consumer completing its chunk after consumer2 tried: %s; want completed", r.Body)
	}

	// Quotas: beta may have one submission in progress (it has run-7), then 3 chunks
	// pending (it has run-7's).
	if _, err := a.Pool.Exec(t.Context(), `INSERT INTO opsq.tenants (name, max_in_progress) VALUES ('beta', 1)`); err != nil {
		t.Fatal(err)
	}
	r := a.call(t, a.key["producer2"], http.MethodPost, "/v1/submissions", `{"chunks": ["x"]}`)
	expectError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_in_progress")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("quota_exceeded without Retry-After")
	}
	if _, err := a.Pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_in_progress = NULL, max_pending_chunks = 3 WHERE name = 'beta'`); err != nil {
		t.Fatal(err)
	}
	// theirs is done (consumer2 completed its chunk); run-7's chunk is pending.
	expectError(t, a.call(t, a.key["producer2"], http.MethodPost, "/v1/submissions", `{"chunks": ["x", "y", "z"]}`), http.StatusTooManyRequests, "quota_exceeded", "max_pending_chunks")
	if r := a.call(t, a.key["producer2"], http.MethodPost, "/v1/submissions", `{"chunks": ["x", "y"]}`); r.Status != http.StatusCreated {
		t.Errorf("beta within its quota: %d %s; want 201", r.Status, r.Body)
	}
	if r := a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions", `{"chunks": ["x", "y", "z", "w"]}`); r.Status != http.StatusCreated {
		t.Errorf("default, which has no quota: %d %s; want 201", r.Status, r.Body)
	}
}

// TestAuthOffNeedsNoKey: without Config.Keys every route answers without a key, and a
// submission records no key.
func TestAuthOffNeedsNoKey(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	for _, path := range []string{"/v1/cluster", "/metrics", "/v1/submissions/" + id} {
		if r := getPath(t, e, path); r.Status != http.StatusOK {
			t.Errorf("GET %s: %d; want 200", path, r.Status)
		}
	}
	var owner *int64
	err := e.Pool.QueryRow(t.Context(), "SELECT created_by_key FROM opsq.submissions WHERE id = $1", mustInt64(t, id)).Scan(&owner)
	if err != nil || owner != nil {
		t.Errorf("created_by_key %v, %v; want null", owner, err)
	}
}

// submissionIDRoutes are the routes on one submission's id, a path with %s for the id;
// consumers: a consumer key may call it too.
var submissionIDRoutes = []struct {
	method, path, body string
	consumers          bool
}{
	{http.MethodGet, "/v1/submissions/%s", "", true},
	{http.MethodGet, "/v1/submissions/%s?wait=1s", "", true},
	{http.MethodGet, "/v1/submissions/%s/results", "", false},
	{http.MethodGet, "/v1/submissions/%s/results?follow=true", "", false},
	{http.MethodGet, "/v1/submissions/%s/failures", "", false},
	{http.MethodPost, "/v1/submissions/%s/cancel", "", false},
	{http.MethodPost, "/v1/submissions/%s/retry", "{}", false},
	{http.MethodPost, "/v1/submissions/%s/pause", "", false},
	{http.MethodPost, "/v1/submissions/%s/resume", "", false},
}
