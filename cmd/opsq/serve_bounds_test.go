package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"opsq/api"
)

// TestHeaderBound: a request whose headers pass OPSQ_MAX_HEADER_BYTES gets 431 before any
// handler runs; one within it is served.
func TestHeaderBound(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewUnstartedServer(ok)
	srv.Config = newHTTPServer(ok, api.MaxHeaderBytesDefault, slog.New(slog.DiscardHandler))
	srv.Start()
	t.Cleanup(srv.Close)
	send := func(headerBytes int) int {
		t.Helper()
		conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		var req bytes.Buffer
		req.WriteString("GET / HTTP/1.1\r\nHost: test\r\n")
		for i := 0; req.Len() < headerBytes; i++ {
			req.WriteString("X-Pad: " + strings.Repeat("p", 1000) + "\r\n")
		}
		req.WriteString("\r\n")
		go func() { _, _ = io.Copy(conn, &req) }() // the server may answer before it is all sent
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("headers of %d bytes: reading the answer: %v", headerBytes, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send(1 << 20); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("1 MB of headers: status %d; want 431", got)
	}
	if got := send(api.MaxHeaderBytesDefault - 2<<10); got != http.StatusNoContent {
		t.Errorf("headers within the bound: status %d; want 204", got)
	}
}

// TestServeRefusesBudgetSmallerThanABody: a budget that one largest JSON body, counted as
// decoded, would not fit in is refused at start, naming both settings.
func TestServeRefusesBudgetSmallerThanABody(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := runServe(t.Context(), []string{"--max-body", "64MiB", "--max-inflight-bytes", "128MiB", "--database-url", "postgres://nowhere.invalid/x"}, &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "OPSQ_MAX_INFLIGHT_BYTES") || !strings.Contains(err.Error(), "OPSQ_MAX_BODY") {
		t.Errorf("runServe with a budget of 2 bodies: %v; want an error naming OPSQ_MAX_INFLIGHT_BYTES and OPSQ_MAX_BODY", err)
	}
}
