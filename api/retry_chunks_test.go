package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/strategy"
)

// TestRetryChunkIndexes (issue 33, point 6): POST …/retry with chunk_indexes retries only
// those chunks; a bad index is a 400 naming chunk_indexes[i] and changes nothing; a
// selection none of which failed is 409.
func TestRetryChunkIndexes(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "on_failure": "continue"}`, 3)
	got, err := e.Q.Reserve(t.Context(), queuer.ReserveRequest{Max: 3, Lease: wire.LeaseDefault, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if err != nil || len(got) != 3 {
		t.Fatalf("reserve: %d chunks, %v; want 3", len(got), err)
	}
	if _, err := e.Q.Fail(t.Context(), []queuer.Failure{{Token: got[0].Token, Error: "x"}, {Token: got[1].Token, Error: "y"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Q.Complete(t.Context(), []queuer.Completion{{Token: got[2].Token, Output: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	retry := func(body string) reply {
		return httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/retry", "application/json", strings.NewReader(body))
	}
	for _, c := range []struct{ body, names string }{
		{`{"chunk_indexes": [0, -1]}`, "chunk_indexes[1]"},
		{`{"chunk_indexes": [0, "1"]}`, "chunk_indexes[1]"},
		{`{"chunk_indexes": [0, 1.5]}`, "chunk_indexes[1]"},
		{`{"chunk_indexes": [1, 3]}`, "chunk_indexes[1]"}, // past the last chunk
		{`{"chunk_indexes": []}`, "chunk_indexes"},
		{`{"chunk_indexes": 1}`, "chunk_indexes"},
		{`{"chunk_indexes": [` + strings.TrimSuffix(strings.Repeat("0,", queuer.RetryChunksMax+1), ",") + `]}`, "chunk_indexes"},
		{`{"chunk_indexes": [1], "chunks": "failed"}`, "chunk_indexes"},
	} {
		expectError(t, retry(c.body), http.StatusBadRequest, "bad_request", c.names)
	}
	expectField(t, statusOf(t, e, id), "state", `"failed"`)
	expectError(t, retry(`{"chunk_indexes": [2]}`), http.StatusConflict, "nothing_to_retry", "chunk_indexes")

	r := retry(`{"chunk_indexes": [1]}`)
	var st wire.Status
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &st) != nil || st.State != wire.StateInProgress || st.ChunksFailed != 1 {
		t.Fatalf("retry of chunk 1: %d %s; want 200, in progress with chunk 0 still failed", r.Status, r.Body)
	}
	again, err := e.Q.Reserve(t.Context(), queuer.ReserveRequest{Max: 3, Lease: wire.LeaseDefault, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if err != nil || len(again) != 1 || again[0].ChunkIndex != 1 {
		t.Errorf("after the retry of chunk 1: %+v, %v; want chunk 1 alone", again, err)
	}
}
