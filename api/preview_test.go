package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"opsq/api/wire"
)

// TestReservePreview: POST /v1/reserve/preview answers what a reserve would hand out, in
// order, without tokens, and reserves nothing: the reserve that follows gets the same.
func TestReservePreview(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	a := mustSubmit(t, e, `{"chunks": ["a0", "a1", "a2"], "strategic_metadata": {"company_id": 1}}`, 3)
	b := mustSubmit(t, e, `{"chunks": ["b0", "b1"], "strategic_metadata": {"company_id": 2}, "priority": 9}`, 2)

	preview := func(body string) []wire.PreviewChunk {
		t.Helper()
		r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve/preview", "application/json", strings.NewReader(body))
		if r.Status != http.StatusOK {
			t.Fatalf("POST /v1/reserve/preview %s: %d %s", body, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "token") {
			t.Errorf("preview answer %s holds a token; want none", r.Body)
		}
		var p wire.Preview
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		return p.Chunks
	}
	keys := func(chunks []wire.PreviewChunk) string {
		var s []string
		for _, ch := range chunks {
			s = append(s, fmt.Sprintf("%s/%d", ch.SubmissionID, ch.ChunkIndex))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct{ name, body, want string }{
		{"oldest_first", `{"max": 4, "strategy": "oldest_first"}`, fmt.Sprintf("%s/0 %s/1 %s/2 %s/0", a, a, a, b)},
		{"custom_priority", `{"max": 3, "strategy": "custom_priority"}`, fmt.Sprintf("%s/0 %s/1 %s/0", b, b, a)},
		{"select_only", `{"max": 10, "strategy": {"select_only": {"key": "company_id", "value": 2, "then": "newest_first"}}}`, fmt.Sprintf("%s/1 %s/0", b, b)},
		{"max_simultaneous", `{"max": 10, "strategy": {"max_simultaneous": {"key": "company_id", "max": 1, "then": "oldest_first"}}}`, fmt.Sprintf("%s/0 %s/0", a, b)},
		{"prefer_distinct", `{"max": 3, "strategy": {"prefer_distinct": {"key": "company_id", "max": 1, "then": "oldest_first"}}}`, fmt.Sprintf("%s/0 %s/0 %s/1", a, b, a)},
		// A preview takes no rate_limit token: with the buckets untouched, the order of then.
		{"rate_limit", `{"max": 2, "strategy": {"rate_limit": {"key": "company_id", "per_second": 1, "burst": 1, "then": "oldest_first"}}}`, fmt.Sprintf("%s/0 %s/1", a, a)},
		// The turns a reserve would give: company 1 two chunks, company 2 one, then 1 again.
		// A preview moves no turn: asked twice, it shows the same.
		{"weighted_fair", `{"max": 4, "strategy": {"weighted_fair": {"key": "company_id", "weights": {"1": 2, "2": 1}, "then": "oldest_first"}}}`, fmt.Sprintf("%s/0 %s/1 %s/0 %s/2", a, a, b, a)},
		{"weighted_fair again", `{"max": 4, "strategy": {"weighted_fair": {"key": "company_id", "weights": {"1": 2, "2": 1}, "then": "oldest_first"}}}`, fmt.Sprintf("%s/0 %s/1 %s/0 %s/2", a, a, b, a)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys(preview(tc.body)); got != tc.want {
				t.Errorf("preview of %s: %s; want %s", tc.body, got, tc.want)
			}
		})
	}
	got := preview(`{"max": 2, "strategy": "oldest_first"}`)
	if v := got[0].StrategicMetadata["company_id"]; v != wire.Int(1) {
		t.Errorf("preview strategic metadata: %v; want company_id 1", got[0].StrategicMetadata)
	}
	// Nothing was reserved: a reserve now gets the previewed chunks.
	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 2, "strategy": "oldest_first"}`))
	var res wire.Reserved
	if err := json.Unmarshal(r.Body, &res); err != nil || len(res.Chunks) != 2 {
		t.Fatalf("reserve after the previews: %d %s", r.Status, r.Body)
	}
	for i, ch := range res.Chunks {
		if ch.SubmissionID != got[i].SubmissionID || ch.ChunkIndex != got[i].ChunkIndex {
			t.Errorf("reserve handed out %s/%d as chunk %d; the preview said %s/%d", ch.SubmissionID, ch.ChunkIndex, i, got[i].SubmissionID, got[i].ChunkIndex)
		}
	}
	// Reserved here: no longer in the preview.
	if got := keys(preview(`{"max": 1, "strategy": "oldest_first"}`)); got != fmt.Sprintf("%s/2", a) {
		t.Errorf("preview after reserving %s/0 and /1: %s; want %s/2", a, got, a)
	}

	r = httpCall(t, http.MethodPost, e.URL+"/v1/reserve/preview", "application/json", strings.NewReader(`{"strategy": {"prefer_distinct": {"key": "k"}}}`))
	expectError(t, r, http.StatusBadRequest, "bad_request", "strategy.prefer_distinct")
	for _, bad := range []struct{ strategy, path string }{
		{`{"rate_limit": {"key": "k", "per_second": 0, "burst": 1}}`, "strategy.rate_limit.per_second"},
		{`{"rate_limit": {"key": "k", "per_second": 1000001, "burst": 1}}`, "strategy.rate_limit.per_second"},
		{`{"or_else": {"first": "random", "fallback": {"rate_limit": {"key": "k", "per_second": 5, "burst": -1}}}}`, "strategy.or_else.fallback.rate_limit.burst"},
		{`{"weighted_fair": {"key": "k", "weights": {"acme": 0}}}`, "strategy.weighted_fair.weights.acme"},
		{`{"weighted_fair": {"key": "k", "weights": {}, "default_weight": -1}}`, "strategy.weighted_fair.default_weight"},
		{`{"or_else": {"first": "random", "fallback": {"weighted_fair": {"key": "k", "weights": {` + manyWeights(1001) + `}}}}}`, "strategy.or_else.fallback.weighted_fair.weights"},
	} {
		for _, route := range []string{"/v1/reserve/preview", "/v1/reserve"} {
			r = httpCall(t, http.MethodPost, e.URL+route, "application/json", strings.NewReader(`{"strategy": `+bad.strategy+`}`))
			expectError(t, r, http.StatusBadRequest, "bad_request", bad.path)
		}
	}
}

// manyWeights is n members of a weights object, "v0": 1, "v1": 1, ….
func manyWeights(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"v%d": 1`, i)
	}
	return strings.Join(parts, ", ")
}
