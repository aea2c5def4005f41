package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
	"opsq/queuer/panics"
)

// A reserve that finds no work and may wait is parked: the API takes the connection over
// from net/http (hijacks it), so that net/http's buffers (10.5 KB) and the handler's
// goroutine (an 8 KB stack) go while it waits. A parked reserve holds its waiter and one
// goroutine asleep in a read of its connection, which notices the client leaving and is
// woken by moving the read deadline: about 10 KB (DESIGN.md §6 allows 20). Its answer is
// written on the connection with "Connection: close", so the consumer's next request opens
// a new connection: a cost paid only after a wait, never while work flows. The request
// metrics count a parked reserve when it parks (status 200).

// parking is the reserves parked by one Handler.
type parking struct {
	ctx    context.Context // ends every parked reserve (Handler.Shutdown)
	cancel context.CancelFunc
	wg     sync.WaitGroup
	now    atomic.Int64 // reserves parked now
	closed atomic.Bool
}

func newParking() *parking {
	ctx, cancel := context.WithCancel(context.Background())
	return &parking{ctx: ctx, cancel: cancel}
}

// Handler is the HTTP handler of the API. The reserves it parks outlive their request:
// Shutdown waits for them.
type Handler struct {
	http.Handler
	parking *parking
	budget  *budget
	// What the tests watch: the slots (slots.go).
	ingests, streams *slots
}

// Parked reports how many reserves are parked on hijacked connections now.
func (h *Handler) Parked() int64 { return h.parking.now.Load() }

// Shutdown waits until every parked reserve has answered; when ctx ends first, it ends
// them, each answered with no chunks (the consumer asks again, elsewhere). Call it after
// http.Server.Shutdown, so that no reserve parks meanwhile.
func (h *Handler) Shutdown(ctx context.Context) error {
	p := h.parking
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.closed.Store(true)
	p.cancel()
	<-done // each ends at once: its wait is cancelled, its answer has a write deadline
	return ctx.Err()
}

// parkedWriteTimeout bounds the writing of a parked reserve's answer.
const parkedWriteTimeout = 30 * time.Second

// park takes c's connection over and answers p on it once p is done. It reports false when
// the connection cannot be taken over (HTTP/2, or a writer that does not allow it): then
// the caller waits on the request's goroutine, as before.
func (s *server) park(c echo.Context, p *queuer.Parked) bool {
	if c.Request().ProtoMajor != 1 || s.parking.closed.Load() {
		return false
	}
	conn, _, err := http.NewResponseController(c.Response().Writer).Hijack()
	if err != nil {
		return false
	}
	// The server's deadlines stay on a hijacked connection: the wait has its own bound.
	_ = conn.SetDeadline(time.Time{})
	// echo pools this context when the handler returns, still pointing at net/http's
	// response and request body, and through them at the connection's 10 KB of buffers:
	// let go of them, so that they go with the next collection rather than sit in the pool.
	c.Response().Writer = hijacked{}
	c.Request().Body = http.NoBody
	fwd := forwardContext(s.parking.ctx, c) // a look may forward on the caller's key
	s.parking.wg.Add(1)
	s.parking.now.Add(1)
	go func() {
		defer s.parking.wg.Done()
		defer s.parking.now.Add(-1)
		defer conn.Close()
		// One goroutine per parked reserve, asleep in a read of its connection: the read
		// ends when the client leaves (an error), when a wake-up comes or the instance
		// shuts down (each moves the read deadline to the past), or when the wait runs out
		// (the deadline itself).
		ctx := fwd
		p.OnWake(interruptRead(conn))
		stop := context.AfterFunc(ctx, interruptRead(conn))
		defer stop()
		// Outside net/http's goroutine, so outside the Recover middleware: a panic in the
		// look (a strategy's walk, a forward) answers this reserve 500, nothing more.
		var chunks []queuer.Chunk
		err := panics.Run(ctx, s.log, "parked reserve", func() (err error) {
			chunks, err = p.WaitWith(ctx, func(wake <-chan struct{}, until time.Time) (bool, error) {
				return readUntil(ctx, conn, wake, until)
			})
			return err
		})
		switch {
		case errors.Is(err, errClientLeft):
			return
		case err != nil && s.parking.closed.Load() && errors.Is(err, context.Canceled):
			chunks, err = []queuer.Chunk{}, nil // shutting down: no chunks here
		}
		if len(chunks) > 0 && s.cfg.beforeAnswer != nil {
			s.cfg.beforeAnswer(nil, conn)
		}
		if len(chunks) > 0 && connClosed(conn) {
			p.GiveBack(fwd, chunks) // the client left while the look took them: nobody reads the answer
			return
		}
		if werr := s.writeParked(conn, chunks, err); werr != nil && len(chunks) > 0 {
			p.GiveBack(fwd, chunks) // not delivered: free again at once, not when the lease runs out
		}
	}()
	return true
}

