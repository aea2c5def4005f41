package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"opsq/api/wire"
)

// TestMaxLease: under OPSQ_MAX_LEASE (Config.MaxLease) a reserve or extend that asks for a
// longer lease is a 400 naming "lease" and reserves or extends nothing; one within it is
// served; a request that names no lease gets the lesser of 5m and the bound.
func TestMaxLease(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxLease: time.Minute})
	if r := postJSON(t, e, "/v1/submissions", `{"chunks": ["a", "b"]}`); r.Status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	expectError(t, postJSON(t, e, "/v1/reserve", `{"lease": "61s"}`), http.StatusBadRequest, "", "lease", "1m0s")

	reserve := func(body string) wire.ReservedChunk {
		t.Helper()
		r := postJSON(t, e, "/v1/reserve", body)
		var got wire.Reserved
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 1 {
			t.Fatalf("reserve %s: %d %s; want one chunk (the refused reserve took none)", body, r.Status, r.Body)
		}
		return got.Chunks[0]
	}
	before := time.Now()
	c := reserve(`{"lease": "1m"}`)
	if c.ExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("a lease of 1m expires at %s; want within a minute", c.ExpiresAt)
	}
	d := reserve(`{}`) // no lease: the default, 5m, cut to the bound
	if d.ExpiresAt.After(time.Now().Add(time.Minute)) || d.ExpiresAt.Before(before.Add(50*time.Second)) {
		t.Errorf("a reserve without a lease expires at %s (%s from now); want the bound, 1m", d.ExpiresAt, time.Until(d.ExpiresAt))
	}

	expectError(t, postJSON(t, e, "/v1/extend", fmt.Sprintf(`{"tokens": [%q], "lease": "2m"}`, c.Token)), http.StatusBadRequest, "", "lease")
	r := postJSON(t, e, "/v1/extend", fmt.Sprintf(`{"tokens": [%q], "lease": "1m"}`, c.Token))
	var ext wire.TokenResults
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &ext) != nil || len(ext.Results) != 1 || ext.Results[0].Status != wire.StatusExtended {
		t.Fatalf("extend by 1m: %d %s; want extended", r.Status, r.Body)
	}
}
