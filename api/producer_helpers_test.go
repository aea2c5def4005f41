package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pgtest"
)

// Helpers of the producer API tests: plain net/http, so that status codes, headers and
// bodies are checked exactly as a client sees them.

// reply is a whole HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// httpCall sends one request and reads the whole answer. contentType "" sends no
// Content-Type header at all.
func httpCall(t *testing.T, method, url, contentType string, body io.Reader) reply {
	t.Helper()
	return httpCallContext(t, t.Context(), method, url, contentType, body)
}

func httpCallContext(t *testing.T, ctx context.Context, method, url, contentType string, body io.Reader) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// postSubmission posts body to /v1/submissions with the given Content-Type.
func postSubmission(t *testing.T, e *env, contentType, body string) reply {
	t.Helper()
	return httpCall(t, http.MethodPost, e.URL+"/v1/submissions", contentType, strings.NewReader(body))
}

// getPath sends a GET to the server.
func getPath(t *testing.T, e *env, path string) reply {
	t.Helper()
	return httpCall(t, http.MethodGet, e.URL+path, "", nil)
}

var decimalID = regexp.MustCompile(`^[1-9][0-9]*$`)

// expectCreated checks a 201 (or 200 for an idempotent repeat) answer to a submission:
// exactly {"id": "<decimal>", "chunks_total": n}. It returns the id.
func expectCreated(t *testing.T, r reply, status int, chunksTotal int64) string {
	t.Helper()
	if r.Status != status {
		t.Fatalf("POST /v1/submissions: status %d (%s); want %d", r.Status, r.Body, status)
	}
	expectJSONType(t, r)
	fields := decodeObject(t, r.Body)
	if len(fields) != 2 {
		t.Errorf("answer %s has %d fields; want exactly id and chunks_total", r.Body, len(fields))
	}
	var id string
	if err := json.Unmarshal(fields["id"], &id); err != nil || !decimalID.MatchString(id) {
		t.Fatalf("id %s; want a positive decimal integer in a JSON string", fields["id"])
	}
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		t.Fatalf("id %q does not fit an int64: %v", id, err)
	}
	if got := string(fields["chunks_total"]); got != strconv.FormatInt(chunksTotal, 10) {
		t.Fatalf("chunks_total %s; want %d", got, chunksTotal)
	}
	return id
}

// mustSubmit posts a JSON submission and expects 201 with chunksTotal chunks.
func mustSubmit(t *testing.T, e *env, body string, chunksTotal int64) string {
	t.Helper()
	return expectCreated(t, postSubmission(t, e, "application/json", body), http.StatusCreated, chunksTotal)
}

func expectJSONType(t *testing.T, r reply) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q; want application/json", ct)
	}
}

// decodeObject decodes a JSON object one level deep, numbers kept as they were written.
func decodeObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		t.Fatalf("answer %q: want a JSON object (%v)", b, err)
	}
	return m
}

var snakeCode = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// expectError checks an error answer: the status, the body
// {"error": {"code": code, "message": "…"}} with nothing else in it, and that the message
// contains each of mentions.
func expectError(t *testing.T, r reply, status int, code string, mentions ...string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d (%s); want %d", r.Status, r.Body, status)
		return
	}
	expectJSONType(t, r)
	outer := decodeObject(t, r.Body)
	if len(outer) != 1 || outer["error"] == nil {
		t.Errorf("body %s; want exactly {\"error\": {…}}", r.Body)
		return
	}
	inner := decodeObject(t, outer["error"])
	if len(inner) != 2 {
		t.Errorf("error %s; want exactly code and message", outer["error"])
	}
	var gotCode, message string
	if err := json.Unmarshal(inner["code"], &gotCode); err != nil || !snakeCode.MatchString(gotCode) {
		t.Errorf("error code %s; want a snake_case string", inner["code"])
	}
	if code != "" && gotCode != code {
		t.Errorf("error code %q; want %q", gotCode, code)
	}
	if err := json.Unmarshal(inner["message"], &message); err != nil || message == "" {
		t.Errorf("error message %s; want a non-empty string", inner["message"])
	}
	for _, m := range mentions {
		if !strings.Contains(message, m) {
			t.Errorf("error message %q; want it to mention %q", message, m)
		}
	}
}

