package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"opsq/queuer"
)

// TestSubmitJSONErrors posts bodies that must be refused, each with its status, error code
// and a message naming the field; none may leave anything behind or hurt the server.
func TestSubmitJSONErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxChunkBytes: 100, MaxBody: 10000})
	const bad, large = http.StatusBadRequest, http.StatusRequestEntityTooLarge
	cases := []struct {
		name    string
		body    string
		status  int
		mention string
	}{
		{"malformed JSON", `{"chunks": [`, bad, "body"},
		{"trailing garbage", `{"chunks": []} x`, bad, "body"},
		{"empty body", ``, bad, "body"},
		{"array body", `["a"]`, bad, "body"},
		{"string body", `"a"`, bad, "body"},
		{"number body", `42`, bad, "body"},
		{"null body", `null`, bad, "body"},
		{"unknown field", `{"chunks": ["a"], "chunk": 1}`, bad, "chunk:"},
		{"unknown field, capitalised", `{"Chunks": ["a"]}`, bad, "Chunks"},

		{"chunks a string", `{"chunks": "a"}`, bad, "chunks"},
		{"chunks an object", `{"chunks": {"0": "a"}}`, bad, "chunks"},
		{"chunks[1] a number", `{"chunks": ["a", 1]}`, bad, "chunks[1]"},
		{"chunks[1] an object", `{"chunks": ["a", {"b": 1}]}`, bad, "chunks[1]"},
		{"chunks[1] null", `{"chunks": ["a", null, "c"]}`, bad, "chunks[1]"},
		{"chunks[1] an array", `{"chunks": ["a", ["b"]]}`, bad, "chunks[1]"},

		{"priority a string", `{"priority": "1"}`, bad, "priority"},
		{"priority a float", `{"priority": 1.5}`, bad, "priority"},
		{"priority an exponent", `{"priority": 1e3}`, bad, "priority"},
		{"priority a bool", `{"priority": true}`, bad, "priority"},
		{"priority over int64", `{"priority": 9223372036854775808}`, bad, "priority"},
		{"priority -2^63", `{"priority": -9223372036854775808}`, bad, "priority"},

		{"max_retries negative", `{"max_retries": -1}`, bad, "max_retries"},
		{"max_retries too big", `{"max_retries": 1000001}`, bad, "max_retries"},
		{"max_retries over int64", `{"max_retries": 99999999999999999999}`, bad, "max_retries"},
		{"max_retries a float", `{"max_retries": 2.5}`, bad, "max_retries"},
		{"max_retries a string", `{"max_retries": "3"}`, bad, "max_retries"},

		{"strategic_metadata an array", `{"strategic_metadata": [1]}`, bad, "strategic_metadata"},
		{"strategic_metadata a string", `{"strategic_metadata": "k=1"}`, bad, "strategic_metadata"},
		{"strategic_metadata a number", `{"strategic_metadata": 1}`, bad, "strategic_metadata"},
		{"value a float", `{"strategic_metadata": {"ok": 1, "rate": 1.5}}`, bad, "strategic_metadata.rate"},
		{"value an exponent", `{"strategic_metadata": {"n": 1e2}}`, bad, "strategic_metadata.n"},
		{"value over int64", `{"strategic_metadata": {"n": 9223372036854775808}}`, bad, "strategic_metadata.n"},
		{"value a bool", `{"strategic_metadata": {"flag": true}}`, bad, "strategic_metadata.flag"},
		{"value null", `{"strategic_metadata": {"gone": null}}`, bad, "strategic_metadata.gone"},
		{"value an object", `{"strategic_metadata": {"nested": {"a": 1}}}`, bad, "strategic_metadata.nested"},
		{"value an array", `{"strategic_metadata": {"list": [1, 2]}}`, bad, "strategic_metadata.list"},
		{"value with NUL", `{"strategic_metadata": {"s": "a\u0000b"}}`, bad, "strategic_metadata.s"},
		{"empty key", `{"strategic_metadata": {"": 1}}`, bad, "strategic_metadata"},

		{"metadata a number", `{"metadata": 42}`, bad, "metadata"},
		{"metadata an object", `{"metadata": {"a": "b"}}`, bad, "metadata"},
		{"metadata with NUL", `{"metadata": "a\u0000b"}`, bad, "metadata"},

		{"prefix without chunk_count", `{"prefix": "s3://b/p/"}`, bad, "chunk_count"},
		{"chunk_count without prefix", `{"chunk_count": 3}`, bad, "chunk_count"},
		{"chunks with prefix", `{"prefix": "s3://b/p/", "chunk_count": 1, "chunks": ["a"]}`, bad, "chunks"},
		{"empty chunks with prefix", `{"prefix": "s3://b/p/", "chunk_count": 1, "chunks": []}`, bad, "chunks"},
		{"prefix empty", `{"prefix": "", "chunk_count": 1}`, bad, "prefix"},
		{"prefix a number", `{"prefix": 1, "chunk_count": 1}`, bad, "prefix"},
		{"chunk_count negative", `{"prefix": "s3://b/", "chunk_count": -1}`, bad, "chunk_count"},
		{"chunk_count a string", `{"prefix": "s3://b/", "chunk_count": "3"}`, bad, "chunk_count"},
		{"chunk_count over the chunk index range", `{"prefix": "s3://b/", "chunk_count": 2147483649}`, bad, "chunk_count"},

		{"idempotency_key empty", `{"idempotency_key": ""}`, bad, "idempotency_key"},
		{"idempotency_key a number", `{"idempotency_key": 7}`, bad, "idempotency_key"},
		{"idempotency_key too long", `{"idempotency_key": "` + strings.Repeat("k", 1025) + `"}`, bad, "idempotency_key"},

		{"chunk over the limit", `{"chunks": ["ok", "` + strings.Repeat("x", 101) + `"]}`, large, "chunks[1]"},
		{"escaped chunk over the limit", `{"chunks": ["` + strings.Repeat(`\u00e9`, 51) + `"]}`, large, "chunks[0]"},
		{"body over MaxBody", `{"metadata": "` + strings.Repeat("m", 20000) + `"}`, large, "10000"},
		{"body over MaxBody in many chunks", `{"chunks": [` + strings.Repeat(`"`+strings.Repeat("c", 90)+`",`, 200) + `"c"]}`, large, ""},
	}
	// The cases run one after the other on one database, so that each can check that it
	// left nothing behind.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := postSubmission(t, e, "application/json", tc.body)
			code := "bad_request"
			if tc.status == large {
				code = "too_large"
			}
			var mentions []string
			if tc.mention != "" {
				mentions = append(mentions, tc.mention)
			}
			expectError(t, r, tc.status, code, mentions...)
			expectNothingStored(t, e)
			expectHealthy(t, e)
		})
	}
}

