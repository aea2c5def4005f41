package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"opsq/api/wire"
	"opsq/queuer"
)

// Fuzz targets of what a client sends: the submission body (JSON), the NDJSON reader and
// the reserve body, driven through the parsing functions the handlers use, without a
// database (make fuzz runs each for a minute; go test runs their seeds). Invariants: no
// input panics; a refusal is a 400 (413 for sizes) whose message starts with the field it
// names; what is accepted is within every bound and reads back equal once written again.

// fuzzServer is a server with small limits, so that the fuzzer reaches them.
func fuzzServer() *server {
	return &server{cfg: Config{MaxBody: 1 << 16, MaxChunkBytes: 64, MaxSubmissionChunks: 20, MaxReserveBytes: 1 << 20}, now: time.Now}
}

// roomy returns s with room for a body written again: its escapes may take more bytes
// than the body had (json.Marshal writes "<" as \u003c).
func roomy(s *server) *server {
	r := *s
	r.cfg.MaxBody *= 8
	return &r
}

// fieldFirst matches a message that starts with the field it is about: "metadata: …",
// "chunks[3]: …", "strategic_metadata.mode: …", "strategic_metadata["a b"]: …",
// "line 5 (chunk 3): …", "body: …", or a
// path in the strategy, whose names come from the request ("strategy.or_else.first: …").
var fieldFirst = regexp.MustCompile(`^(line \d+( \(chunk \d+\))?: |strategy[.:]|strategic_metadata\[".*"\]: |[A-Za-z0-9_][^:\s]*: )`)

// checkRefusal checks that err is a 4xx naming a field.
func checkRefusal(t *testing.T, in []byte, err error) {
	t.Helper()
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		return // answered 413 by toError, with the limit
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: error %T %v; want an *api.Error", in, err, err)
	}
	if e.Status != http.StatusBadRequest && e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%q: status %d (%s); want 400 or 413", in, e.Status, e.Message)
	}
	if !fieldFirst.MatchString(e.Message) {
		t.Fatalf("%q: message %q does not start with the field it is about", in, e.Message)
	}
}

// checkAcceptedText checks an accepted text field.
func checkAcceptedText(t *testing.T, field, s string, max int) {
	t.Helper()
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 || len(s) > max {
		t.Fatalf("%s %q accepted; want valid UTF-8 without NUL, at most %d bytes", field, s, max)
	}
}

// checkAcceptedSubmission checks the bounds of an accepted submission.
func checkAcceptedSubmission(t *testing.T, s *server, sub queuer.NewSubmission, chunks [][]byte) {
	t.Helper()
	checkAcceptedText(t, "metadata", sub.Metadata, MaxMetadataBytes)
	checkAcceptedText(t, "idempotency_key", sub.IdempotencyKey, maxIdempotencyKeyBytes)
	checkAcceptedText(t, "prefix", sub.Prefix, int(s.cfg.MaxBody))
	if len(sub.StrategicMetadata) > 0 {
		var m map[string]any
		if err := json.Unmarshal(sub.StrategicMetadata, &m); err != nil {
			t.Fatalf("strategic metadata %s: %v", sub.StrategicMetadata, err)
		}
		if len(m) > MaxStrategicKeys {
			t.Fatalf("%d strategic keys accepted", len(m))
		}
		for k, v := range m {
			checkAcceptedText(t, "strategic key", k, MaxStrategicKeyBytes)
			if k == "" {
				t.Fatal("empty strategic key accepted")
			}
			if vs, ok := v.(string); ok {
				checkAcceptedText(t, "strategic value", vs, MaxStrategicValueBytes)
			}
		}
	}
	if int64(len(chunks)) > s.cfg.MaxSubmissionChunks || sub.ChunkCount > s.cfg.MaxSubmissionChunks {
		t.Fatalf("%d chunks, chunk_count %d accepted; the bound is %d", len(chunks), sub.ChunkCount, s.cfg.MaxSubmissionChunks)
	}
	for i, c := range chunks {
		if !utf8.Valid(c) || len(c) > s.cfg.MaxChunkBytes {
			t.Fatalf("chunk %d %q accepted; want valid UTF-8 of at most %d bytes", i, c, s.cfg.MaxChunkBytes)
		}
	}
}

