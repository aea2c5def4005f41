package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// Tests of DESIGN.md §3 "Bounded by design": every field a client sends has a bound, a
// refusal is a 400 naming the field and leaves nothing behind, and a reserve answer has a
// bound in bytes.

// TestSubmitBounds posts submissions past each bound, as JSON and as NDJSON.
func TestSubmitBounds(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxSubmissionChunks: 5})
	keys := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"k%d": %d`, i, i)
		}
		return "{" + b.String() + "}"
	}
	const json_, ndjson = "application/json", "application/x-ndjson"
	cases := []struct {
		name, contentType, body, mention string
	}{
		{"metadata over 64 KiB", json_, `{"metadata": "` + strings.Repeat("m", MaxMetadataBytes+1) + `"}`, "metadata"},
		{"escaped metadata over 64 KiB", json_, `{"metadata": "` + strings.Repeat(`\u00e9`, MaxMetadataBytes/2+1) + `"}`, "metadata"},
		{"metadata over 64 KiB in the NDJSON header", ndjson, `{"metadata": "` + strings.Repeat("m", MaxMetadataBytes+1) + "\"}\n\"a\"\n", "metadata"},
		{"metadata not UTF-8", json_, "{\"metadata\": \"caf\xe9\"}", "metadata"},
		{"metadata with a lone surrogate", json_, `{"metadata": "a\ud800b"}`, "metadata"},
		{"metadata with a lone low surrogate", json_, `{"metadata": "a\udc00b"}`, "metadata"},
		{"metadata with NUL in the NDJSON header", ndjson, "{\"metadata\": \"a\\u0000\"}\n\"a\"\n", "metadata"},

		{"33 strategic keys", json_, `{"strategic_metadata": ` + keys(MaxStrategicKeys+1) + `}`, "strategic_metadata"},
		{"strategic key of 129 bytes", json_, `{"strategic_metadata": {"` + strings.Repeat("k", MaxStrategicKeyBytes+1) + `": 1}}`, "strategic_metadata"},
		// The reproduction: a key or value of about 2.7 KB passed the checks and then broke
		// the btree row limit of the strategic_metadata index: 500.
		{"strategic key of 2.7 KB", json_, `{"strategic_metadata": {"` + incompressible(2700) + `": 1}}`, "strategic_metadata"},
		{"strategic value of 1025 bytes", json_, `{"strategic_metadata": {"mode": "` + strings.Repeat("v", MaxStrategicValueBytes+1) + `"}}`, "strategic_metadata.mode"},
		{"strategic value of 2.7 KB", json_, `{"strategic_metadata": {"mode": "` + incompressible(2700) + `"}}`, "strategic_metadata.mode"},
		{"strategic key not UTF-8", json_, "{\"strategic_metadata\": {\"k\xff\": 1}}", "strategic_metadata"},
		{"strategic value not UTF-8", json_, "{\"strategic_metadata\": {\"k\": \"v\xff\"}}", "strategic_metadata"},
		{"strategic key with NUL", json_, `{"strategic_metadata": {"a\u0000": 1}}`, "strategic_metadata"},
		{"strategic value with a lone surrogate", json_, `{"strategic_metadata": {"k": "\udbff"}}`, "strategic_metadata"},

		{"chunk_count over the limit", json_, `{"prefix": "s3://b/", "chunk_count": 6}`, "chunk_count"},
		{"chunk_count far over the limit", json_, `{"prefix": "s3://b/", "chunk_count": 100000001}`, "chunk_count"},
		{"chunk_count over the limit in NDJSON", ndjson, `{"prefix": "s3://b/", "chunk_count": 6}`, "chunk_count"},
		{"too many JSON chunks", json_, `{"chunks": ["a", "b", "c", "d", "e", "f"]}`, "chunks"},
		{"too many NDJSON chunks", ndjson, "{}\n\"a\"\n\"b\"\n\"c\"\n\"d\"\n\"e\"\n\"f\"\n", "line 7 (chunk 5)"},

		// Invalid UTF-8 in a chunk was silently replaced with U+FFFD.
		{"JSON chunk not UTF-8", json_, "{\"chunks\": [\"a\", \"b\", \"c\", \"d\xff\"]}", "chunks[3]"},
		{"JSON chunk with a lone surrogate", json_, `{"chunks": ["a", "b", "c", "\ud83d"]}`, "chunks[3]"},
		{"JSON chunk with a bad surrogate pair", json_, `{"chunks": ["a", "\ud83d\u0041"]}`, "chunks[1]"},
		{"NDJSON chunk not UTF-8", ndjson, "{}\n\"a\"\n\"b\"\n\"c\"\n\"caf\xe9\"\n", "line 5 (chunk 3)"},
		{"NDJSON chunk not UTF-8, with an escape", ndjson, "{}\n\"a\"\n\"\\n\xc3\"\n", "line 3 (chunk 1)"},
		{"NDJSON chunk with a lone surrogate", ndjson, "{}\n\"a\"\n\"\\udfff\"\n", "line 3 (chunk 1)"},

		{"idempotency_key not UTF-8", json_, "{\"idempotency_key\": \"\xff\"}", "idempotency_key"},
		{"prefix not UTF-8", json_, "{\"prefix\": \"s3://\xff/\", \"chunk_count\": 1}", "prefix"},
	}
	// One after the other on one database, so that each case checks what it left behind.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := postSubmission(t, e, tc.contentType, tc.body)
			expectError(t, r, http.StatusBadRequest, "bad_request", tc.mention)
			expectNothingStored(t, e)
			expectHealthy(t, e)
		})
	}
}

