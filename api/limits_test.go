package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"opsq/queuer"
	"opsq/sql/pgtest"
)

// rawRequest opens a connection to e and sends head (a request line and headers, ending
// with an empty line) and then body, and nothing more: a stalled client. rcvbuf, when
// positive, is the connection's receive buffer, so that a client that reads nothing
// stalls the server's writes soon.
func rawRequest(t *testing.T, e *env, head, body string, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			return errors.Join(err, serr)
		}
	}
	conn, err := d.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	return conn
}

// chunkedPost is the head of a chunked POST of contentType to path.
func chunkedPost(path, contentType string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: " + contentType + "\r\nTransfer-Encoding: chunked\r\n\r\n"
}

// httpChunk is one chunk of a chunked body.
func httpChunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// readAnswer reads the answer on conn within timeout, and whether the server closed the
// connection after it.
func readAnswer(t *testing.T, conn net.Conn, timeout time.Duration) (reply, bool) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer within %s: %v", timeout, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	_, err = br.ReadByte()
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err == io.EOF
}

// TestBodyIdleTimeout: a body that stops sending is cut with 408 after the idle timeout,
// wherever it stops, the connection is closed, and nothing of the submission is kept.
func TestBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	e := setup(t, Config{BodyIdleTimeout: idle, BodyMinBytes: 1}) // the rate floor: TestBodyRateFloor
	cases := []struct {
		name, contentType, body string
	}{
		{"ndjson after a chunk", "application/x-ndjson", `{"metadata": "m"}` + "\n" + `"chunk 0"` + "\n"},
		{"ndjson in the header", "application/x-ndjson", `{"metadata": `},
		{"ndjson before anything", "application/x-ndjson", ""},
		{"json", "application/json", `{"chunks": ["a", `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := ""
			if c.body != "" {
				body = httpChunk(c.body)
			}
			start := time.Now()
			conn := rawRequest(t, e, chunkedPost("/v1/submissions", c.contentType), body, 0)
			r, closed := readAnswer(t, conn, idle+10*time.Second)
			took := time.Since(start)
			expectError(t, r, http.StatusRequestTimeout, "request_timeout", "OPSQ_BODY_IDLE_TIMEOUT")
			if took < idle {
				t.Errorf("cut after %s; want no sooner than the idle timeout %s", took, idle)
			}
			if !closed {
				t.Error("the connection stayed open after the 408; want it closed")
			}
			expectNothingStored(t, e)
		})
	}
	// A body that keeps sending, slower than the timeout in total but never idle that
	// long, is not cut.
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprintln(pw, `{"metadata": "slow"}`)
		for i := range 4 {
			time.Sleep(idle / 2)
			fmt.Fprintf(pw, "\"chunk %d\"\n", i)
		}
		pw.Close()
	}()
	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions", "application/x-ndjson", pr)
	expectCreated(t, r, http.StatusCreated, 4)
}

// TestIngestLimit: beyond MaxIngests, a submission waits LimitWait and gets 503 with
// Retry-After; once a slot is free, submissions go through again.
func TestIngestLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxIngests: 1, LimitWait: 200 * time.Millisecond})
	stalled := rawRequest(t, e, chunkedPost("/v1/submissions", "application/x-ndjson"),
		httpChunk(`{"metadata": "stalled"}`+"\n"+`"c"`+"\n"), 0)

	var r reply
	pgtest.WaitFor(t, 10*time.Second, "a submission beyond the limit to be refused", func() string {
		r = postSubmission(t, e, "application/json", `{"chunks": ["a"]}`)
		if r.Status != http.StatusServiceUnavailable {
			return fmt.Sprintf("status %d", r.Status)
		}
		return ""
	})
	expectError(t, r, http.StatusServiceUnavailable, "busy", "OPSQ_MAX_INGESTS")
	if got := r.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q; want \"2\"", got)
	}
	// Other routes are not limited.
	if r := getPath(t, e, "/v1/submissions"); r.Status != http.StatusOK {
		t.Errorf("GET /v1/submissions while ingests are full: %d %s; want 200", r.Status, r.Body)
	}

	stalled.Close() // the upload ends (broken), its slot is freed
	pgtest.WaitFor(t, 10*time.Second, "a submission to go through once the slot is free", func() string {
		r := postSubmission(t, e, "application/json", `{"chunks": ["a"]}`)
		if r.Status != http.StatusCreated {
			return fmt.Sprintf("status %d %s", r.Status, r.Body)
		}
		return ""
	})
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.submission_status WHERE metadata = 'stalled'"); n != 0 {
		t.Errorf("%d submissions of the broken upload; want 0", n)
	}
}

