package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
)

// Defaults of the limits that keep slow and hostile clients from holding an instance
// (DESIGN.md §3 "Bounded by design", §8 "Isolation of the claims loop").
const (
	// BodyIdleTimeoutDefault is how long a request body may send nothing, and a results
	// reader may read nothing, before the request is cut (OPSQ_BODY_IDLE_TIMEOUT).
	BodyIdleTimeoutDefault = 30 * time.Second
	// LimitWaitDefault is how long a request beyond a concurrency limit waits for a
	// slot before it is refused with 503.
	LimitWaitDefault = time.Second
	// RetryAfterDefault is the Retry-After of a 503 (busy or database unavailable).
	RetryAfterDefault = 2 * time.Second
)

// limiter bounds how many requests of one kind an instance serves at once. A request
// beyond the bound waits up to wait for a slot, then gets 503 with Retry-After. It is safe
// for concurrent use.
type limiter struct {
	what  string // "ingests": named in the refusal
	env   string // the variable that sets the bound
	slots chan struct{}
	wait  time.Duration
}

func newLimiter(what, env string, n int, wait time.Duration) *limiter {
	return &limiter{what: what, env: env, slots: make(chan struct{}, n), wait: wait}
}

// middleware holds a slot while the handler runs.
func (l *limiter) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := l.acquire(c.Request().Context()); err != nil {
			return err
		}
		defer func() { <-l.slots }()
		return next(c)
	}
}

func (l *limiter) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return &Error{
			Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: RetryAfterDefault,
			Message: fmt.Sprintf("this instance already serves %d %s (%s); retry later", cap(l.slots), l.what, l.env),
		}
	}
}

// errBodyIdle is the answer to a request body that sent nothing for the idle timeout.
func errBodyIdle(timeout time.Duration) *Error {
	return &Error{
		Status: http.StatusRequestTimeout, Code: "request_timeout",
		Message: fmt.Sprintf("body: nothing received for %s (OPSQ_BODY_IDLE_TIMEOUT); the request is cut and nothing of it was kept", timeout),
	}
}

// bodyIdle cuts a request body that sends nothing for timeout: each read of the body
// moves the connection's read deadline to timeout from now, a read that reaches it fails
// with a 408 error (the handler's transaction rolls back), and the deadline is cleared once
// the body is read to its end, so that long polls are not cut. An answer given before the
// body was read to its end closes the connection instead of reading the rest.
func bodyIdle(timeout time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
				return next(c)
			}
			b := &idleBody{body: r.Body, rc: http.NewResponseController(c.Response()), timeout: timeout}
			if b.arm() != nil {
				return next(c) // not a connection with deadlines (tests)
			}
			r.Body = b
			err := next(c)
			if !b.eof {
				c.Response().Header().Set(echo.HeaderConnection, "close")
			}
			return err
		}
	}
}

// idleBody is a request body whose reads each have timeout to make progress.
type idleBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	eof     bool
	err     error // sticky: the body timed out
}

func (b *idleBody) arm() error { return b.rc.SetReadDeadline(time.Now().Add(b.timeout)) }

func (b *idleBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	_ = b.arm() // it worked at the start
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = errBodyIdle(b.timeout)
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
			resp.Writer = &idleWriter{ResponseWriter: resp.Writer, rc: rc, timeout: timeout}
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

// idleWriter is a response writer whose writes each have timeout to go out.
type idleWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