// TestSubmitLimitsBoundaries checks that what is exactly at a limit is accepted.
func TestSubmitLimitsBoundaries(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxChunkBytes: 100, MaxBody: 10000})
	full := strings.Repeat("x", 100)
	escaped := strings.Repeat(`\u00e9`, 50) // 100 bytes once decoded
	id := mustSubmit(t, e, `{"chunks": ["`+full+`", "`+escaped+`"]}`, 2)
	expectChunks(t, e.Pool, id, []string{full, strings.Repeat("é", 50)})

	body := `{"metadata": "` + strings.Repeat("m", 10000-len(`{"metadata": ""}`)) + `"}`
	if len(body) != 10000 {
		t.Fatalf("body of %d bytes; want 10000", len(body))
	}
	mustSubmit(t, e, body, 0)

	// NDJSON has no total limit: 300 chunks of 100 bytes, 30 KB, over MaxBody.
	var b strings.Builder
	b.WriteString("{}\n")
	for range 300 {
		b.WriteString(`"` + full + "\"\n")
	}
	b.WriteString(`"` + escaped + `"`)
	r := postSubmission(t, e, "application/x-ndjson", b.String())
	expectCreated(t, r, http.StatusCreated, 301)
}

// TestSubmitNDJSONTooLarge: a chunk over the chunk limit is a 413 naming its line.
func TestSubmitNDJSONTooLarge(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxChunkBytes: 100, MaxBody: 10000})
	cases := []struct {
		name, body, mention string
	}{
		{"chunk over the limit", "{}\n\"a\"\n\"" + strings.Repeat("x", 101) + "\"\n\"b\"\n", "line 3"},
		{"escaped chunk over the limit", "{}\n\"" + strings.Repeat(`\u00e9`, 51) + "\"\n", "line 2"},
		{"line far over the limit", "{}\n\"a\"\n\"b\"\n\"" + strings.Repeat("x", 5000) + "\"\n", "line 4"},
		{"line over the limit after empty lines", "{}\n\n\n\"" + strings.Repeat("y", 101) + "\"", "line 4"},
		{"header over MaxBody", `{"metadata": "` + strings.Repeat("m", 20000) + "\"}\n\"a\"\n", "line 1"},
	}
	// One after the other on one database, so that each case checks what it left behind.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := postSubmission(t, e, "application/x-ndjson", tc.body)
			expectError(t, r, http.StatusRequestEntityTooLarge, "too_large", tc.mention)
			expectNothingStored(t, e)
			expectHealthy(t, e)
		})
	}
}

