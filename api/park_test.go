package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

// waitFor polls cond until it holds, or fails the test after 30 s with what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reserveAsync sends a reserve on a connection of its own and returns its answer on a
// channel.
func reserveAsync(ctx context.Context, url, body string) <-chan *http.Response {
	out := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/reserve", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			out <- nil
			return
		}
		out <- resp
	}()
	return out
}

// TestParkedReserveAnsweredOnItsConnection: a reserve that waits is parked off net/http
// (its connection taken over); when work arrives it gets its chunk in the usual answer,
// with "Connection: close", and nothing stays parked.
func TestParkedReserveAnsweredOnItsConnection(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	answer := reserveAsync(t.Context(), e.URL, `{"max": 1, "wait": "30s", "consumer": "parked"}`)
	waitFor(t, "the reserve parks", func() bool { return e.H.Parked() == 1 })

	mustSubmit(t, e, `{"chunks": ["only"]}`, 1)
	resp := <-answer
	if resp == nil {
		t.Fatal("the parked reserve got no answer")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got wire.Reserved
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got.Chunks) != 1 || got.Chunks[0].Input == nil || *got.Chunks[0].Input != "only" {
		t.Fatalf("parked reserve: %d %s; want 200 and the chunk", resp.StatusCode, body)
	}
	if !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("parked answer: Close %v, Content-Type %q; want the connection closed and JSON", resp.Close, resp.Header.Get("Content-Type"))
	}
	waitFor(t, "nothing parked after the answer", func() bool { return e.H.Parked() == 0 })
}

// TestParkedReserveClientLeaves: a consumer that leaves while parked stops waiting at once,
// and work that arrives afterwards is not taken for it.
func TestParkedReserveClientLeaves(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	answer := reserveAsync(ctx, e.URL, `{"max": 1, "wait": "60s"}`)
	waitFor(t, "the reserve parks", func() bool { return e.H.Parked() == 1 })
	cancel() // the client closes its connection
	<-answer
	waitFor(t, "the parked reserve ends when its client leaves", func() bool { return e.H.Parked() == 0 })

	mustSubmit(t, e, `{"chunks": ["for whoever asks"]}`, 1)
	r := httpCall(t, http.MethodPost, e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 1}`))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Chunks) != 1 {
		t.Fatalf("reserve after the parked consumer left: %d %s; want the chunk (not held for the consumer that left)", r.Status, r.Body)
	}
}

// TestShutdownAnswersParkedReserves: at the end of the grace period a parked reserve is
// answered with no chunks rather than cut off.
func TestShutdownAnswersParkedReserves(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	answer := reserveAsync(t.Context(), e.URL, `{"max": 1, "wait": "60s"}`)
	waitFor(t, "the reserve parks", func() bool { return e.H.Parked() == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := e.H.Shutdown(ctx); err == nil {
		t.Error("Shutdown with a reserve parked for 60s returned nil before its grace ran out; want the context's error")
	}
	resp := <-answer
	if resp == nil {
		t.Fatal("the parked reserve got no answer at shutdown")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"chunks":[]}` {
		t.Errorf("parked reserve at shutdown: %d %s; want 200 and no chunks", resp.StatusCode, body)
	}
	if e.H.Parked() != 0 {
		t.Errorf("%d reserves still parked after Shutdown", e.H.Parked())
	}
}

// TestParkedReserveWaitRunsOut: a parked reserve whose wait runs out with no work is
// answered with no chunks, on its connection.
func TestParkedReserveWaitRunsOut(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	start := time.Now()
	answer := reserveAsync(t.Context(), e.URL, `{"max": 1, "wait": "1s"}`)
	resp := <-answer
	if resp == nil {
		t.Fatal("the parked reserve got no answer when its wait ran out")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"chunks":[]}` || !resp.Close {
		t.Errorf("parked reserve whose wait ran out: %d %s (close %v); want 200, no chunks, the connection closed", resp.StatusCode, body, resp.Close)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("answered after %s; want the whole 1s wait", waited)
	}
	waitFor(t, "nothing parked after the answer", func() bool { return e.H.Parked() == 0 })
}

// TestParkedReserveHoldsOneGoroutine: what a parked reserve costs the instance is one
// goroutine asleep in a read of its connection (DESIGN.md §6, ≤ 20 KB a parked consumer).
// The clients here are bare connections, so that every goroutine counted is the server's.
func TestParkedReserveHoldsOneGoroutine(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	e := setup(t, Config{})
	const n = 50
	body := `{"max": 1, "wait": "60s"}`
	req := fmt.Sprintf("POST /v1/reserve HTTP/1.1\r\nHost: opsq\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	addr := strings.TrimPrefix(e.URL, "http://")
	waitFor(t, "the instance settles", func() bool { return e.H.Parked() == 0 })
	before := runtime.NumGoroutine()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	waitFor(t, "every reserve parks", func() bool { return e.H.Parked() == n })
	// A handler's goroutine ends once its reserve is parked; give them a moment to go.
	var extra int
	for range 100 {
		if extra = runtime.NumGoroutine() - before; extra <= n+n/2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if extra > n+n/2 {
		t.Errorf("%d parked reserves hold %d more goroutines; want about one each (two would be %d)", n, extra, 2*n)
	}

	mustSubmit(t, e, `{"chunks": ["a", "b"]}`, 2)
	waitFor(t, "two parked reserves answered", func() bool { return e.H.Parked() == n-2 })
}
