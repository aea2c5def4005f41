package peers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// Hostile or broken peers (DESIGN.md §8): the peer client follows no redirect, gives up
// within its timeout, and reads at most peerMaxAnswerBytes of an answer; the consumer whose
// reserve was forwarded still gets an answer (here empty: the backlog is empty).

// reserveForwarded forwards a reserve and checks that it comes back with no chunk and no
// error within bound: the consumer whose reserve it is gets an empty answer.
func reserveForwarded(t *testing.T, r *Router, bound time.Duration) {
	t.Helper()
	// A context past the bound, so that a client without timeouts fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 2*bound)
	defer cancel()
	start := time.Now()
	chunks, _, err := r.Forward(ctx, wire.ReserveRequest{Max: 1, Lease: "1m"})
	took := time.Since(start)
	if err != nil || len(chunks) != 0 {
		t.Errorf("reserve forwarded to a broken peer: %d chunks, %v; want none and no error", len(chunks), err)
	}
	if took > bound {
		t.Errorf("reserve forwarded to a broken peer answered after %s; want within %s", took.Round(time.Millisecond), bound)
	}
}

func TestPeerFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	q := newTestRouter(nil)
	var followed atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		io.WriteString(w, `{"chunks": []}`)
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, code)
		}))
		_, err := q.peer(redirector.URL).Reserve(t.Context(), wire.ReserveRequest{Max: 1})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != code {
			t.Errorf("forwarding to a peer that redirects with %d: got %v; want the %d as an error", code, err, code)
		}
		q.PointAt(redirector.URL, 0)
		reserveForwarded(t, q, 5*time.Second)
		redirector.Close()
	}
	if n := followed.Load(); n > 0 {
		t.Errorf("the peer client followed %d redirects; want none", n)
	}
}

func TestPeerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	q := newTestRouter(nil)
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // holds the request until the client gives up, or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release)
	// The bound: CallTimeout, and a few seconds for a busy machine.
	bound := CallTimeout + 3*time.Second

	ctx, cancel := context.WithTimeout(t.Context(), 2*bound)
	defer cancel()
	start := time.Now()
	_, err := q.peer(silent.URL).Extend(ctx, "1m", "some-token")
	if took := time.Since(start); err == nil || took > bound {
		t.Errorf("extend forwarded to a peer that never answers: %v after %s; want an error within %s", err, took.Round(time.Millisecond), bound)
	}
	q.PointAt(silent.URL, 0)
	reserveForwarded(t, q, bound)
}

func TestPeerAnswerTooLarge(t *testing.T) {
	t.Parallel()
	q := newTestRouter(nil)
	const answer = 100 << 20     // 100 MB
	var mostWritten atomic.Int64 // the most written in one answer
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		written, _ := io.WriteString(w, `{"chunks": [{"token": "`)
		defer func() {
			for m := mostWritten.Load(); int64(written) > m && !mostWritten.CompareAndSwap(m, int64(written)); m = mostWritten.Load() {
			}
		}()
		block := strings.Repeat("a", 64<<10)
		for written < answer {
			n, err := io.WriteString(w, block)
			written += n
			if err != nil {
				return // the client hung up
			}
		}
		io.WriteString(w, `"}]}`)
	}))
	defer huge.Close()

	_, err := q.peer(huge.URL).Reserve(t.Context(), wire.ReserveRequest{Max: 1})
	if !errors.Is(err, client.ErrResponseTooLarge) {
		t.Errorf("forwarding to a peer that answers 100 MB: got %v; want client.ErrResponseTooLarge", err)
	}
	q.PointAt(huge.URL, 0)
	reserveForwarded(t, q, CallTimeout+3*time.Second)
	huge.Close() // waits for the handlers: mostWritten is final
	// The server writes ahead into the socket buffers (a few MB on loopback) before it sees
	// that the client hung up; far less than the 100 MB it meant to send.
	if w := mostWritten.Load(); w > 2*peerMaxAnswerBytes {
		t.Errorf("the peer wrote %d MB before the client stopped reading; want at most %d MB (the limit is %d MB)",
			w>>20, 2*peerMaxAnswerBytes>>20, peerMaxAnswerBytes>>20)
	}
}
