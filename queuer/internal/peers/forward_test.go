package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"opsq/queuer/internal/handout"
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
	chunks, _, err := r.Forward(ctx, handout.Request{Max: 1, Lease: time.Minute})
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
		_, err := q.reserve(t.Context(), "fake-peer", redirector.URL, handout.Request{Max: 1, Lease: time.Minute})
		if !errors.Is(err, errPeerStatus) || !strings.Contains(err.Error(), fmt.Sprintf("answered %d", code)) {
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
	_, err := q.extend(ctx, "fake-peer", silent.URL, []string{"some-token"}, time.Minute)
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

	_, err := q.reserve(t.Context(), "fake-peer", huge.URL, handout.Request{Max: 1, Lease: time.Minute})
	if !errors.Is(err, errAnswerTooLarge) {
		t.Errorf("forwarding to a peer that answers 100 MB: got %v; want errAnswerTooLarge", err)
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

// TestPeerAnswerRead: a peer's reserve answer becomes the engine's chunks in one step, and
// an answer that is not the REST form is an error of the forward, never a zero chunk.
func TestPeerAnswerRead(t *testing.T) {
	t.Parallel()
	q := newTestRouter(nil)
	var answer atomic.Pointer[string]
	good := `{"chunks": [{"token": "t1", "submission_id": "123", "chunk_index": 7, "input": "abc", "metadata": "m",
		"strategic_metadata": {"company_id": 42, "mode": "preview"}, "retries": 2, "expires_at": "2026-01-02T03:04:05Z", "traceparent": "tp"}]}`
	answer.Store(&good)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, *answer.Load()) }))
	defer peer.Close()
	chunks, err := q.reserve(t.Context(), "fake-peer", peer.URL, handout.Request{Max: 1, Lease: time.Minute})
	if err != nil || len(chunks) != 1 {
		t.Fatalf("got %d chunks, %v; want 1", len(chunks), err)
	}
	ch := chunks[0]
	if ch.Token != "t1" || ch.SubmissionID != 123 || ch.ChunkIndex != 7 || string(ch.Input) != "abc" || ch.Prefix != nil ||
		ch.Metadata != "m" || ch.Retries != 2 || ch.Traceparent != "tp" || !ch.ExpiresAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		ch.StrategicValues["company_id"].Int64() != 42 || ch.StrategicValues["mode"].Str() != "preview" ||
		string(ch.StrategicMetadata) != `{"company_id":42,"mode":"preview"}` {
		t.Errorf("got %+v; want the answer's chunk", ch)
	}
	for _, bad := range []string{
		`{"chunks": [{"token": "t", "submission_id": "12x", "chunk_index": 0, "input": ""}]}`,
		`{"chunks": [{"token": "t", "submission_id": 12, "chunk_index": 0, "input": ""}]}`,
		`{"chunks": [{"token": "t", "submission_id": "12", "input": ""}]}`,
		`{"chunks": [{"token": "t", "submission_id": "12", "chunk_index": 0}]}`,
		`{"chunks": [{"token": "t", "submission_id": "12", "chunk_index": 0, "input": "", "strategic_metadata": {"k": 1.5}}]}`,
	} {
		answer.Store(&bad)
		if chunks, err := q.reserve(t.Context(), "fake-peer", peer.URL, handout.Request{Max: 1, Lease: time.Minute}); err == nil {
			t.Errorf("peer answered %s: got %+v; want an error", bad, chunks)
		}
	}
}