// TestResultsStalledReaderCut: a results reader that reads nothing is cut after the idle
// timeout, which frees its slot (and its database connection) for the next reader.
func TestResultsStalledReaderCut(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	e := setup(t, Config{MaxResultStreams: 1, LimitWait: 200 * time.Millisecond, BodyIdleTimeout: idle})
	id := mustSubmit(t, e, `{"chunks": [`+strings.Repeat(`"c",`, 319)+`"c"]}`, 320)
	pgtest.CompleteSubmission(t, e.Pool, mustInt64(t, id))
	// 320 outputs of 64 KiB: 20 MiB, far more than the socket buffers hold.
	if _, err := e.Pool.Exec(t.Context(), `UPDATE opsq.completed_batches
		SET outputs = array_fill(convert_to(repeat('x', 65536), 'UTF8'), ARRAY[cardinality(outputs)])
		WHERE submission_id = $1`, mustInt64(t, id)); err != nil {
		t.Fatal(err)
	}
	path := "/v1/submissions/" + id + "/results"
	start := time.Now()
	stalled := rawRequest(t, e, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n", "", 4096)
	// Its answer has begun (so it holds the slot); then it reads nothing more.
	if err := stalled.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(stalled, line); err != nil || string(line) != "HTTP/1.1 200" {
		t.Fatalf("the stalled reader's answer begins %q (%v); want HTTP/1.1 200", line, err)
	}
	pgtest.WaitFor(t, 10*time.Second, "a second reader to be refused while the first holds the slot", func() string {
		if r := getPath(t, e, path); r.Status != http.StatusServiceUnavailable {
			return fmt.Sprintf("status %d", r.Status)
		}
		return ""
	})
	var r reply
	pgtest.WaitFor(t, idle+15*time.Second, "the stalled reader to be cut and a new reader served", func() string {
		if r = getPath(t, e, path); r.Status != http.StatusOK {
			return fmt.Sprintf("status %d", r.Status)
		}
		return ""
	})
	if took := time.Since(start); took < idle {
		t.Errorf("served after %s; want the stalled reader held for the idle timeout %s first", took, idle)
	}
	if lines := strings.Count(string(r.Body), "\n"); lines != 320 {
		t.Errorf("the new reader got %d lines; want 320", lines)
	}
	// The stalled reader's connection was cut: reading it now ends early.
	if err := stalled.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, stalled)
	if err != nil {
		t.Fatalf("reading the cut stream: %v; want the connection closed", err)
	}
	if n >= 20<<20 {
		t.Errorf("the stalled reader got %d bytes; want its stream cut short", n)
	}
}

// TestUnavailableIs503: errors that mean the database cannot be reached answer 503 with
// Retry-After in the usual error shape; other database errors stay 500.
func TestUnavailableIs503(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"sentinel", fmt.Errorf("reserving: %w", queuer.ErrUnavailable), http.StatusServiceUnavailable, "unavailable"},
		{"admin shutdown", fmt.Errorf("inserting: %w", &pgconn.PgError{Code: "57P01"}), http.StatusServiceUnavailable, "unavailable"},
		{"conn closed", fmt.Errorf("inserting: %w", pgconn.ErrConnClosed), http.StatusServiceUnavailable, "unavailable"},
		{"unique violation", &pgconn.PgError{Code: "23505"}, http.StatusInternalServerError, "internal"},
		{"client gone", fmt.Errorf("x: %w", context.Canceled), 499, "client_closed_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := echo.New()
			e.HTTPErrorHandler = errorHandler(slog.New(slog.DiscardHandler))
			e.GET("/", func(echo.Context) error { return c.err })
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			r := reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
			expectError(t, r, c.status, c.code)
			wantRetry := ""
			if c.status == http.StatusServiceUnavailable {
				wantRetry = "2"
			}
			if got := r.Header.Get("Retry-After"); got != wantRetry {
				t.Errorf("Retry-After %q; want %q", got, wantRetry)
			}
		})
	}
}