// incompressible returns n bytes of text that PostgreSQL cannot compress to fit an index
// row, as a key or value of the reproduction was.
func incompressible(n int) string {
	rng := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[rng.IntN(62)]
	}
	return string(b)
}

// TestSubmitBoundsAccepted: what is exactly at a bound is accepted, and stored as sent.
func TestSubmitBoundsAccepted(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxSubmissionChunks: 5})
	var meta strings.Builder
	for i := range MaxStrategicKeys - 1 {
		fmt.Fprintf(&meta, `"k%d": %d, `, i, i)
	}
	longKey := strings.Repeat("k", MaxStrategicKeyBytes)
	longValue := strings.Repeat("é", MaxStrategicValueBytes/2)
	fmt.Fprintf(&meta, `"%s": "%s"`, longKey, longValue)
	metadata := strings.Repeat("m", MaxMetadataBytes)
	// A chunk may hold NUL; a surrogate pair is one character (😀).
	id := mustSubmit(t, e, `{"metadata": "`+metadata+`", "strategic_metadata": {`+meta.String()+`},
		"chunks": ["a\u0000b", "\ud83d\ude00", "c", "d", "e"]}`, 5)
	expectChunks(t, e.Pool, id, []string{"a\x00b", "😀", "c", "d", "e"})
	if row := inProgressRow(t, e, id); row.Metadata != metadata {
		t.Errorf("metadata of %d bytes stored; want %d", len(row.Metadata), len(metadata))
	}
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.strategic_metadata WHERE submission_id = $1::bigint AND key <> '@tenant'", id); n != MaxStrategicKeys {
		t.Errorf("%d strategic metadata rows; want %d", n, MaxStrategicKeys)
	}

	r := postSubmission(t, e, "application/x-ndjson", "{}\n\"a\"\n\"\\ud83d\\ude00\"\n\"c\"\n\"d\"\n\"e\\u0000\"\n")
	id = expectCreated(t, r, http.StatusCreated, 5)
	expectChunks(t, e.Pool, id, []string{"a", "😀", "c", "d", "e\x00"})
	mustSubmit(t, e, `{"prefix": "s3://b/", "chunk_count": 5}`, 5)
}

// TestSubmitChunkCountDefault: without configuration, chunk_count is bounded by
// OPSQ_MAX_SUBMISSION_CHUNKS's default: a 60-byte request used to start inserting
// 100 million rows.
func TestSubmitChunkCountDefault(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	r := postSubmission(t, e, "application/json", fmt.Sprintf(`{"prefix": "s3://b/", "chunk_count": %d}`, MaxSubmissionChunksDefault+1))
	expectError(t, r, http.StatusBadRequest, "bad_request", "chunk_count", "OPSQ_MAX_SUBMISSION_CHUNKS")
	expectNothingStored(t, e)
}