// readAll reads every chunk, copying each (the reader may reuse its slice).
func readAll(c queuer.Chunks) ([][]byte, error) {
	var out [][]byte
	for {
		b, err := c.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, append([]byte{}, b...))
	}
}

// headerJSON writes the header of an accepted submission as a client would send it.
func headerJSON(sub queuer.NewSubmission) map[string]any {
	h := map[string]any{"metadata": sub.Metadata, "priority": sub.Priority}
	if len(sub.StrategicMetadata) > 0 {
		h["strategic_metadata"] = sub.StrategicMetadata
	}
	if sub.MaxRetries != nil {
		h["max_retries"] = *sub.MaxRetries
	}
	if sub.IdempotencyKey != "" {
		h["idempotency_key"] = sub.IdempotencyKey
	}
	if sub.Prefix != "" {
		h["prefix"], h["chunk_count"] = sub.Prefix, sub.ChunkCount
	}
	lc := sub.Lifecycle
	if lc.OnFailure != nil {
		h["on_failure"] = lc.OnFailure
	}
	if lc.Backoff != (queuer.Backoff{}) {
		h["retry_backoff"] = map[string]any{"initial": lc.Backoff.Initial.String(), "factor": lc.Backoff.Factor, "max": lc.Backoff.Max.String()}
	}
	if !lc.NotBefore.IsZero() {
		h["not_before"] = lc.NotBefore.Format(time.RFC3339Nano)
	}
	return h
}

func sameSubmission(a, b queuer.NewSubmission) bool {
	return a.Metadata == b.Metadata && bytes.Equal(a.StrategicMetadata, b.StrategicMetadata) && a.Priority == b.Priority &&
		(a.MaxRetries == nil) == (b.MaxRetries == nil) && (a.MaxRetries == nil || *a.MaxRetries == *b.MaxRetries) &&
		a.IdempotencyKey == b.IdempotencyKey && a.Prefix == b.Prefix && a.ChunkCount == b.ChunkCount &&
		bytes.Equal(a.Lifecycle.OnFailure, b.Lifecycle.OnFailure) && a.Lifecycle.Backoff == b.Lifecycle.Backoff &&
		a.Lifecycle.NotBefore.Equal(b.Lifecycle.NotBefore)
}

