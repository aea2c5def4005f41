package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// Defaults of the limits that keep slow and hostile clients from holding an instance
// (DESIGN.md §3 "Bounded by design", §8 "Isolation of the claims loop").
const (
	// BodyIdleTimeoutDefault is how long a request body may send nothing, and a results
	// reader may read nothing, before the request is cut (OPSQ_BODY_IDLE_TIMEOUT). It is
	// also the window of the upload rate floor, BodyMinBytesDefault.
	BodyIdleTimeoutDefault = 30 * time.Second
	// BodyMinBytesDefault is the upload rate floor: a request body that brings less than
	// this many bytes in any BodyIdleTimeout spent waiting for it is cut (408).
	BodyMinBytesDefault = 16 << 10
	// MaxIngestTimeDefault bounds how long one submission may take, its body and its
	// insert (OPSQ_MAX_INGEST_TIME).
	MaxIngestTimeDefault = time.Hour
	// LimitWaitDefault is how long a request beyond a concurrency limit waits for a
	// slot before it is refused with 503.
	LimitWaitDefault = time.Second
	// RetryAfterDefault is the Retry-After of a 503 (busy or database unavailable).
	RetryAfterDefault = 2 * time.Second
)

// errBodyIdle is the answer to a request body that sent nothing for the idle timeout.
func errBodyIdle(timeout time.Duration) *Error {
	return &Error{
		Status: http.StatusRequestTimeout, Code: "request_timeout",
		Message: fmt.Sprintf("body: nothing received for %s (OPSQ_BODY_IDLE_TIMEOUT); the request is cut and nothing of it was kept", timeout),
	}
}

// errBodySlow is the answer to a request body that sent less than the floor in a window.
func errBodySlow(got, floor int64, window time.Duration) *Error {
	return &Error{
		Status: http.StatusRequestTimeout, Code: "request_timeout",
		Message: fmt.Sprintf("body: %d bytes received in %s, under the floor of %d bytes per %s (OPSQ_BODY_IDLE_TIMEOUT); the request is cut and nothing of it was kept", got, window, floor, window),
	}
}

// errIngestTime is the answer to a submission that took longer than OPSQ_MAX_INGEST_TIME.
func errIngestTime(limit time.Duration) *Error {
	return &Error{
		Status: http.StatusRequestTimeout, Code: "request_timeout",
		Message: fmt.Sprintf("body: the submission took longer than %s (OPSQ_MAX_INGEST_TIME); the request is cut and nothing of it was kept; send large submissions in parts, or in object storage", limit),
	}
}

const idleKey = "opsq.idle_body"

// bodyIdle cuts a request body that sends nothing for timeout, or less than floor bytes
// in any timeout of waiting for it (the time the handler spends not reading is not
// counted): each read of the body moves the connection's read deadline to when the
// body would be cut, a read that reaches it fails with a 408 error (the handler's
// transaction rolls back), and the deadline is cleared once the body is read to its end,
// so that long polls are not cut. An answer given before the body was read to its end
// reads and drops up to drain bytes of the rest first (under the same deadlines, held
// nowhere), so that a client still sending gets the answer rather than a connection
// reset under its upload; past drain it closes the connection instead. floor 0 or less:
// no floor.
func bodyIdle(timeout time.Duration, floor, drain int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
				return next(c)
			}
			b := &idleBody{body: r.Body, rc: http.NewResponseController(c.Response()), timeout: timeout, floor: floor}
			if b.rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
				return next(c) // not a connection with deadlines (tests)
			}
			r.Body = b
			c.Set(idleKey, b)
			err := next(c)
			if !b.eof && b.err == nil && !c.Response().Committed && r.Context().Err() == nil {
				_, _ = io.CopyN(io.Discard, b, drain)
			}
			if !b.eof {
				c.Response().Header().Set(echo.HeaderConnection, "close")
			}
			return err
		}
	}
}

// idleBodyOf returns the request's body as bodyIdle wrapped it, or nil.
func idleBodyOf(c echo.Context) *idleBody {
	b, _ := c.Get(idleKey).(*idleBody)
	return b
}

