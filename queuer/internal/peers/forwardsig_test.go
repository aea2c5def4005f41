package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"opsq/queuer/identity"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
)

// TestForwardedSignature: a forwarded request's signature verifies as sent, once; not
// again (a replay), not once any part it covers changes (the caller's identity
// included), any character of it changes, or it is too old or too far ahead.
func TestForwardedSignature(t *testing.T) {
	t.Parallel()
	now := time.Now()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32)))
	body := []byte(`{"max":1,"lease":"30s"}`)
	want := identity.Caller{Name: "etl-consumer", Role: "consumer", Tenants: []string{"acme"}, Limited: true}
	caller := encodeCaller(want)
	fwd := Forwarded{From: "opsq-1", Caller: caller, To: "opsq-2"}
	sign := func() Forwarded {
		f := fwd
		f.Signature = signForwarded(k, http.MethodPost, "/v1/reserve", f, body, now, newNonce())
		return f
	}
	v := NewVerifier(k, "opsq-2", 0)
	f := sign()
	id, ok, err := v.Verify(http.MethodPost, "/v1/reserve", f, body, now)
	if err != nil || !ok || !reflect.DeepEqual(id, want) {
		t.Fatalf("Verify of a fresh signature: %+v, %v, %v; want the caller etl-consumer, consumer, limited to acme", id, ok, err)
	}
	if _, _, err := v.Verify(http.MethodPost, "/v1/reserve", f, body, now.Add(time.Second)); !errors.Is(err, ErrForwardedSignature) || !strings.Contains(err.Error(), "replay") {
		t.Errorf("Verify of the same request again: %v; want a replay refused", err)
	}
	admin := f
	admin.Caller = encodeCaller(identity.Caller{Name: "ops", Role: "admin"})
	if _, _, err := NewVerifier(k, "opsq-2", 0).Verify(http.MethodPost, "/v1/reserve", admin, body, now); !errors.Is(err, ErrForwardedSignature) {
		t.Errorf("Verify of the signature with another caller: %v; want it refused", err)
	}
	for _, tc := range []struct {
		name, method, uri, from, to, body, sig string
		at                                     time.Time
	}{
		{name: "another method", method: http.MethodPut},
		{name: "another path", uri: "/v1/extend"},
		{name: "a query added", uri: "/v1/reserve?x=1"},
		{name: "another instance", from: "opsq-3"},
		{name: "signed for another destination", to: "-resign opsq-3"},
		{name: "sent to another destination", to: "opsq-3"},
		{name: "no destination", to: "-resign "},
		{name: "version 2, without a destination", sig: "-v2"},
		{name: "another body", body: `{"max":1000,"lease":"30s"}`},
		{name: "no body", body: "-"},
		{name: "no signature", sig: "-"},
		{name: "older than ForwardedMaxAge", at: now.Add(ForwardedMaxAge + time.Second)},
		{name: "ahead by more than ForwardedMaxAge", at: now.Add(-ForwardedMaxAge - time.Second)},
		{name: "garbage", sig: "v2 key=2 at=x nonce=y mac=z"},
		{name: "version 1, without a nonce", sig: "v1 key=2 at=1 mac=AAAAAAAAAAAAAAAAAAAAAA"},
		{name: "too long", sig: "v2 key=2 at=1 nonce=AAAAAAAAAAAAAAAAAAAAAA mac=" + strings.Repeat("A", maxSignatureHeader)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sign()
			method, uri, b, at := http.MethodPost, "/v1/reserve", body, now
			if tc.method != "" {
				method = tc.method
			}
			if tc.uri != "" {
				uri = tc.uri
			}
			if tc.from != "" {
				f.From = tc.from
			}
			if to, ok := strings.CutPrefix(tc.to, "-resign "); ok {
				f.To = to // signed for to, and sent to opsq-2
				f.Signature = signForwarded(k, http.MethodPost, "/v1/reserve", f, body, now, newNonce())
			} else if tc.to != "" {
				f.To = tc.to
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
				f.Signature = ""
			case "-v2": // as an instance before issue 31 signed it, the destination left out
				f.Signature = "v2" + strings.TrimPrefix(f.Signature, "v3")
			default:
				f.Signature = tc.sig
			}
			if !tc.at.IsZero() {
				at = tc.at
			}
			if _, _, err := NewVerifier(k, "opsq-2", 0).Verify(method, uri, f, b, at); !errors.Is(err, ErrForwardedSignature) {
				t.Errorf("Verify = %v; want ErrForwardedSignature", err)
			}
		})
	}
	// Every one-character change of the header is refused.
	f = sign()
	sig := f.Signature
	for i := range sig {
		for _, c := range []byte{'0', '1', 'A', 'z', '_', ' '} {
			if sig[i] == c {
				continue
			}
			forged := f
			forged.Signature = sig[:i] + string(c) + sig[i+1:]
			if _, _, err := NewVerifier(k, "opsq-2", 0).Verify(http.MethodPost, "/v1/reserve", forged, body, now); err == nil {
				t.Errorf("Verify accepted %q, %q with one character changed", forged.Signature, sig)
			}
		}
	}
}

