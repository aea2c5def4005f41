package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Failed authentications (DESIGN.md §8). Each is logged — the route, the client's address,
// and what identifies the key without giving it: a known key's name (expired, revoked), or
// the first 12 hex digits of an unknown key's SHA-256 — at most once a second per address,
// with the count of the failures not logged since, and at once when its throttle starts.
// An address with more than Config.AuthFailuresPerSecond (default 20) failures in a second
// is throttled for authThrottle: its failures are answered 429 (with Retry-After) instead
// of 401, and not logged one by one. The dashboard's login goes through the same (api.go).
//
// A request with a valid key is never refused here: behind a load balancer every client
// has the balancer's address, and one client looping on a revoked key must not lock the
// others out. Guessing a key is not what this stops — a key holds 256 random bits (at
// least 128 for one made by hand) — but the cost and the log of an address that keeps
// trying.
//
// The address is the connection's peer (net/http's RemoteAddr), never X-Forwarded-For,
// which any client can write.
const (
	// AuthFailuresPerSecondDefault is the default of Config.AuthFailuresPerSecond.
	AuthFailuresPerSecondDefault = 20
	authThrottle                 = 5 * time.Second
	authLogEvery                 = time.Second
	// authMaxAddrs bounds the addresses tracked; past it the stalest are forgotten.
	authMaxAddrs = 10_000
)

// authFailures counts failed authentications per client address. Safe for concurrent use.
type authFailures struct {
	log       *slog.Logger
	perSecond int
	now       func() time.Time
	mu        struct {
		sync.Mutex
		byAddr map[string]*addrFailures
	}
}

// addrFailures is one address's failures: n in the second from window, throttled until
// until; the last log line at logged, and the failures since it that were not logged.
type addrFailures struct {
	window, until, logged time.Time
	n, unlogged           int
}

func newAuthFailures(log *slog.Logger, perSecond int) *authFailures {
	if perSecond <= 0 {
		perSecond = AuthFailuresPerSecondDefault
	}
	f := &authFailures{log: log, perSecond: perSecond, now: time.Now}
	f.mu.byAddr = map[string]*addrFailures{}
	return f
}

// failed records a failed authentication of c's request with key ("" when it sent none),
// refused with refusal (a 401), and returns what to answer: refusal, or 429 when the
// address is throttled. why says what was wrong, for the log; it never holds the key.
func (f *authFailures) failed(c echo.Context, key, why string, refusal error) error {
	req := c.Request()
	addr := clientAddr(req)
	now := f.now()
	f.mu.Lock()
	a := f.addrLocked(addr, now)
	if now.Sub(a.window) >= time.Second {
		a.window, a.n = now, 0
	}
	a.n++
	starts := a.n > f.perSecond && !now.Before(a.until)
	if starts {
		a.until = now.Add(authThrottle)
	}
	throttled, until := now.Before(a.until), a.until
	var unlogged int
	// A throttle that starts is logged at once, with the failures before it: an address
	// that fails in a burst and stops would otherwise leave them uncounted in the log.
	log := now.Sub(a.logged) >= authLogEvery || starts
	if log {
		a.logged, unlogged, a.unlogged = now, a.unlogged, 0
	} else {
		a.unlogged++
	}
	f.mu.Unlock()

	if log {
		attrs := []any{slog.String("address", addr), slog.String("route", req.Method+" "+c.Path()), slog.String("reason", why)}
		if key != "" {
			attrs = append(attrs, slog.String("key_sha256_prefix", keyHint(key)))
		}
		if unlogged > 0 {
			attrs = append(attrs, slog.Int("failures_not_logged", unlogged))
		}
		if throttled {
			attrs = append(attrs, slog.Time("throttled_until", until))
		}
		f.log.WarnContext(req.Context(), "authentication failed", attrs...)
	}
	if throttled {
		return &Error{Status: http.StatusTooManyRequests, Code: "too_many_auth_failures", RetryAfter: until.Sub(now),
			Message: fmt.Sprintf("more than %d failed authentications in a second from this address; wait, then retry with a valid key", f.perSecond)}
	}
	return refusal
}

// addrLocked returns the failures of addr, making room for it if needed.
func (f *authFailures) addrLocked(addr string, now time.Time) *addrFailures {
	if a, ok := f.mu.byAddr[addr]; ok {
		return a
	}
	if len(f.mu.byAddr) >= authMaxAddrs {
		f.pruneLocked(now)
	}
	a := &addrFailures{}
	f.mu.byAddr[addr] = a
	return a
}

// pruneLocked forgets the addresses that are neither counting nor throttled, and if none
// is, any quarter of them (a flood of addresses must not grow the map).
func (f *authFailures) pruneLocked(now time.Time) {
	for addr, a := range f.mu.byAddr {
		if now.Sub(a.window) >= time.Second && !now.Before(a.until) && now.Sub(a.logged) >= authLogEvery {
			delete(f.mu.byAddr, addr)
		}
	}
	for addr := range f.mu.byAddr {
		if len(f.mu.byAddr) < authMaxAddrs*3/4 {
			break
		}
		delete(f.mu.byAddr, addr)
	}
}

// clientAddr is the IP address of the request's peer (without its port).
func clientAddr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// keyHint identifies a key in a log without giving it: the first 12 hex digits of its
// SHA-256 (the table opsq.api_keys holds the whole hash, so an operator can find a key
// that exists; an unknown one tells nothing).
func keyHint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}
