package peers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/queuer/tokens"
)

// TestForwardedSignature: a forwarded request's signature verifies as sent, and not once
// any part it covers changes, any character of it changes, or it is too old or too far
// ahead.
func TestForwardedSignature(t *testing.T) {
	t.Parallel()
	now := time.Now()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32)))
	body := []byte(`{"max":1,"lease":"30s"}`)
	sig := signForwarded(k, http.MethodPost, "/v1/reserve", "opsq-1", body, now)
	if err := VerifyForwarded(k, http.MethodPost, "/v1/reserve", "opsq-1", body, sig, now); err != nil {
		t.Fatalf("VerifyForwarded of a fresh signature: %v", err)
	}
	for _, tc := range []struct {
		name, method, uri, from, body, sig string
		at                                 time.Time
	}{
		{name: "another method", method: http.MethodPut},
		{name: "another path", uri: "/v1/extend"},
		{name: "a query added", uri: "/v1/reserve?x=1"},
		{name: "another instance", from: "opsq-2"},
		{name: "another body", body: `{"max":1000,"lease":"30s"}`},
		{name: "no body", body: "-"},
		{name: "no signature", sig: "-"},
		{name: "older than ForwardedMaxAge", at: now.Add(ForwardedMaxAge + time.Second)},
		{name: "ahead by more than ForwardedMaxAge", at: now.Add(-ForwardedMaxAge - time.Second)},
		{name: "garbage", sig: "v1 key=2 at=x mac=y"},
		{name: "too long", sig: "v1 key=2 at=1 mac=" + strings.Repeat("A", maxSignatureHeader)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, uri, from, b, s, at := http.MethodPost, "/v1/reserve", "opsq-1", body, sig, now
			if tc.method != "" {
				method = tc.method
			}
			if tc.uri != "" {
				uri = tc.uri
			}
			if tc.from != "" {
				from = tc.from
			}
			switch tc.body {
			case "":
			case "-":
				b = nil
			default:
				b = []byte(tc.body)
			}
			switch tc.sig {
			case "":
			case "-":
				s = ""
			default:
				s = tc.sig
			}
			if !tc.at.IsZero() {
				at = tc.at
			}
			if err := VerifyForwarded(k, method, uri, from, b, s, at); !errors.Is(err, ErrForwardedSignature) {
				t.Errorf("VerifyForwarded = %v; want ErrForwardedSignature", err)
			}
		})
	}
	// Every one-character change of the header is refused.
	for i := range sig {
		for _, c := range []byte{'0', '1', 'A', 'z', '_', ' '} {
			if sig[i] == c {
				continue
			}
			forged := sig[:i] + string(c) + sig[i+1:]
			if err := VerifyForwarded(k, http.MethodPost, "/v1/reserve", "opsq-1", body, forged, now); err == nil {
				t.Errorf("VerifyForwarded accepted %q, %q with one character changed", forged, sig)
			}
		}
	}
}

// TestSigningTransport: the peer client's transport marks and signs each request, as the
// receiving instance checks it, and leaves the caller's request as it was.
func TestSigningTransport(t *testing.T) {
	t.Parallel()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("h", 32)))
	var verified error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		verified = VerifyForwarded(k, r.Method, r.RequestURI, r.Header.Get(wire.ForwardedHeader), body,
			r.Header.Get(wire.ForwardedSignatureHeader), time.Now())
	}))
	defer srv.Close()
	hc := &http.Client{Transport: SigningTransport(k, "opsq-9", http.DefaultTransport)}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/extend", strings.NewReader(`{"tokens":["t"]}`))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if verified != nil {
		t.Errorf("the receiver could not verify a signed request: %v", verified)
	}
	if req.Header.Get(wire.ForwardedSignatureHeader) != "" {
		t.Error("SigningTransport changed the caller's request")
	}
}