// reserveOne submits one chunk and reserves it, and returns its token.
func reserveOne(t *testing.T, e *env) string {
	t.Helper()
	mustSubmit(t, e, `{"chunks": ["x"], "max_retries": 0}`, 1)
	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 1}`))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 1 {
		t.Fatalf("reserve: %d %s; want one chunk", r.Status, r.Body)
	}
	return got.Chunks[0].Token
}

// TestFailErrorBounds: a fail's error is text (UTF-8 without NUL), and only 8 KiB of it is
// kept, the cut marked. A NUL in it was a 500.
func TestFailErrorBounds(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	tok := reserveOne(t, e)
	for _, tc := range []struct{ name, errorJSON string }{
		{"NUL", `"boom\u0000"`},
		{"not UTF-8", "\"boom\xff\""},
		{"lone surrogate", `"boom\ud800"`},
		{"not a string", `42`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"failures": [{"token": %q, "error": "fine", "retry": false}, {"token": %q, "error": %s, "retry": false}]}`, "x", tok, tc.errorJSON)
			r := httpCall(t, http.MethodPost, e.URL+"/v1/fail", "application/json", strings.NewReader(body))
			expectError(t, r, http.StatusBadRequest, "bad_request", "failures[1].error")
		})
	}
	// The refused requests acted on nothing: the chunk is still reserved. Fail it now with
	// an error of 100 000 bytes, ending in a character of 2 bytes where the cut falls.
	long := strings.Repeat("é", 50_000)
	body, _ := json.Marshal(map[string]any{"failures": []map[string]any{{"token": tok, "error": long, "retry": false}}})
	r := httpCall(t, http.MethodPost, e.URL+"/v1/fail", "application/json", strings.NewReader(string(body)))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"failed"`) {
		t.Fatalf("fail: %d %s; want 200 and status failed", r.Status, r.Body)
	}
	var stored string
	if err := e.Pool.QueryRow(context.Background(), "SELECT error FROM opsq.chunks_failed").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) > MaxErrorBytes {
		t.Errorf("stored error of %d bytes; want at most %d", len(stored), MaxErrorBytes)
	}
	kept, mark, ok := strings.Cut(stored, "… [cut: ")
	if !ok || !strings.HasPrefix(long, kept) || len(kept) < MaxErrorBytes-64 {
		t.Errorf("stored error %q…; want the first %d bytes or so of the error, then the mark of the cut", stored[:min(len(stored), 40)], MaxErrorBytes)
	}
	if want := fmt.Sprintf("%d bytes]", len(long)-len(kept)); mark != want {
		t.Errorf("mark of the cut %q; want %q", mark, want)
	}
}

// TestCutError checks the cut at its edges.
func TestCutError(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, MaxErrorBytes - 1, MaxErrorBytes, MaxErrorBytes + 1, 3 * MaxErrorBytes, 1 << 20} {
		for _, unit := range []string{"a", "é", "😀"} {
			s := strings.Repeat(unit, n/len(unit)+1)[:n-n%len(unit)]
			got := cutError(s)
			switch {
			case len(s) <= MaxErrorBytes && got != s:
				t.Errorf("cutError of %d bytes changed it", len(s))
			case len(got) > MaxErrorBytes:
				t.Errorf("cutError of %d bytes of %q: %d bytes; want at most %d", len(s), unit, len(got), MaxErrorBytes)
			case textProblem([]byte(got)) != "":
				t.Errorf("cutError of %d bytes of %q cut a character", len(s), unit)
			}
		}
	}
}

// TestConsumerBounds: consumer is text of at most 256 bytes.
func TestConsumerBounds(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	mustSubmit(t, e, `{"chunks": ["x"]}`, 1)
	for _, tc := range []struct{ name, consumer string }{
		{"257 bytes", `"` + strings.Repeat("c", MaxConsumerBytes+1) + `"`},
		{"NUL", `"host\u0000"`},
		{"not UTF-8", "\"host\xff\""},
		{"not a string", `7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 1, "consumer": `+tc.consumer+`}`))
			expectError(t, r, http.StatusBadRequest, "bad_request", "consumer")
		})
	}
	// Nothing was reserved by the refused requests; a consumer of 256 bytes gets the chunk.
	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json",
		strings.NewReader(`{"max": 1, "consumer": "`+strings.Repeat("c", MaxConsumerBytes)+`"}`))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 1 {
		t.Fatalf("reserve: %d %s; want the one chunk", r.Status, r.Body)
	}
}

// TestReserveAnswerBounded: a reserve of max 2 000 over chunks of 1 KiB under 60 KiB of
// metadata answered 125 MB; it stops adding chunks at MaxReserveBytes.
func TestReserveAnswerBounded(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	e := setup(t, Config{MaxReserveBytes: limit})
	chunks := make([]string, 100)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%04d", i) + strings.Repeat("i", 1020)
	}
	body, _ := json.Marshal(map[string]any{"chunks": chunks, "metadata": strings.Repeat("m", 60<<10),
		"strategic_metadata": map[string]any{"company_id": 7}})
	mustSubmit(t, e, string(body), 100)

	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 2000, "strategy": "oldest_first"}`))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("reserve: %d %.200s", r.Status, r.Body)
	}
	// The bound is on the answer as sent: it holds, and it is filled (one more chunk of the
	// same size would pass it).
	if len(r.Body) > limit {
		t.Errorf("answer of %d bytes (%d chunks); want at most %d", len(r.Body), len(got.Chunks), limit)
	}
	if per := len(r.Body) / len(got.Chunks); len(r.Body)+per <= limit {
		t.Errorf("answer of %d bytes (%d chunks of about %d): room for another under the %d-byte bound", len(r.Body), len(got.Chunks), per, limit)
	}
	for i, ch := range got.Chunks {
		if ch.Input == nil || *ch.Input != chunks[i] || ch.StrategicMetadata["company_id"] != wire.Int(7) {
			t.Fatalf("chunk %d: wrong input or strategic metadata", i)
		}
	}

	// Text that JSON escapes (a control character takes 6 bytes): the bound still holds
	// for the answer as sent.
	escaped := make([]string, 100)
	for i := range escaped {
		escaped[i] = strings.Repeat("\x01", 4<<10)
	}
	body2, _ := json.Marshal(map[string]any{"chunks": escaped, "strategic_metadata": map[string]any{"company_id": 8}})
	mustSubmit(t, e, string(body2), 100)
	r = httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 2000, "strategy": {"select_only": {"key": "company_id", "value": 8, "then": "oldest_first"}}}`))
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) == 0 {
		t.Fatalf("reserve of escaped chunks: %d %.200s", r.Status, r.Body)
	}
	if len(r.Body) > limit {
		t.Errorf("answer of %d bytes (%d chunks of 4 KiB of control characters); want at most %d", len(r.Body), len(got.Chunks), limit)
	}

	// A chunk larger than the bound on its own still comes, alone.
	e2 := setup(t, Config{MaxReserveBytes: 1000})
	mustSubmit(t, e2, string(body), 100)
	r = httpCall(t, http.MethodPost, e2.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 2000}`))
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 1 {
		t.Fatalf("reserve over a bound smaller than one chunk: %d %.200s; want exactly one chunk", r.Status, r.Body)
	}
}

