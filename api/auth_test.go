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
	key  map[string]string // by role; "producer2" is a second producer
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
	pool := pgtest.NewPool(t)
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(lockedWriter{mu: make(chan struct{}, 1), buf: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	set := apikeys.NewSet(pool, log)
	if err := set.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Stop)
	q := queuertest.Start(t, queuer.Config{Pool: pool, Logger: log, Notified: map[string]func(string){apikeys.Channel: set.Notified}})
	h := New(Config{Queuer: q, Keys: set, Logger: log})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	a := &authEnv{env: &env{URL: srv.URL, Q: q, Pool: pool, H: h}, keys: set, key: map[string]string{}, logs: logs}
	for name, role := range map[string]apikeys.Role{
		"producer": apikeys.Producer, "producer2": apikeys.Producer, "consumer": apikeys.Consumer,
		"metrics": apikeys.Metrics, "admin": apikeys.Admin,
	} {
		_, key, err := apikeys.Create(t.Context(), pool, name, role, 0)
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
	a := setupAuth(t)
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

// TestAuthProducerCancelsItsOwn: a producer key cancels the submissions it created, and no
// other; an admin key cancels any.
func TestAuthProducerCancelsItsOwn(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	mine := a.submit(t, a.key["producer"])
	theirs := a.submit(t, a.key["producer2"])
	byAdmin := a.submit(t, a.key["admin"])

	expectError(t, a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions/"+theirs+"/cancel", ""),
		http.StatusForbidden, "forbidden", "did not create")
	expectError(t, a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions/"+byAdmin+"/cancel", ""),
		http.StatusForbidden, "forbidden")
	if r := a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions/"+mine+"/cancel", ""); r.Status != http.StatusOK {
		t.Errorf("cancelling its own: %d %s; want 200", r.Status, r.Body)
	}
	// Already cancelled: the usual 409, not 403.
	expectError(t, a.call(t, a.key["producer"], http.MethodPost, "/v1/submissions/"+mine+"/cancel", ""), http.StatusConflict, "already_finished")
	if r := a.call(t, a.key["admin"], http.MethodPost, "/v1/submissions/"+theirs+"/cancel", ""); r.Status != http.StatusOK {
		t.Errorf("admin cancelling a producer's: %d %s; want 200", r.Status, r.Body)
	}
	// Anyone's submission may be read by a producer or consumer.
	if r := a.call(t, a.key["consumer"], http.MethodGet, "/v1/submissions/"+byAdmin, ""); r.Status != http.StatusOK {
		t.Errorf("consumer reading a status: %d %s; want 200", r.Status, r.Body)
	}
	var owner *int64
	if err := a.Pool.QueryRow(t.Context(), "SELECT created_by_key FROM opsq.submissions WHERE id = $1", mustInt64(t, byAdmin)).Scan(&owner); err != nil || owner == nil {
		t.Errorf("created_by_key of the admin's submission: %v, %v; want the admin key's id", owner, err)
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