func TestRoutesAndMethods(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/nope", http.StatusNotFound, "unknown_route"},
		{http.MethodGet, "/nope", http.StatusNotFound, "unknown_route"},
		{http.MethodPost, "/v2/submissions", http.StatusNotFound, "unknown_route"},
		{http.MethodGet, "/v1/submissions/1/nope", http.StatusNotFound, "unknown_route"},
		{http.MethodGet, "/v1/submision/1", http.StatusNotFound, "unknown_route"},
		{http.MethodGet, "/v1/v1/submissions/1", http.StatusNotFound, "unknown_route"},
		{http.MethodDelete, "/v1/submissions", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPut, "/v1/submissions", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/v1/submissions/1/cancel", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodDelete, "/v1/submissions/1", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPost, "/v1/submissions/1/results", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			r := httpCall(t, tc.method, e.URL+tc.path, "application/json", strings.NewReader("{}"))
			expectError(t, r, tc.status, tc.code, tc.path)
		})
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		t.Run("GET "+path, func(t *testing.T) {
			t.Parallel()
			r := getPath(t, e, path)
			if r.Status != http.StatusOK {
				t.Fatalf("GET %s: status %d (%s); want 200", path, r.Status, r.Body)
			}
			expectJSONType(t, r)
		})
	}
}

// TestReadyzNotReady: a failing readiness check is a 503 in the error shape that says
// "not ready" and nothing more: the reason (here naming the database's user, host, port
// and name) goes to the log only, once while it stays the same (DESIGN.md §8).
func TestReadyzNotReady(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const reason = "database unreachable: failed to connect to `user=opsq database=prod`: 10.1.2.3:5432"
	var logged syncBuffer
	srv := httptest.NewServer(New(Config{
		Queuer: e.Q,
		Ready:  func(context.Context) error { return errors.New(reason) },
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
	}))
	defer srv.Close()
	for range 3 {
		r := httpCall(t, http.MethodGet, srv.URL+"/readyz", "", nil)
		expectError(t, r, http.StatusServiceUnavailable, "not_ready", "not ready")
		for _, secret := range []string{"opsq", "prod", "10.1.2.3", "5432", "database"} {
			if strings.Contains(string(r.Body), secret) {
				t.Errorf("/readyz body %s mentions %q; want ready or not, nothing more", r.Body, secret)
			}
		}
	}
	if n := strings.Count(logged.String(), "10.1.2.3:5432"); n != 1 {
		t.Errorf("the reason was logged %d times over 3 probes; want once:\n%s", n, logged.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use (a logger's output).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReserveTimeoutIs503 (issue 31, finding 8): a reserve whose candidate reads ran past
// their bound is the database's state, not a fault: 503 unavailable with Retry-After,
// never 500.
func TestReserveTimeoutIs503(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("reserving: %w", fmt.Errorf("%w (10s): reading candidates: timeout: %w", queuer.ErrReserveTimeout, context.DeadlineExceeded))
	got := toError(err, nil)
	if got.Status != http.StatusServiceUnavailable || got.Code != "unavailable" || got.RetryAfter <= 0 {
		t.Errorf("a reserve's run past its bound: %d %s, Retry-After %s; want 503 unavailable with Retry-After", got.Status, got.Code, got.RetryAfter)
	}
}
