package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"opsq/sql/pgtest"
)

// submissionRow is the in-progress row of a submission.
type submissionRow struct {
	ChunksTotal int64
	Priority    int64
	MaxRetries  int
	Metadata    string
	Prefix      *string
}

func inProgressRow(t *testing.T, e *env, id string) submissionRow {
	t.Helper()
	var r submissionRow
	err := e.Pool.QueryRow(context.Background(),
		"SELECT chunks_total, priority, max_retries, metadata, prefix FROM opsq.submissions WHERE id = $1::bigint", id).
		Scan(&r.ChunksTotal, &r.Priority, &r.MaxRetries, &r.Metadata, &r.Prefix)
	if err != nil {
		t.Fatalf("reading opsq.submissions row %s: %v", id, err)
	}
	return r
}

// strategicRows returns the opsq.strategic_metadata rows of a submission as
// "key=value(type)", sorted.
func strategicRows(t *testing.T, e *env, id string) []string {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(),
		"SELECT key, value::text, jsonb_typeof(value) FROM opsq.strategic_metadata WHERE submission_id = $1::bigint AND key <> '@tenant' ORDER BY key", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, v, typ string
		if err := rows.Scan(&k, &v, &typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%s(%s)", k, v, typ))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSubmitJSONStoresEverything(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	body := `{
		"chunks": ["first", "", "quote \" backslash \\ é \u00e9 nul \u0000 end", "last"],
		"metadata": "run 7 \u00e9",
		"strategic_metadata": {"company_id": 42, "mode": "preview", "big": 9007199254740993},
		"priority": -9223372036854775807,
		"max_retries": 3
	}`
	id := mustSubmit(t, e, body, 4)

	expectChunks(t, e.Pool, id, []string{"first", "", "quote \" backslash \\ é é nul \x00 end", "last"})
	row := inProgressRow(t, e, id)
	if row.ChunksTotal != 4 || row.Priority != -9223372036854775807 || row.MaxRetries != 3 || row.Metadata != "run 7 é" || row.Prefix != nil {
		t.Errorf("opsq.submissions row %+v; want chunks_total 4, priority -9223372036854775807, max_retries 3, metadata %q, prefix NULL", row, "run 7 é")
	}
	wantMeta := []string{"big=9007199254740993(number)", "company_id=42(number)", `mode="preview"(string)`}
	if got := strategicRows(t, e, id); !slices.Equal(got, wantMeta) {
		t.Errorf("opsq.strategic_metadata rows %q; want %q", got, wantMeta)
	}

	st := statusOf(t, e, id)
	expectField(t, st, "id", `"`+id+`"`)
	expectField(t, st, "state", `"in_progress"`)
	expectField(t, st, "chunks_total", "4")
	expectField(t, st, "chunks_done", "0")
	expectField(t, st, "chunks_failed", "0")
	expectField(t, st, "priority", "-9223372036854775807")
	expectField(t, st, "metadata", `"run 7 é"`)
	expectField(t, st, "strategic_metadata", `{"big": 9007199254740993, "company_id": 42, "mode": "preview"}`)
	expectField(t, st, "finished_at", "null")
}

func TestSubmitJSONDefaults(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	row := inProgressRow(t, e, id)
	if row.MaxRetries != 10 {
		t.Errorf("max_retries %d; want 10 (the default_max_retries setting)", row.MaxRetries)
	}
	if row.Priority != 0 || row.Metadata != "" {
		t.Errorf("priority %d, metadata %q; want 0 and \"\"", row.Priority, row.Metadata)
	}
	st := statusOf(t, e, id)
	expectField(t, st, "strategic_metadata", `{}`)
	expectField(t, st, "metadata", `""`)
	expectField(t, st, "priority", "0")
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.strategic_metadata WHERE key <> '@tenant'"); n != 0 {
		t.Errorf("%d strategic metadata rows; want 0", n)
	}

	// max_retries 0 is a value, not an absent field.
	id = mustSubmit(t, e, `{"chunks": ["a"], "max_retries": 0}`, 1)
	if row := inProgressRow(t, e, id); row.MaxRetries != 0 {
		t.Errorf("max_retries %d; want 0", row.MaxRetries)
	}
	// A null field is an absent field.
	id = mustSubmit(t, e, `{"chunks": ["a"], "max_retries": null, "metadata": null, "priority": null}`, 1)
	if row := inProgressRow(t, e, id); row.MaxRetries != 10 {
		t.Errorf("max_retries %d after null; want 10 (the default)", row.MaxRetries)
	}
}

func TestSubmitObjectStorage(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"prefix": "s3://bucket/run-7/", "chunk_count": 5, "metadata": "m", "priority": 3}`, 5)

	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1::bigint AND input IS NULL", id); n != 5 {
		t.Errorf("%d chunk rows without content; want 5", n)
	}
	if n := pgtest.Count(t, e.Pool, "SELECT count(DISTINCT chunk_index) FROM opsq.chunks WHERE submission_id = $1::bigint AND chunk_index BETWEEN 0 AND 4", id); n != 5 {
		t.Errorf("%d distinct chunk indexes in 0..4; want 5", n)
	}
	row := inProgressRow(t, e, id)
	if row.Prefix == nil || *row.Prefix != "s3://bucket/run-7/" || row.ChunksTotal != 5 {
		t.Errorf("opsq.submissions row %+v; want prefix s3://bucket/run-7/ and chunks_total 5", row)
	}
	st := statusOf(t, e, id)
	expectField(t, st, "chunks_total", "5")
	expectField(t, st, "prefix", `"s3://bucket/run-7/"`)
	expectField(t, st, "priority", "3")
}

func TestSubmitZeroChunksIsCompletedAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	cases := []struct {
		name, contentType, body string
	}{
		{"empty chunks", "application/json", `{"chunks": []}`},
		{"no chunks field", "application/json", `{"metadata": "nothing to do"}`},
		{"empty object", "application/json", `{}`},
		{"null chunks", "application/json", `{"chunks": null}`},
		{"object storage with chunk_count 0", "application/json", `{"prefix": "s3://b/p/", "chunk_count": 0}`},
		{"ndjson header only", "application/x-ndjson", `{"metadata": "m"}` + "\n"},
		{"ndjson header without newline", "application/x-ndjson", `{}`},
		{"ndjson header and empty lines", "application/x-ndjson", "{}\n\n\r\n  \n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := expectCreated(t, postSubmission(t, e, tc.contentType, tc.body), http.StatusCreated, 0)
			st := statusOf(t, e, id)
			expectField(t, st, "state", `"completed"`)
			expectField(t, st, "chunks_total", "0")
			expectField(t, st, "chunks_done", "0")
			if string(st["finished_at"]) == "null" || st["finished_at"] == nil {
				t.Errorf("finished_at %s; want a time", st["finished_at"])
			}
			if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.submissions WHERE id = $1::bigint", id); n != 0 {
				t.Errorf("%d in-progress rows; want 0", n)
			}
		})
	}
}

func TestSubmitIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	first := mustSubmit(t, e, `{"chunks": ["a", "b"], "idempotency_key": "run-7", "strategic_metadata": {"k": 1}}`, 2)

	repeats := []struct {
		name, contentType, body string
	}{
		{"same body", "application/json", `{"chunks": ["a", "b"], "idempotency_key": "run-7", "strategic_metadata": {"k": 1}}`},
		{"other chunks", "application/json", `{"chunks": ["x", "y", "z"], "idempotency_key": "run-7", "strategic_metadata": {"k": 2}}`},
		{"ndjson", "application/x-ndjson", `{"idempotency_key": "run-7"}` + "\n\"x\"\n\"y\"\n\"z\"\n"},
	}
	for _, tc := range repeats { // one after the other, so that the counts below see them all
		t.Run(tc.name, func(t *testing.T) {
			id := expectCreated(t, postSubmission(t, e, tc.contentType, tc.body), http.StatusOK, 2)
			if id != first {
				t.Errorf("repeat returned id %s; want the first submission's %s", id, first)
			}
		})
	}
	for query, want := range map[string]int64{
		"SELECT count(*) FROM opsq.submission_status":                         1,
		"SELECT count(*) FROM opsq.chunks":                                    2,
		"SELECT count(*) FROM opsq.strategic_metadata WHERE key <> '@tenant'": 1,
		"SELECT count(*) FROM opsq.idempotency_keys":                          1,
	} {
		if n := pgtest.Count(t, e.Pool, query); n != want {
			t.Errorf("%s: %d; want %d after the repeats", query, n, want)
		}
	}
	expectChunks(t, e.Pool, first, []string{"a", "b"})

	// The key outlives the move of the submission to another table.
	if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+first+"/cancel", "", nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: status %d (%s); want 200", r.Status, r.Body)
	}
	if id := expectCreated(t, postSubmission(t, e, "application/json", `{"chunks": ["a"], "idempotency_key": "run-7"}`), http.StatusOK, 2); id != first {
		t.Errorf("repeat after cancel returned id %s; want %s", id, first)
	}

	// Another key is another submission.
	if id := mustSubmit(t, e, `{"chunks": ["a"], "idempotency_key": "run-8"}`, 1); id == first {
		t.Errorf("another key returned the first id %s; want a new one", id)
	}
}