// statusOf reads GET /v1/submissions/{id}, expecting 200.
func statusOf(t *testing.T, e *env, id string) map[string]json.RawMessage {
	t.Helper()
	r := getPath(t, e, "/v1/submissions/"+id)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/submissions/%s: status %d (%s); want 200", id, r.Status, r.Body)
	}
	expectJSONType(t, r)
	return decodeObject(t, r.Body)
}

// jsonString decodes a raw JSON string.
func jsonString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: want a JSON string", raw)
	}
	return s
}

// expectField checks that field of obj is exactly the JSON text want.
func expectField(t *testing.T, obj map[string]json.RawMessage, field, want string) {
	t.Helper()
	got, ok := obj[field]
	if !ok {
		t.Errorf("field %s missing; want %s", field, want)
		return
	}
	if !jsonEqual(got, []byte(want)) {
		t.Errorf("%s = %s; want %s", field, got, want)
	}
}

// jsonEqual compares two JSON texts, ignoring white space but not the way numbers are
// written (9007199254740993 must stay exactly that).
func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// storedChunks returns the inline contents of a submission's reservable chunks, in chunk
// order.
func storedChunks(t *testing.T, pool *pgxpool.Pool, id string) [][]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT chunk_index, input FROM opsq.chunks WHERE submission_id = $1::bigint ORDER BY chunk_index", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var idx int
		var input []byte
		if err := rows.Scan(&idx, &input); err != nil {
			t.Fatal(err)
		}
		if idx != len(out) {
			t.Fatalf("chunk_index %d after %d chunks; want %d (indexes from 0 without gaps)", idx, len(out), len(out))
		}
		out = append(out, input)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expectChunks checks the stored contents of a submission's chunks byte by byte.
func expectChunks(t *testing.T, pool *pgxpool.Pool, id string, want []string) {
	t.Helper()
	got := storedChunks(t, pool, id)
	if len(got) != len(want) {
		t.Fatalf("%d chunks stored; want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], []byte(want[i])) {
			t.Errorf("chunk %d stored as %q; want %q", i, got[i], want[i])
		}
		if got[i] == nil {
			t.Errorf("chunk %d stored as NULL; want %q (inline content, empty or not)", i, want[i])
		}
	}
}

// expectNothingStored checks that no submission, chunk, strategic metadata row or
// idempotency key exists. When something does, it reports it and empties the tables, so
// that the next case on the same database starts clean.
func expectNothingStored(t *testing.T, e *env) {
	t.Helper()
	dirty := false
	for _, table := range []string{"opsq.chunks", "opsq.submission_status", "opsq.strategic_metadata", "opsq.idempotency_keys"} {
		if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%d rows in %s; want 0 (nothing may be left of a refused submission)", n, table)
			dirty = true
		}
	}
	if dirty {
		_, err := e.Pool.Exec(context.Background(), `TRUNCATE opsq.chunks, opsq.completed_batches, opsq.chunks_failed,
			opsq.submissions, opsq.submissions_completed, opsq.submissions_failed, opsq.submissions_cancelled,
			opsq.strategic_metadata, opsq.idempotency_keys`)
		if err != nil {
			t.Fatalf("emptying the tables: %v", err)
		}
	}
}

// expectHealthy checks that the server still answers.
func expectHealthy(t *testing.T, e *env) {
	t.Helper()
	if r := getPath(t, e, "/healthz"); r.Status != http.StatusOK {
		t.Fatalf("GET /healthz: status %d; want 200", r.Status)
	}
}

func mustInt64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sortedKeys lists an object's field names.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