// idleBody is a request body whose reads each have a deadline: timeout to make progress,
// and, while the current window of timeout has brought less than floor bytes, what is
// left of the window. Its reads are made by one goroutine at a time (the request's, or
// the one feeding its COPY); total, done and cut are for any goroutine.
type idleBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	floor   int64
	// until, when set, is when the request must be done with its body (an ingest's
	// OPSQ_MAX_INGEST_TIME), and limit that time as the refusal names it.
	until  time.Time
	limit  time.Duration
	waited time.Duration // spent in reads in the current window
	got    int64         // bytes read in the current window
	eof    bool
	err    error // sticky: the body was cut

	total atomic.Int64 // bytes read in all
	done  atomic.Bool  // read to its end
	// cutMu orders setting the read deadline: a cut's (now) is never overwritten by a read's.
	cutMu  sync.Mutex
	cutErr *Error // set by cut: the next read fails with it
}

// cut makes the body's next read, or the one waiting now, fail with err: the request
// gives its slot up (slots.go).
func (b *idleBody) cut(err *Error) {
	b.cutMu.Lock()
	defer b.cutMu.Unlock()
	if b.cutErr == nil && !b.done.Load() {
		b.cutErr = err
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// setUntil makes the body end by now+limit.
func (b *idleBody) setUntil(limit time.Duration) {
	b.until, b.limit = time.Now().Add(limit), limit
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.waited >= b.timeout { // a window is over
		if b.got < b.floor {
			b.err = errBodySlow(b.got, b.floor, b.timeout)
			return 0, b.err
		}
		b.waited, b.got = 0, 0 // the next window starts now: a body at the floor is never cut early
	}
	start := time.Now()
	wait, slow := b.timeout, false
	if b.got < b.floor && b.timeout-b.waited < wait {
		wait, slow = b.timeout-b.waited, true
	}
	deadline, ingest := start.Add(wait), false
	if !b.until.IsZero() && b.until.Before(deadline) {
		deadline, ingest = b.until, true
	}
	b.cutMu.Lock()
	if b.cutErr != nil {
		b.err = b.cutErr
		b.cutMu.Unlock()
		return 0, b.err
	}
	_ = b.rc.SetReadDeadline(deadline) // it worked at the start
	b.cutMu.Unlock()
	n, err := b.body.Read(p)
	b.waited += time.Since(start)
	b.got += int64(n)
	b.total.Add(int64(n))
	switch {
	case err == io.EOF:
		b.eof = true
		b.done.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.cutMu.Lock()
		cut := b.cutErr
		b.cutMu.Unlock()
		switch {
		case cut != nil:
			b.err = cut
		case ingest:
			b.err = errIngestTime(b.limit)
		case slow:
			b.err = errBodySlow(b.got, b.floor, b.timeout)
		default:
			b.err = errBodyIdle(b.timeout)
		}
		return n, b.err
	}
	return n, err
}

func (b *idleBody) Close() error { return b.body.Close() }

// writeIdle cuts an answer whose reader reads nothing for timeout: each write moves the
// connection's write deadline to timeout from now, so a write that cannot go out for that
// long fails and the handler ends, freeing its database connection. Once the handler is
// done its answer is flushed under the same deadline, and the deadline is cleared for the
// next request on the connection.
func writeIdle(timeout time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			resp := c.Response()
			rc := http.NewResponseController(resp.Writer)
			if rc.SetWriteDeadline(time.Now().Add(timeout)) != nil {
				return next(c) // not a connection with deadlines (tests)
			}
			resp.Writer = &idleWriter{ResponseWriter: resp.Writer, rc: rc, timeout: timeout, act: streamActivityOf(c)}
			err := next(c)
			if err != nil {
				c.Error(err) // written under the deadline too
			}
			if rc.Flush() == nil {
				_ = rc.SetWriteDeadline(time.Time{})
			}
			return nil
		}
	}
}

// idleWriter is a response writer whose writes each have timeout to go out. It tells
// act, when set, when it writes (slots.go).
type idleWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	act     *streamActivity
}

func (w *idleWriter) Write(p []byte) (int, error) {
	defer w.writing()()
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) Flush() {
	defer w.writing()()
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	_ = w.rc.Flush()
}

// writing notes a write that starts, and returns what notes its end.
func (w *idleWriter) writing() func() {
	if w.act == nil {
		return func() {}
	}
	w.act.writing.Store(time.Now().UnixNano())
	return func() {
		now := time.Now().UnixNano()
		w.act.writing.Store(0)
		w.act.last.Store(now)
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