// errClientLeft ends the wait of a parked reserve whose client closed its connection.
var errClientLeft = errors.New("the client closed the connection")

// interruptRead returns a function that ends the current read on conn, and any read until
// the next deadline is set.
func interruptRead(conn net.Conn) func() {
	return func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) }
}

// readUntil is a parked reserve's queuer.Block: it sleeps in a read of conn until wake
// holds a wake-up, until passes, ctx ends, or the client leaves (errClientLeft). Bytes the
// client sends meanwhile are a request this connection will not serve (its answer closes
// it), and are dropped.
func readUntil(ctx context.Context, conn net.Conn, wake <-chan struct{}, until time.Time) (bool, error) {
	// The deadline first, then the wake channel: a wake-up that comes after the check has
	// moved the deadline to the past, so the read returns at once.
	_ = conn.SetReadDeadline(until)
	var buf [64]byte
	for {
		select {
		case <-wake:
			return true, nil
		default:
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		_, err := conn.Read(buf[:])
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !time.Now().Before(until) {
				select {
				case <-wake:
					return true, nil
				default:
					return false, nil
				}
			}
			// Interrupted: a wake-up or the end of ctx, checked above. Else the deadline
			// moved past for a wake-up already taken: sleep on.
			_ = conn.SetReadDeadline(until)
		default:
			return false, errClientLeft
		}
	}
}

// hijacked is the response writer of a request whose connection was taken over: the
// middlewares that run after the handler may still look at its header.
type hijacked struct{}

func (hijacked) Header() http.Header       { return http.Header{} }
func (hijacked) Write([]byte) (int, error) { return 0, http.ErrHijacked }
func (hijacked) WriteHeader(int)           {}

// writeParked writes a parked reserve's answer on its connection: the chunks, or err in
// the one error shape.
func (s *server) writeParked(conn net.Conn, chunks []queuer.Chunk, err error) error {
	h := &hold{b: s.budget} // counted like an answer written by the handler (answerBytes)
	h.forceTo(answerBytes(chunks))
	defer h.free()
	// The body as echo writes it (encoding/json's Encoder: HTML escaped, a newline at the
	// end), after a head written here: one buffer, one write.
	status, retryAfter := http.StatusOK, ""
	var js bytes.Buffer
	if err != nil {
		e := toError(err, nil)
		e.log(context.Background(), s.log, http.MethodPost, "/v1/reserve", err)
		status, retryAfter = e.Status, e.retryAfterHeader()
		if err := json.NewEncoder(&js).Encode(e.body()); err != nil {
			return err
		}
	} else {
		js.Write(appendReserved(nil, reservedAnswer(chunks)))
	}
	out := make([]byte, 0, 160+js.Len())
	out = fmt.Appendf(out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n",
		status, http.StatusText(status), js.Len())
	if retryAfter != "" {
		out = fmt.Appendf(out, "Retry-After: %s\r\n", retryAfter)
	}
	out = append(append(out, "\r\n"...), js.Bytes()...)
	_ = conn.SetWriteDeadline(time.Now().Add(parkedWriteTimeout))
	_, err = conn.Write(out)
	return err
}
