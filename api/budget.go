package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// Defaults of the memory budget (DESIGN.md §3 "Memory is a budget, not a hope").
const (
	// MaxInflightBytesDefault is the default of Config.MaxInflightBytes
	// (OPSQ_MAX_INFLIGHT_BYTES).
	MaxInflightBytesDefault = 256 << 20
	// jsonBodyFactor is what a JSON body is counted as, per byte read: the body itself,
	// the decoder's buffer, the decoded copy of its values and the Go values made of them.
	// Measured at 4–12 times the body before the decode was bounded; the handlers now
	// keep each at most about 4 times (a body read whole, the raw values, the strings, the
	// []byte handed on; a JSON submission: the decoder's buffer, its chunks decoded into one
	// arena, their ends).
	jsonBodyFactor = 4
	// budgetGrain is the least a request takes from the budget at once, so that a body read
	// in small pieces does not take the budget's lock for each.
	budgetGrain = 16 << 10
)

// budget bounds the bytes an instance holds for request bodies and answers being built,
// summed over every request. A request that would pass it waits up to wait for others to
// give bytes back, then is refused with 503 and Retry-After. It is safe for concurrent use.
type budget struct {
	setting string // what sets max, named in the refusal
	max     int64
	wait    time.Duration
	refused atomic.Int64 // requests refused, for the metrics
	mu      struct {
		sync.Mutex
		used    int64
		changed chan struct{} // closed and replaced whenever bytes are given back
		// holders is the holds that hold bytes now, by the order they first took some
		// (seq): the oldest may wait for room; the others, in its way, may not (acquire).
		holders map[uint64]struct{}
		seq     uint64
	}
}

func newBudget(max int64, wait time.Duration) *budget {
	b := &budget{setting: "OPSQ_MAX_INFLIGHT_BYTES", max: max, wait: wait}
	b.mu.changed = make(chan struct{})
	b.mu.holders = map[uint64]struct{}{}
	return b
}

// errBusy is the refusal of a request the budget has no room for.
func (b *budget) errBusy(n int64) *Error {
	return &Error{
		Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: RetryAfterDefault,
		Message: fmt.Sprintf("this instance holds as many bytes of requests and answers as it may (%d, %s) and this request needs %d more; retry later", b.max, b.setting, n),
	}
}

// acquire takes n bytes (at most the whole budget) for h, waiting up to b.wait for them
// when h holds nothing yet or is the oldest of the holds that hold bytes. A hold that
// holds bytes and is not the oldest is refused at once: requests that grow together (large
// bodies read side by side) would otherwise each hold a part of the budget, all wait for
// the others, and all be refused when their waits ran out; refusing the younger ones at
// once gives their bytes to the oldest, which is served.
func (b *budget) acquire(ctx context.Context, h *hold, n int64) error {
	n = min(n, b.max)
	var timer *time.Timer
	for {
		b.mu.Lock()
		if b.mu.used+n <= b.max {
			b.mu.used += n
			if h.seq == 0 {
				b.mu.seq++
				h.seq = b.mu.seq
				b.mu.holders[h.seq] = struct{}{}
			}
			b.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		inTheWay := h.seq != 0 && !b.oldestLocked(h.seq)
		changed := b.mu.changed
		b.mu.Unlock()
		if inTheWay {
			b.refused.Add(1)
			return b.errBusy(n)
		}
		if timer == nil {
			timer = time.NewTimer(b.wait)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			b.refused.Add(1)
			return b.errBusy(n)
		}
	}
}

// oldestLocked reports whether no hold holding bytes took its first before seq's. It reads
// every holder: only a request that must wait for room asks.
func (b *budget) oldestLocked(seq uint64) bool {
	for s := range b.mu.holders {
		if s < seq {
			return false
		}
	}
	return true
}

// force takes n bytes without waiting, past the budget if need be: for what is already
// held (an answer built), so that the requests after it wait.
func (b *budget) force(n int64) {
	b.mu.Lock()
	b.mu.used += n
	b.mu.Unlock()
}

// release gives back n bytes of the hold seq (0: of none), which then holds none.
func (b *budget) release(seq uint64, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	delete(b.mu.holders, seq)
	b.mu.used -= n
	close(b.mu.changed)
	b.mu.changed = make(chan struct{})
	b.mu.Unlock()
}

// InflightBytes reports the bytes of the memory budget (OPSQ_MAX_INFLIGHT_BYTES) that the
// requests in flight hold now.
func (h *Handler) InflightBytes() int64 { return h.budget.used() }

// used reports the bytes held now.
func (b *budget) used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.used
}

// hold is what one request holds of the budget. It is used by the request's goroutine only.
type hold struct {
	b   *budget
	n   int64
	seq uint64 // its place among the holders (budget.acquire); 0 until it holds bytes
}

// growTo makes the hold at least n bytes, waiting for them like budget.acquire.
func (h *hold) growTo(ctx context.Context, n int64) error {
	if h == nil || n <= h.n {
		return nil
	}
	more := (n - h.n + budgetGrain - 1) / budgetGrain * budgetGrain
	if err := h.b.acquire(ctx, h, more); err != nil {
		return err
	}
	h.n += min(more, h.b.max)
	return nil
}

// forceTo makes the hold at least n bytes without waiting (budget.force).
func (h *hold) forceTo(n int64) {
	if h == nil || n <= h.n {
		return
	}
	h.b.force(n - h.n)
	h.n = n
}

func (h *hold) free() {
	if h != nil {
		h.b.release(h.seq, h.n)
		h.n, h.seq = 0, 0
	}
}

const holdKey = "opsq.budget"

// holdOf returns the request's hold (nil in handlers served without the budget).
func holdOf(c echo.Context) *hold {
	h, _ := c.Get(holdKey).(*hold)
	return h
}

// middleware gives each request a hold, counts its body as it is read (jsonBodyFactor
// bytes per byte read: what decoding it holds), and gives it all back when the request
// ends. An NDJSON submission is streamed: its reader counts the lines it holds instead.
func (b *budget) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := &hold{b: b}
		defer h.free()
		c.Set(holdKey, h)
		r := c.Request()
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 && !isNDJSON(r) {
			r.Body = &budgetBody{ReadCloser: r.Body, ctx: r.Context(), hold: h, factor: jsonBodyFactor}
		}
		return next(c)
	}
}

func isNDJSON(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	return mt == ndjsonType
}

// budgetBody counts factor bytes of the budget per byte read; a read the budget has no
// room for fails with the 503.
type budgetBody struct {
	io.ReadCloser
	ctx    context.Context
	hold   *hold
	factor int64
	read   int64
	err    error // sticky
}

func (b *budgetBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if gerr := b.hold.growTo(b.ctx, b.factor*b.read); gerr != nil {
		b.err = gerr
		return n, gerr
	}
	return n, err
}

// loginFormBound refuses a dashboard login form (POST /ui/login) over MaxLoginFormBytes
// with 413 before the dashboard parses it: a key and where to go next take a few hundred
// bytes, and net/http would otherwise read up to 10 MB of form into memory.
func loginFormBound(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodPost || r.URL.Path != "/ui/login" || r.Body == nil {
			return next(c)
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxLoginFormBytes+1))
		if err != nil {
			return err
		}
		if len(body) > MaxLoginFormBytes {
			return tooLarge("body: the login form is over %d bytes", MaxLoginFormBytes)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		return next(c)
	}
}