// TestVerifierNonces: the nonces kept are forgotten once their signatures are too old to
// verify anyway, and never more than the bound are kept (past it, forwarded requests are
// refused until the oldest age out).
func TestVerifierNonces(t *testing.T) {
	t.Parallel()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("n", 32)))
	v := NewVerifier(k, "opsq-2", 3)
	now := time.Now()
	send := func(at, check time.Time) error {
		f := Forwarded{From: "opsq-1", To: "opsq-2"}
		f.Signature = signForwarded(k, http.MethodPost, "/v1/extend", f, nil, at, newNonce())
		_, _, err := v.Verify(http.MethodPost, "/v1/extend", f, nil, check)
		return err
	}
	for i := range 3 {
		if err := send(now, now); err != nil {
			t.Fatalf("forwarded request %d: %v", i+1, err)
		}
	}
	if err := send(now, now); !errors.Is(err, ErrForwardedSignature) {
		t.Errorf("a fourth forwarded request with 3 nonces kept, the bound: %v; want it refused", err)
	}
	later := now.Add(ForwardedMaxAge + time.Second)
	if err := send(later, later); err != nil {
		t.Errorf("a forwarded request once the first three aged out: %v; want it accepted", err)
	}
	v.mu.Lock()
	n := len(v.mu.seen)
	v.mu.Unlock()
	if n != 1 {
		t.Errorf("%d nonces kept; want 1", n)
	}
}

// TestSigningTransport: the peer client's transport marks and signs each request, as the
// receiving instance checks it, with the caller's identity from the request's context in
// place of its key, and leaves the caller's request as it was.
func TestSigningTransport(t *testing.T) {
	t.Parallel()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("h", 32)))
	v := NewVerifier(k, "opsq-2", 0)
	type seen struct {
		id   identity.Caller
		ok   bool
		err  error
		auth string
	}
	got := make(chan seen, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f := Forwarded{From: r.Header.Get(opsqtype.ForwardedHeader), Signature: r.Header.Get(opsqtype.ForwardedSignatureHeader),
			Caller: r.Header.Get(opsqtype.ForwardedCallerHeader), To: r.Header.Get(opsqtype.ForwardedToHeader)}
		id, ok, err := v.Verify(r.Method, r.RequestURI, f, body, time.Now())
		got <- seen{id, ok, err, r.Header.Get("Authorization")}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: SigningTransport(k, "opsq-9", http.DefaultTransport)}
	caller := identity.Caller{Name: "etl-consumer", Role: "consumer"}
	for i, ctx := range []struct {
		withCaller bool
	}{{true}, {false}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/extend", strings.NewReader(`{"tokens":["t"]}`))
		req.Header.Set("Authorization", "Bearer opsq_the-callers-key")
		req.Header.Set(opsqtype.ForwardedToHeader, "opsq-2")
		if ctx.withCaller {
			req = req.WithContext(identity.With(req.Context(), caller))
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := <-got
		want := seen{}
		if ctx.withCaller {
			want = seen{id: caller, ok: true}
		} else {
			want.auth = "Bearer opsq_the-callers-key" // a test's own key, passed as it is
		}
		if fmt.Sprint(s) != fmt.Sprint(want) {
			t.Errorf("request %d: the receiver saw %+v; want %+v", i+1, s, want)
		}
		if req.Header.Get(opsqtype.ForwardedSignatureHeader) != "" || req.Header.Get("Authorization") == "" {
			t.Error("SigningTransport changed the caller's request")
		}
	}
}

// TestSigningTransportTraceparent: a forwarded request in a traced request's span carries
// its traceparent, so that the peer's span joins the trace; one outside a span carries none.
func TestSigningTransportTraceparent(t *testing.T) {
	t.Parallel()
	k := tokens.NewStaticKeyring([]byte(strings.Repeat("h", 32)))
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	defer srv.Close()
	hc := &http.Client{Transport: SigningTransport(k, "opsq-9", http.DefaultTransport)}
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{traced, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{t.Context(), ""},
	} {
		req, _ := http.NewRequestWithContext(tc.ctx, http.MethodPost, srv.URL+"/v1/reserve", strings.NewReader(`{}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := <-got; h != tc.want {
			t.Errorf("the peer got traceparent %q; want %q", h, tc.want)
		}
	}
}
