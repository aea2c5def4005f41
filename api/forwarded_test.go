package api

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/identity"
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
	signing, err := queuer.SigningTransport(t.Context(), e.Pool, "opsq-x", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	signed := &http.Client{Transport: signing}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/v1/reserve", strings.NewReader(`{"max": 10}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.ForwardedToHeader, e.Q.InstanceID())
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

// captureTransport records the requests it is given and answers 204.
type captureTransport struct{ reqs []*http.Request }

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.reqs = append(c.reqs, r)
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
}

// signedAs returns the headers and body of a request to path of the instance to that an
// instance forwards for caller, as its peer client signs it.
func signedAs(t *testing.T, pool *pgxpool.Pool, to string, caller identity.Caller, path, body string) (http.Header, string) {
	t.Helper()
	var ct captureTransport
	signing, err := queuer.SigningTransport(t.Context(), pool, "opsq-x", &ct)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: signing}
	req, _ := http.NewRequestWithContext(identity.With(t.Context(), caller), http.MethodPost, "http://peer"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer the-callers-key-stays-home")
	req.Header.Set(wire.ForwardedToHeader, to)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := ct.reqs[0].Header.Clone()
	if h.Get("Authorization") != "" {
		t.Fatalf("a forwarded request carries the caller's key: %q", h.Get("Authorization"))
	}
	return h, body
}

// sendHeaders posts body to url with exactly h (plus key, when given, as Authorization).
func sendHeaders(t *testing.T, url string, h http.Header, body, key string) reply {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header = h.Clone()
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestForwardedRequestsUsedOnceForTheirCaller: with keys required, a forwarded request
// carries the caller's identity under the signature and no key, and is served for that
// identity; the same request sent again is refused, with or without another caller's key
// added; a signed identity whose role may not call the route is 403; a caller header
// changed after signing is refused.
func TestForwardedRequestsUsedOnceForTheirCaller(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	consumer := identity.Caller{Name: "consumer", Role: "consumer"}
	h, body := signedAs(t, a.Pool, a.Q.InstanceID(), consumer, "/v1/reserve", `{"max": 10}`)
	if r := sendHeaders(t, a.URL+"/v1/reserve", h, body, ""); r.Status != http.StatusOK {
		t.Fatalf("a forwarded reserve for a consumer: %d %s; want 200", r.Status, r.Body)
	}
	expectError(t, sendHeaders(t, a.URL+"/v1/reserve", h, body, ""), http.StatusUnauthorized, "forwarded_signature", "replay")
	expectError(t, sendHeaders(t, a.URL+"/v1/reserve", h, body, a.key["admin"]), http.StatusUnauthorized, "forwarded_signature", "replay")

	h, body = signedAs(t, a.Pool, a.Q.InstanceID(), identity.Caller{Name: "producer", Role: "producer"}, "/v1/reserve", `{"max": 10}`)
	expectError(t, sendHeaders(t, a.URL+"/v1/reserve", h, body, ""), http.StatusForbidden, "forbidden", "producer")

	h, body = signedAs(t, a.Pool, a.Q.InstanceID(), consumer, "/v1/extend", `{"tokens": []}`)
	h.Set(wire.ForwardedCallerHeader, base64.RawURLEncoding.EncodeToString([]byte(`{"name":"admin","role":"admin"}`)))
	expectError(t, sendHeaders(t, a.URL+"/v1/extend", h, body, ""), http.StatusUnauthorized, "forwarded_signature")

	// The signature covers the body's digest header, checked before the body is read: a
	// body swapped under it is refused, as is a request without the header.
	h, _ = signedAs(t, a.Pool, a.Q.InstanceID(), consumer, "/v1/reserve", `{"max": 1}`)
	expectError(t, sendHeaders(t, a.URL+"/v1/reserve", h, `{"max": 100}`, ""), http.StatusUnauthorized, "forwarded_signature", "body")
	h, body = signedAs(t, a.Pool, a.Q.InstanceID(), consumer, "/v1/reserve", `{"max": 1}`)
	h.Del(wire.ForwardedDigestHeader)
	expectError(t, sendHeaders(t, a.URL+"/v1/reserve", h, body, ""), http.StatusUnauthorized, "forwarded_signature", wire.ForwardedDigestHeader)

	// Marked forwarded, signed, but on a route no instance forwards: the key decides.
	h, body = signedAs(t, a.Pool, a.Q.InstanceID(), identity.Caller{Name: "admin", Role: "admin"}, "/v1/submissions", `{"chunks": ["a"]}`)
	expectError(t, sendHeaders(t, a.URL+"/v1/submissions", h, body, ""), http.StatusUnauthorized, "unauthorized")
}

// TestForwardedRequestBoundToItsDestination (issue 31, finding 6): a forwarded request
// is signed for the one instance it is sent to. A reserve signed for another instance —
// as one captured on its way there and replayed here, where its nonce was never seen —
// is refused and takes nothing; the same reserve signed for this instance is served.
func TestForwardedRequestBoundToItsDestination(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	mustSubmit(t, e, `{"chunks": ["a", "b", "c"]}`, 3)
	signing, err := queuer.SigningTransport(t.Context(), e.Pool, "opsq-x", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	signed := &http.Client{Transport: signing}
	reserve := func(to string) reply {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/v1/reserve", strings.NewReader(`{"max": 10}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.ForwardedToHeader, to)
		resp, err := signed.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	expectError(t, reserve("opsq-elsewhere"), http.StatusUnauthorized, "forwarded_signature", "opsq-elsewhere")
	r := reserve(e.Q.InstanceID())
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 3 {
		t.Errorf("a reserve signed for this instance: %d %s; want the 3 chunks (the one signed for another took none)", r.Status, r.Body)
	}
}