// TestPreferDistinctDeferredInputs: the deferred chunks prefer_distinct hands out after all
// (their inputs dropped while deferred) come with their inputs.
func TestPreferDistinctDeferredInputs(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	want := map[string]string{}
	for company := range 2 {
		chunks := make([]string, 20)
		for i := range chunks {
			chunks[i] = fmt.Sprintf("company %d chunk %d", company, i)
		}
		body, _ := json.Marshal(map[string]any{"chunks": chunks, "strategic_metadata": map[string]any{"company_id": company}})
		id := mustSubmit(t, e, string(body), 20)
		for i, c := range chunks {
			want[fmt.Sprintf("%s/%d", id, i)] = c
		}
	}
	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json",
		strings.NewReader(`{"max": 30, "strategy": {"prefer_distinct": {"key": "company_id", "max": 1, "then": "oldest_first"}}}`))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("reserve: %d %.300s", r.Status, r.Body)
	}
	if len(got.Chunks) != 30 {
		t.Fatalf("%d chunks; want 30 (2 distinct, then 28 deferred)", len(got.Chunks))
	}
	for _, ch := range got.Chunks {
		k := fmt.Sprintf("%s/%d", ch.SubmissionID, ch.ChunkIndex)
		if ch.Input == nil || *ch.Input != want[k] {
			t.Errorf("chunk %s: input %v; want %q", k, ch.Input, want[k])
		}
	}
}