func sameChunks(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// parseJSONBody runs the JSON submission reader over body.
func parseJSONBody(s *server, body []byte) (queuer.NewSubmission, [][]byte, error) {
	r := httptest.NewRequest(http.MethodPost, "/v1/submissions", bytes.NewReader(body))
	sub, chunks, err := s.readJSONSubmission(r)
	if err != nil {
		return sub, nil, err
	}
	list, err := readAll(chunks)
	return sub, list, err
}

// parseNDJSONBody runs the NDJSON submission reader over body.
func parseNDJSONBody(s *server, body []byte) (queuer.NewSubmission, [][]byte, error) {
	r := httptest.NewRequest(http.MethodPost, "/v1/submissions", bytes.NewReader(body))
	sub, chunks, err := s.readNDJSONHeader(r, nil)
	if err != nil {
		return sub, nil, err
	}
	list, err := readAll(chunks)
	return sub, list, err
}

var submissionSeeds = []string{
	`{"chunks": ["first", "", "quote \" backslash \\ é \u00e9 nul \u0000 end", "last"], "metadata": "run 7 \u00e9",
	  "strategic_metadata": {"company_id": 42, "mode": "preview", "big": 9007199254740993}, "priority": -9223372036854775807, "max_retries": 3}`,
	`{"prefix": "s3://bucket/run-7/", "chunk_count": 20, "idempotency_key": "k-1"}`,
	`{"chunks": ["\ud83d\ude00"]}`, `{}`, `{"chunks": null, "metadata": null}`,
	`{"chunks": ["a"], "on_failure": {"fail_after": {"fraction": 0.5}}, "retry_backoff": {"initial": "0s", "factor": 1.5}, "not_before": "2026-01-01T00:00:00Z"}`,
	`{"chunks": ["a"], "on_failure": "continue", "retry_backoff": {}, "not_before": "10m"}`,
	`{"on_failure": {"fail_after": {"chunks": -1}}}`, `{"retry_backoff": {"factor": 0}}`, `{"not_before": "soon"}`,
	// Bad inputs, one of each kind.
	`{"chunks": [`, `{"chunks": []} x`, ``, `["a"]`, `null`, `{"chunk": 1}`, `{"chunks": ["a", 1]}`, `{"chunks": ["a", null]}`,
	`{"priority": 1.5}`, `{"priority": -9223372036854775808}`, `{"max_retries": -1}`, `{"strategic_metadata": [1]}`,
	`{"strategic_metadata": {"rate": 1.5}}`, `{"strategic_metadata": {"": 1}}`, `{"strategic_metadata": {"s": "a\u0000b"}}`,
	`{"metadata": 42}`, `{"metadata": "a\u0000b"}`, `{"prefix": "s3://b/p/"}`, `{"chunk_count": 3}`,
	`{"prefix": "s3://b/", "chunk_count": 21}`, `{"prefix": "s3://b/", "chunk_count": 1, "chunks": []}`,
	`{"idempotency_key": ""}`, `{"chunks": ["` + strings.Repeat("x", 65) + `"]}`,
	`{"chunks": [` + strings.Repeat(`"c",`, 20) + `"c"]}`,
	`{"metadata": "` + strings.Repeat("m", MaxMetadataBytes+1) + `"}`,
	"{\"metadata\": \"caf\xe9\"}", `{"metadata": "a\ud800b"}`, `{"metadata": "a\udc00b"}`,
	"{\"strategic_metadata\": {\"k\xff\": 1}}", `{"strategic_metadata": {"k": "\udbff"}}`,
	`{"strategic_metadata": {"` + strings.Repeat("k", MaxStrategicKeyBytes+1) + `": 1}}`,
	`{"strategic_metadata": {"k": "` + strings.Repeat("v", MaxStrategicValueBytes+1) + `"}}`,
	"{\"chunks\": [\"a\", \"b\", \"c\", \"d\xff\"]}", `{"chunks": ["\ud83d\u0041"]}`,
}

func FuzzSubmissionJSON(f *testing.F) {
	for _, s := range submissionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := fuzzServer()
		sub, chunks, err := parseJSONBody(s, body)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		checkAcceptedSubmission(t, s, sub, chunks)
		// Written again as a client would, it reads back the same.
		m := headerJSON(sub)
		if sub.Prefix == "" {
			list := make([]string, len(chunks))
			for i, c := range chunks {
				list[i] = string(c)
			}
			m["chunks"] = list
		}
		again, _ := json.Marshal(m)
		sub2, chunks2, err := parseJSONBody(roomy(s), again)
		if err != nil || !sameSubmission(sub, sub2) || !sameChunks(chunks, chunks2) {
			t.Fatalf("%q: accepted, but written again as %s it reads back as %+v %q, %v", body, again, sub2, chunks2, err)
		}
	})
}

var ndjsonSeeds = []string{
	"{}\n\"a\"\n\"b\"\n",
	"{\"metadata\": \"m\", \"strategic_metadata\": {\"company_id\": 1}}\r\n\"a\\u0000b\"\r\n\n\"\\ud83d\\ude00\"",
	"{\"prefix\": \"s3://b/\", \"chunk_count\": 3}\n",
	"{}\n\n\n",
	// Bad inputs.
	"", "\n", "[]\n\"a\"\n", "{}\n1\n", "{}\nnull\n", "{}\n\"a\" \"b\"\n", "{}\n\"unterminated\n",
	"{\"chunks\": [\"a\"]}\n", "{\"prefix\": \"s3://b/\", \"chunk_count\": 3}\n\"a\"\n",
	"{}\n\"" + strings.Repeat("x", 65) + "\"\n", "{}\n\"" + strings.Repeat(`\u00e9`, 33) + "\"\n",
	"{}\n" + strings.Repeat("\"c\"\n", 21), "{}\n\"a\"\n\"caf\xe9\"\n", "{}\n\"\\n\xc3\"\n", "{}\n\"\\udfff\"\n",
	"{\"metadata\": \"a\\u0000\"}\n", "{\"metadata\": \"" + strings.Repeat("m", MaxMetadataBytes+1) + "\"}\n",
	"{}\n\"" + strings.Repeat("x", 500) + "\"\n",
}

