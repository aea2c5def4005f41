package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
)

// TestAuthFailuresThrottled: an address's first 20 failures in a second are 401, the next
// ones 429 with Retry-After until 5 s have passed; another address is not concerned; the
// failures are logged at most once a second per address, with the route, the address and
// a hash prefix of the key, never the key, and the count of those not logged.
func TestAuthFailuresThrottled(t *testing.T) {
	t.Parallel()
	var logged syncBuffer
	f := newAuthFailures(slog.New(slog.NewTextHandler(&logged, nil)), 0)
	now := time.Unix(1_000_000, 0)
	f.now = func() time.Time { return now }
	e := echo.New()
	refusal := errors.New("401")
	key := apikeys.Generate()
	fail := func(addr string) error {
		req := httptest.NewRequest(http.MethodPost, "/v1/reserve", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("X-Forwarded-For", "10.9.9.9") // not believed
		c := e.NewContext(req, httptest.NewRecorder())
		c.SetPath("/v1/reserve")
		return f.failed(c, key, "unknown API key", refusal)
	}
	for i := range AuthFailuresPerSecondDefault {
		if err := fail("192.0.2.1"); err != refusal {
			t.Fatalf("failure %d: %v; want the 401", i+1, err)
		}
		now = now.Add(10 * time.Millisecond)
	}
	err := fail("192.0.2.1")
	var e429 *Error
	if !errors.As(err, &e429) || e429.Status != http.StatusTooManyRequests || e429.RetryAfter != authThrottle {
		t.Fatalf("failure 21 within the second: %v; want 429 with Retry-After 5s", err)
	}
	if err := fail("192.0.2.2"); err != refusal {
		t.Errorf("another address's first failure: %v; want the 401", err)
	}
	now = now.Add(4 * time.Second) // the throttle lasts
	if err := fail("192.0.2.1"); !errors.As(err, &e429) || e429.RetryAfter != time.Second {
		t.Errorf("a failure 4s into the throttle: %v; want 429 with 1s left", err)
	}
	now = now.Add(2 * time.Second) // over
	if err := fail("192.0.2.1"); err != refusal {
		t.Errorf("a failure after the throttle: %v; want the 401", err)
	}

	log := logged.String()
	if n := strings.Count(log, "authentication failed"); n != 5 {
		t.Errorf("%d log lines; want 5 (192.0.2.1 at 0s, at 0.2s as its throttle starts with the 19 it did not log, at 4.2s, at 6.2s; 192.0.2.2 once):\n%s", n, log)
	}
	for _, want := range []string{"address=192.0.2.1", "route=\"POST /v1/reserve\"", "key_sha256_prefix=" + keyHint(key), "failures_not_logged=19", "throttled_until"} {
		if !strings.Contains(log, want) {
			t.Errorf("log %q; want it to mention %s", log, want)
		}
	}
	if strings.Contains(log, key[len(apikeys.Prefix):len(apikeys.Prefix)+6]) || strings.Contains(log, "10.9.9.9") {
		t.Errorf("log %q holds part of the key, or the X-Forwarded-For address", log)
	}
}

// TestAuthFailuresBounded: the addresses tracked stay under authMaxAddrs whatever the
// number of addresses failing.
func TestAuthFailuresBounded(t *testing.T) {
	t.Parallel()
	f := newAuthFailures(slog.New(slog.DiscardHandler), 0)
	e := echo.New()
	for i := range authMaxAddrs * 3 {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		_ = f.failed(e.NewContext(req, httptest.NewRecorder()), "", "missing API key", errors.New("401"))
	}
	f.mu.Lock()
	n := len(f.mu.byAddr)
	f.mu.Unlock()
	if n > authMaxAddrs {
		t.Errorf("%d addresses tracked; want at most %d", n, authMaxAddrs)
	}
}

// TestAuthFailuresOverHTTP: against a server with keys, an address that keeps sending an
// unknown key ends up with 429 and Retry-After, while a valid key from the same address
// is still served.
func TestAuthFailuresOverHTTP(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	bad := apikeys.Generate()
	var got reply
	for i := 0; i < 2000; i++ {
		got = a.call(t, bad, http.MethodPost, "/v1/reserve", `{}`)
		if got.Status != http.StatusUnauthorized {
			break
		}
	}
	expectError(t, got, http.StatusTooManyRequests, "too_many_auth_failures")
	if got.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	if r := a.call(t, a.key["consumer"], http.MethodPost, "/v1/reserve", `{}`); r.Status != http.StatusOK {
		t.Errorf("a valid key from the throttled address: %d %s; want 200", r.Status, r.Body)
	}
	if strings.Contains(a.logs.String(), bad[len(apikeys.Prefix):len(apikeys.Prefix)+8]) {
		t.Errorf("the log holds part of the unknown key")
	}
}