// TestSubmitIdempotencyKeyConcurrent: racing POSTs with one key make one submission.
func TestSubmitIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const n = 8
	replies := make(chan reply, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			replies <- postSubmission(t, e, "application/json", `{"chunks": ["a", "b", "c"], "idempotency_key": "race"}`)
		})
	}
	wg.Wait()
	close(replies)
	ids := map[string]int{}
	created := 0
	for r := range replies {
		status := http.StatusOK
		if r.Status == http.StatusCreated {
			status = http.StatusCreated
			created++
		}
		ids[expectCreated(t, r, status, 3)]++
	}
	if created != 1 || len(ids) != 1 {
		t.Errorf("%d answers 201 and %d distinct ids; want 1 and 1", created, len(ids))
	}
	if got := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.chunks"); got != 3 {
		t.Errorf("%d chunk rows; want 3", got)
	}
}

func TestSubmitIdempotencyKeyOfRefusedSubmissionIsFree(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	// The key is claimed before the chunks are copied; a broken line must roll it back.
	r := postSubmission(t, e, "application/x-ndjson", `{"idempotency_key": "k"}`+"\n\"a\"\nbroken\n")
	expectError(t, r, http.StatusBadRequest, "bad_request", "line 3")
	expectNothingStored(t, e)
	expectCreated(t, postSubmission(t, e, "application/x-ndjson", `{"idempotency_key": "k"}`+"\n\"a\"\n"), http.StatusCreated, 1)
}

func TestSubmitBodyWithoutJSONContentTypeIsJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	for _, ct := range []string{
		"",                                  // no Content-Type at all
		"application/x-www-form-urlencoded", // curl -d
		"application/json",
		"application/json; charset=utf-8",
		"text/plain",
	} {
		t.Run(fmt.Sprintf("%q", ct), func(t *testing.T) {
			t.Parallel()
			body := fmt.Sprintf(`{"chunks": ["c1", "c2"], "metadata": %q}`, ct)
			id := expectCreated(t, postSubmission(t, e, ct, body), http.StatusCreated, 2)
			expectChunks(t, e.Pool, id, []string{"c1", "c2"})
			expectField(t, statusOf(t, e, id), "metadata", fmt.Sprintf("%q", ct))
		})
	}
}

func TestSubmitNDJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const header = `{"metadata": "nd"}`
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"lf", header + "\n\"a\"\n\"b\"\n", []string{"a", "b"}},
		{"crlf", header + "\r\n\"a\"\r\n\"b\"\r\n", []string{"a", "b"}},
		{"escapes", header + "\n" + strings.Join([]string{
			`"plain"`,
			`"q\"uote"`,
			`"back\\slash"`,
			`"caf\u00e9"`,
			`"nul\u0000byte"`,
			`"tab\tnew\nline\r"`,
			`"\ud83d\ude00"`,
			`"\/"`,
			`"raw é ü"`,
			`"plain again"`,
		}, "\n") + "\n", []string{"plain", `q"uote`, `back\slash`, "café", "nul\x00byte", "tab\tnew\nline\r", "😀", "/", "raw é ü", "plain again"}},
		{"empty lines ignored", header + "\n\n\"a\"\n\n\r\n   \n\"b\"\n\n", []string{"a", "b"}},
		{"last line without newline", header + "\n\"a\"\n\"b\"", []string{"a", "b"}},
		{"last line without newline after crlf", header + "\r\n\"a\"\r\n\"b\"", []string{"a", "b"}},
		{"empty chunk", header + "\n\"\"\n\"x\"\n", []string{"", "x"}},
		{"white space around a chunk", header + "\n  \"a\"\t\n", []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := postSubmission(t, e, "application/x-ndjson", tc.body)
			id := expectCreated(t, r, http.StatusCreated, int64(len(tc.want)))
			expectChunks(t, e.Pool, id, tc.want)
			expectField(t, statusOf(t, e, id), "metadata", `"nd"`)
		})
	}
}