func FuzzSubmissionNDJSON(f *testing.F) {
	for _, s := range ndjsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := fuzzServer()
		sub, chunks, err := parseNDJSONBody(s, body)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		checkAcceptedSubmission(t, s, sub, chunks)
		header, _ := json.Marshal(headerJSON(sub))
		var b bytes.Buffer
		b.Write(header)
		for _, c := range chunks {
			line, _ := json.Marshal(string(c))
			b.WriteByte('\n')
			b.Write(line)
		}
		sub2, chunks2, err := parseNDJSONBody(roomy(s), b.Bytes())
		if err != nil || !sameSubmission(sub, sub2) || !sameChunks(chunks, chunks2) {
			t.Fatalf("%q: accepted, but written again as %q it reads back as %+v %q, %v", body, b.Bytes(), sub2, chunks2, err)
		}
	})
}

var reserveSeeds = []string{
	`{"max": 10, "strategy": "random", "lease": "5m", "wait": "20s", "consumer": "host-3/pid-77"}`,
	`{"max": 10000, "strategy": {"prefer_distinct": {"key": "company_id", "max": 1, "then": "oldest_first"}}, "lease": "24h", "wait": "60s"}`,
	`{"strategy": {"or_else": {"first": {"select_only": {"key": "mode", "value": "preview"}}, "fallback": "random"}}}`,
	`{}`, ``, `null`, `{"consumer": null, "lease": "1s", "wait": "0s"}`,
	// Bad inputs.
	`{"max": 0}`, `{"max": 10001}`, `{"max": 1.5}`, `{"max": "1"}`, `{"strategy": "fastest"}`, `{"strategy": 42}`,
	`{"lease": "0.5s"}`, `{"lease": "25h"}`, `{"lease": "soon"}`, `{"wait": "61s"}`, `{"wait": "-1s"}`,
	`{"consumer": "` + strings.Repeat("c", MaxConsumerBytes+1) + `"}`, `{"consumer": "a\u0000"}`, "{\"consumer\": \"\xff\"}",
	`{"consumer": "\ud800"}`, `{"consumer": 7}`, `{"unknown": 1}`, `{"max": 1} {"max": 2}`, `[1]`, `{"max": 1`,
}

func FuzzReserveBody(f *testing.F) {
	for _, s := range reserveSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := fuzzServer()
		req, err := s.parseReserve(body)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		if req.Max < 1 || req.Max > wire.MaxReserveChunks || req.Lease < wire.MinLease || req.Lease > wire.MaxLease || req.Wait < 0 || req.Wait > wire.MaxWait {
			t.Fatalf("%q: accepted %+v; out of bounds", body, req)
		}
		checkAcceptedText(t, "consumer", req.Consumer, MaxConsumerBytes)
		if err := req.Strategy.Validate(); err != nil {
			t.Fatalf("%q: accepted an invalid strategy: %v", body, err)
		}
		again, err := json.Marshal(map[string]any{"max": req.Max, "strategy": req.Strategy, "lease": req.Lease.String(),
			"wait": req.Wait.String(), "consumer": req.Consumer})
		if err != nil {
			t.Fatal(err)
		}
		req2, err := s.parseReserve(again)
		if err != nil || req2.Max != req.Max || !req2.Strategy.Equal(req.Strategy) || req2.Lease != req.Lease ||
			req2.Wait != req.Wait || req2.Consumer != req.Consumer || req2.MaxBytes != req.MaxBytes {
			t.Fatalf("%q: accepted, but written again as %s it reads back as %+v, %v", body, again, req2, err)
		}
	})
}