// TestMaxSimultaneousRemembersFullValues: once a value is refused a slot, a request asks
// no more for it. One empty reserve used to open a transaction per candidate.
func TestMaxSimultaneousRemembersFullValues(t *testing.T) {
	t.Parallel()
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter)
	q := queuertest.Start(t, queuer.Config{Pool: pool})
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = "c"
	}
	sub := queuer.NewSubmission{StrategicMetadata: json.RawMessage(`{"company_id": 1}`)}
	if _, err := q.Submit(t.Context(), sub, arenaOf(chunks)); err != nil {
		t.Fatal(err)
	}
	reserve := func(max int) []queuer.Chunk {
		t.Helper()
		got, err := q.Reserve(t.Context(), queuer.ReserveRequest{Max: max, Lease: wire.LeaseDefault,
			Strategy: queuertest.Strategy(t, `max_simultaneous(company_id, 1, oldest_first)`)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := reserve(10); len(got) != 1 {
		t.Fatalf("first reserve: %d chunks; want 1 (the one slot of company 1)", len(got))
	}
	before := counter.Count(opsqsql.Source("holds_take.sql"))
	if got := reserve(10); len(got) != 0 {
		t.Fatalf("second reserve: %d chunks; want none", len(got))
	}
	if n := counter.Count(opsqsql.Source("holds_take.sql")) - before; n > 1 {
		t.Errorf("an empty reserve asked for a slot of the full value %d times; want at most once", n)
	}
}

// arenaOf is the chunks of a JSON submission, as the API hands them on.
func arenaOf(list []string) *arenaChunks {
	a := &chunkArena{}
	for _, ch := range list {
		a.add(ch)
	}
	return &arenaChunks{arena: a}
}

// TestUnknownFieldNamed: a message names the field first, even an unknown field whose name
// could not start a message (found by FuzzSubmissionJSON and FuzzReserveBody).
func TestUnknownFieldNamed(t *testing.T) {
	t.Parallel()
	s := fuzzServer()
	for _, name := range []string{"", ".x", "a: b", "0", "chunk", strings.Repeat("n", 100)} {
		body, _ := json.Marshal(map[string]int{name: 1})
		_, _, err := parseJSONBody(s, body)
		checkRefusal(t, body, err)
		_, err = s.parseReserve(body)
		checkRefusal(t, body, err)
	}
}

// TestCompleteOutputUTF8: an output is content, which may hold NUL, but must be valid
// UTF-8 in JSON: it was silently replaced with U+FFFD.
func TestCompleteOutputUTF8(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	tok := reserveOne(t, e)
	for _, output := range []string{"\"out\xff\"", `"\udc00"`, `7`} {
		body := fmt.Sprintf(`{"completions": [{"token": %q, "output": %s}]}`, tok, output)
		r := httpCall(t, http.MethodPost, e.URL+"/v1/complete", "application/json", strings.NewReader(body))
		expectError(t, r, http.StatusBadRequest, "bad_request", "completions[0].output")
	}
	body := fmt.Sprintf(`{"completions": [{"token": %q, "output": "a\u0000b\ud83d\ude00"}]}`, tok)
	r := httpCall(t, http.MethodPost, e.URL+"/v1/complete", "application/json", strings.NewReader(body))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"completed"`) {
		t.Fatalf("complete: %d %s; want 200 and status completed (the refused requests acted on nothing)", r.Status, r.Body)
	}
	var output []byte
	if err := e.Pool.QueryRow(context.Background(), "SELECT output FROM opsq.chunks_completed").Scan(&output); err != nil {
		t.Fatal(err)
	}
	if string(output) != "a\x00b😀" {
		t.Errorf("stored output %q; want %q", output, "a\x00b😀")
	}
}
