package bench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// The bounds of the abuse workload (DESIGN.md §3): submissions, reserves and fails that
// push a bound past its limit — metadata of 1 MiB + 1, JSON and NDJSON; more strategic
// keys than allowed; a strategic key or value past PostgreSQL's btree row limit; NUL
// bytes; invalid UTF-8; a chunk_count of 100 000 001; a consumer name of 1 KiB; a reserve
// of max 10 001; fail errors with NUL, of 100 KiB or with invalid UTF-8. Each is answered
// 400, but the fail error of 100 KiB, which is kept cut (200). The hostile inputs case
// (abuse_inputs.go) sends them; the fails use the tokens of chunks that prepareTargets
// reserves.

// boundRequests lists the requests that push a bound past its limit. tokens are live
// reservations the fails may use; keyCount is the number of strategic keys of the
// submission with too many; the request of chunk_count 100 000 001 is given
// chunkCountTimeout.
func boundRequests(tokens []string, keyCount int, chunkCountTimeout time.Duration) []hostileRequest {
	keys := abuseTagged("many_keys")
	for i := range keyCount {
		keys[fmt.Sprintf("k%06d", i)] = i
	}
	// Past PostgreSQL's btree row limit (about 2.7 KB) even compressed: random letters.
	longKey := abuseTagged("long_key")
	longKey[randomLetters(2800)] = 1
	longValue := abuseTagged("long_value")
	longValue["v"] = randomLetters(2800)
	bigMetadata := strings.Repeat("m", 1<<20+1)
	yes := true
	tok := func(i int) string { return tokens[i%len(tokens)] }
	return []hostileRequest{
		postJSON("metadata of 1 MiB + 1", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "metadata": bigMetadata, "strategic_metadata": abuseTagged("metadata")})),
		{name: "metadata of 1 MiB + 1, NDJSON", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/x-ndjson",
			body: ndjsonBody(map[string]any{"metadata": bigMetadata, "strategic_metadata": abuseTagged("metadata_ndjson")}, `"x"`)},
		postJSON(progress.GroupDigits(int64(keyCount))+" strategic keys", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "strategic_metadata": keys})),
		postJSON("strategic key of 2 800 bytes", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "strategic_metadata": longKey})),
		postJSON("strategic value of 2 800 bytes", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "strategic_metadata": longValue})),
		postJSON("NUL in metadata", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "metadata": "a\x00b", "strategic_metadata": abuseTagged("nul_metadata")})),
		postJSON("NUL in a strategic value", "/v1/submissions", 400, mustJSON(map[string]any{"chunks": []string{"x"}, "strategic_metadata": map[string]any{abuseTag: "nul_value", "v": "a\x00b"}})),
		{name: "chunk_count 100 000 001", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/json", timeout: chunkCountTimeout,
			body: mustJSON(map[string]any{"prefix": "s3://opsq-abuse/", "chunk_count": 100_000_001, "strategic_metadata": abuseTagged("chunk_count")})},
		postJSON("invalid UTF-8 in a chunk", "/v1/submissions", 400, []byte(`{"chunks": ["a\xffb"], "strategic_metadata": {"`+abuseTag+`": "utf8"}}`)),
		{name: "invalid UTF-8 in a chunk, NDJSON", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/x-ndjson",
			body: ndjsonBody(map[string]any{"strategic_metadata": abuseTagged("utf8_ndjson")}, `"ok"`, "\"a\xffb\"")},
		postJSON("consumer of 1 KiB", "/v1/reserve", 400, mustJSON(map[string]any{"max": 1, "consumer": strings.Repeat("c", 1<<10), "strategy": strategyFor("abuse-none")})),
		postJSON("reserve max 10 001", "/v1/reserve", 400, mustJSON(map[string]any{"max": 10_001, "strategy": strategyFor("abuse-none")})),
		postJSON("fail error with NUL", "/v1/fail", 400, mustJSON(map[string]any{"failures": []any{map[string]any{"token": tok(0), "error": "a\x00b", "retry": yes}}})),
		postJSON("fail error of 100 KiB (kept cut)", "/v1/fail", 200, mustJSON(map[string]any{"failures": []any{map[string]any{"token": tok(1), "error": strings.Repeat("e", 100<<10), "retry": yes}}})),
		postJSON("fail error with invalid UTF-8", "/v1/fail", 400, []byte(`{"failures": [{"token": "`+tok(2)+`", "error": "a\xffb", "retry": true}]}`)),
	}
}

// ndjsonBody is the body of an NDJSON submission: its header, then its lines.
func ndjsonBody(header any, lines ...string) []byte {
	b := append(mustJSON(header), '\n')
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return b
}

// randomLetters returns n random letters, which compress poorly.
func randomLetters(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(mrand.IntN(26))
	}
	return string(b)
}

// prepareTargets reserves a few chunks of a submission of their own, whose tokens the
// hostile fails use.
func (a *abuseRun) prepareTargets(ctx context.Context) (string, []string, error) {
	retries := 1000
	chunks := make([]string, 16)
	for i := range chunks {
		chunks[i] = "target " + strconv.Itoa(i)
	}
	created, err := a.clients[0].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
		StrategicMetadata: benchTagged("abuse-target"), MaxRetries: &retries}, Chunks: chunks})
	if err != nil {
		return "", nil, fmt.Errorf("submitting the target submission: %w", err)
	}
	got, err := a.clients[0].Reserve(ctx, wire.ReserveRequest{Max: 16, Strategy: strategyFor("abuse-target"), Lease: "1h", Wait: "5s"})
	if err != nil {
		return created.ID, nil, fmt.Errorf("reserving the target chunks: %w", err)
	}
	var tokens []string
	for _, ch := range got {
		tokens = append(tokens, ch.Token)
	}
	if len(tokens) == 0 {
		return created.ID, nil, errors.New("reserving the target chunks: none")
	}
	return created.ID, tokens, nil
}
