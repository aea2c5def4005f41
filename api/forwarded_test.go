package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"opsq/api/wire"
	"opsq/queuer/peers"
	"opsq/queuer/tokens"
)

// forwardedCall sends one request marked forwarded by "opsq-x", with sig as its signature
// header ("" for none), and reads the whole answer.
func forwardedCall(t *testing.T, hc *http.Client, url, body, sig string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.ForwardedHeader, "opsq-x")
	if sig != "" {
		req.Header.Set(wire.ForwardedSignatureHeader, sig)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestForgedForwardedRequestsRefused: a reserve or extend marked forwarded by another
// instance without a valid signature is refused with 401 and not acted on (DESIGN.md §8,
// "Between instances"); signed with the cluster key, as instances sign them, it is served.
func TestForgedForwardedRequestsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	tok := reserveOne(t, e)
	mustSubmit(t, e, `{"chunks": ["free"]}`, 1)

	for _, tc := range []struct{ name, path, body, sig string }{
		{"reserve, no signature", "/v1/reserve", `{"max": 10}`, ""},
		{"reserve, a made-up signature", "/v1/reserve", `{"max": 10}`, "v1 key=1 at=1 mac=AAAAAAAAAAAAAAAAAAAAAA"},
		{"extend, no signature", "/v1/extend", `{"tokens": ["` + tok + `"], "lease": "1h"}`, ""},
	} {
		r := forwardedCall(t, http.DefaultClient, e.URL+tc.path, tc.body, tc.sig)
		expectError(t, r, http.StatusUnauthorized, "forwarded_signature", wire.ForwardedHeader)
	}
	// Signed as an instance signs: served, from this instance's shards, and the free chunk
	// is still there to serve (the forged reserves took nothing).
	keys := tokens.NewKeyring(e.Pool, slog.New(slog.DiscardHandler))
	if err := keys.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	signed := &http.Client{Transport: peers.SigningTransport(keys, "opsq-x", http.DefaultTransport)}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/v1/reserve", strings.NewReader(`{"max": 10}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := signed.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got wire.Reserved
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got.Chunks) != 1 || *got.Chunks[0].Input != "free" {
		t.Errorf("signed forwarded reserve: %d %s; want the free chunk", resp.StatusCode, body)
	}
}