func TestSubmitNDJSONHeaderStored(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	header := `{"metadata": "m", "strategic_metadata": {"company_id": 42, "mode": "preview"}, "priority": 5, "max_retries": 2, "idempotency_key": "nd-1"}`
	id := expectCreated(t, postSubmission(t, e, "application/x-ndjson; charset=utf-8", header+"\n\"a\"\n"), http.StatusCreated, 1)
	row := inProgressRow(t, e, id)
	if row.Priority != 5 || row.MaxRetries != 2 || row.Metadata != "m" {
		t.Errorf("opsq.submissions row %+v; want priority 5, max_retries 2, metadata m", row)
	}
	want := []string{"company_id=42(number)", `mode="preview"(string)`}
	if got := strategicRows(t, e, id); !slices.Equal(got, want) {
		t.Errorf("opsq.strategic_metadata rows %q; want %q", got, want)
	}
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.idempotency_keys WHERE key = 'nd-1' AND submission_id = $1::bigint", id); n != 1 {
		t.Errorf("%d idempotency key rows; want 1", n)
	}

	// Object-storage mode from an NDJSON header.
	id = expectCreated(t, postSubmission(t, e, "application/x-ndjson", `{"prefix": "s3://b/", "chunk_count": 3}`+"\n"), http.StatusCreated, 3)
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1::bigint AND input IS NULL", id); n != 3 {
		t.Errorf("%d chunk rows without content; want 3", n)
	}
}

// An object-storage header followed by chunk lines is as contradictory as "chunks" with
// "prefix" in a JSON body: the lines must not be dropped silently.
func TestSubmitNDJSONPrefixWithChunkLines(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	r := postSubmission(t, e, "application/x-ndjson", `{"prefix": "s3://b/", "chunk_count": 2}`+"\n\"a\"\n\"b\"\n")
	expectError(t, r, http.StatusBadRequest, "bad_request", "prefix")
	expectNothingStored(t, e)
}

func TestSubmitNDJSONBrokenLineDeepLeavesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const lines, broken = 60_000, 50_000 // line 1 is the header
	var b strings.Builder
	b.WriteString(`{"metadata": "deep", "strategic_metadata": {"k": 1, "s": "v"}, "idempotency_key": "deep-1"}` + "\n")
	for line := 2; line <= lines; line++ {
		if line == broken {
			b.WriteString("{\"not\": \"a string\"}\n")
			continue
		}
		fmt.Fprintf(&b, "\"chunk of line %d\"\n", line)
	}
	r := postSubmission(t, e, "application/x-ndjson", b.String())
	expectError(t, r, http.StatusBadRequest, "bad_request", fmt.Sprintf("line %d", broken))
	expectNothingStored(t, e)
	expectHealthy(t, e)
}

func TestSubmitNDJSONBadLines(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	cases := []struct {
		name, body string
		mention    []string
	}{
		{"empty body", "", []string{"body"}},
		{"chunks in the header", `{"chunks": ["a"]}` + "\n", []string{"chunks"}},
		{"header an array", "[1]\n\"a\"\n", []string{"line 1"}},
		{"header a string", "\"a\"\n\"b\"\n", []string{"line 1"}},
		{"header not JSON", "hello\n\"a\"\n", []string{"line 1"}},
		{"header null", "null\n\"a\"\n", []string{"line 1"}},
		{"header unknown field", `{"chunk_size": 1}` + "\n", []string{"chunk_size"}},
		{"header wrong type", `{"priority": "high"}` + "\n", []string{"priority"}},
		{"number line", "{}\n\"a\"\n42\n", []string{"line 3"}},
		{"unterminated string", "{}\n\"a\n", []string{"line 2"}},
		{"bad escape", "{}\n\"a\"\n\"\\x\"\n", []string{"line 3"}},
		{"two strings on a line", "{}\n\"a\" \"b\"\n", []string{"line 2"}},
		{"null line", "{}\n\"a\"\nnull\n", []string{"line 3"}},
		{"broken last line without newline", "{}\n\"a\"\n\"b", []string{"line 3"}},
		{"line number counts empty lines", "{}\n\n\n\"a\"\nx\n", []string{"line 5"}},
		{"line number counts crlf lines", "{}\r\n\"a\"\r\n\"b\"\r\n[]\r\n", []string{"line 4"}},
	}
	// One after the other on one database, so that each case checks what it left behind.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := postSubmission(t, e, "application/x-ndjson", tc.body)
			expectError(t, r, http.StatusBadRequest, "bad_request", tc.mention...)
			expectNothingStored(t, e)
			expectHealthy(t, e)
		})
	}
}
