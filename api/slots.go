package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// Slots that a slow client cannot hold against others (issue 31, DESIGN.md §6's hostile
// list). An ingest or a results stream holds a database connection, so an instance serves
// a bounded number of each (OPSQ_MAX_INGESTS, OPSQ_MAX_RESULT_STREAMS). A request beyond
// the bound waits for a slot, and while it waits the slots are shared by owner (the key;
// with OPSQ_AUTH=off the client's address):
//
//   - an owner holding fewer than its share, max(1, slots / owners holding or waiting),
//     takes a slot from an owner holding more than its share: that owner's request that
//     is the easiest to give up (an upload still sending, the slowest first; a follow
//     waiting for news) ends, and its slot goes to the waiter;
//   - a request that is of no use to anyone gives its slot up to a waiter of its own
//     owner, or of an owner holding fewer slots than its own: an upload still under
//     SlotMinRate bytes a second after SlotGrace, a follow that has had nothing to send
//     for SlotGrace, a results stream whose reader has read nothing for SlotGrace;
//   - a slot that frees goes to the waiter whose owner holds the fewest, the oldest first.
//
// Nothing is taken from anyone while nobody waits. An owner at or over its share waits,
// and is refused (503) when its wait runs out, never another owner.

// Defaults of the slot sharing.
const (
	// SlotMinRateDefault is the default of Config.SlotMinRate (OPSQ_SLOT_MIN_RATE), in
	// bytes a second.
	SlotMinRateDefault = 4 << 10
	// SlotGraceDefault is the default of Config.SlotGrace (OPSQ_SLOT_GRACE).
	SlotGraceDefault = 5 * time.Second
	// SmallSubmissionBytesDefault is the default of Config.SmallSubmissionBytes
	// (OPSQ_SMALL_SUBMISSION_BYTES).
	SmallSubmissionBytesDefault = 8 << 10
	// followRank puts the follows waiting for news before any other stream.
	followRank = -1e12
	// slotPromiseWait is how long a waiter a slot was freed for waits for it beyond
	// LimitWait: the request that gives it up has to end first (its transaction rolls back).
	slotPromiseWait = 10 * time.Second
)

// slots bounds how many requests of one kind an instance serves at once, shared by owner
// as the comment above says. It is safe for concurrent use.
type slots struct {
	what    string // "ingests": named in the refusals
	env     string // the variable that sets the bound
	n       int
	wait    time.Duration
	minRate int64 // bytes a second; 0: uploads are never cut for their rate
	grace   time.Duration
	now     func() time.Time
	taken   atomic.Int64 // slots given up for a waiter, for the metrics
	mu      struct {
		sync.Mutex
		held    map[string]int // slots held, by owner
		holders map[*slot]struct{}
		waiters []*slotWaiter // oldest first
	}
}

func newSlots(what, env string, n int, wait time.Duration, minRate int64, grace time.Duration) *slots {
	l := &slots{what: what, env: env, n: n, wait: wait, minRate: minRate, grace: grace, now: time.Now}
	l.mu.held = map[string]int{}
	l.mu.holders = map[*slot]struct{}{}
	return l
}

// slot is one request's hold of a slot, from the time it asks for it.
type slot struct {
	owner string
	start time.Time
	// How the request is doing, for the choice of what gives a slot up; nil: it never does.
	body   *idleBody       // an ingest: its body as it comes
	stream *streamActivity // a results stream: what it writes
	// cut ends the request to free its slot; err says why to the request's client.
	cut func(err *Error)
	// cutErr is set (under slots.mu) once the slot was asked back; forWaiter is who for.
	cutErr    *Error
	forWaiter *slotWaiter
}

type slotWaiter struct {
	s        *slot
	ready    chan struct{} // closed when s holds a slot
	granted  bool          // under slots.mu
	promised bool          // a slot was asked back for it
}

// streamActivity is what a results stream writes, as its writer (idleWriter) and its
// handler tell it; it is read by other requests choosing what gives a slot up.
type streamActivity struct {
	follow  atomic.Bool
	last    atomic.Int64 // unix nanoseconds of the last write that went out
	writing atomic.Int64 // unix nanoseconds since which a write waits; 0: none
}

const slotKey = "opsq.slot"

// slotOf returns the slot the request holds, or nil.
func slotOf(c echo.Context) *slot {
	s, _ := c.Get(slotKey).(*slot)
	return s
}

// owner is whose share a request counts in: its key, or without keys its address.
func owner(c echo.Context) string {
	if k, ok := caller(c); ok {
		if k.ID != 0 {
			return "key " + strconv.FormatInt(k.ID, 10)
		}
		return "key " + k.Name // forwarded: the name it carries
	}
	return "address " + clientAddr(c.Request())
}

// acquire gives s a slot, waiting as the package comment says.
func (l *slots) acquire(ctx context.Context, s *slot) error {
	l.mu.Lock()
	if len(l.mu.holders) < l.n {
		l.holdLocked(s)
		l.mu.Unlock()
		return nil
	}
	w := &slotWaiter{s: s, ready: make(chan struct{})}
	l.mu.waiters = append(l.mu.waiters, w)
	if v, why := l.victimLocked(s.owner); v != nil {
		v.cutErr, v.forWaiter, w.promised = why, w, true
		l.taken.Add(1)
		v.cut(why)
	}
	wait := l.wait
	if w.promised {
		wait += slotPromiseWait
	}
	l.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		if l.leave(w) {
			l.release(s)
		}
		return ctx.Err()
	case <-t.C:
		if l.leave(w) {
			return nil // granted as the wait ran out
		}
		return &Error{
			Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: RetryAfterDefault,
			Message: fmt.Sprintf("this instance already serves %d %s (%s), and this client holds its share of them or the others are all in use; retry later", l.n, l.what, l.env),
		}
	}
}

// leave takes w out of the waiters, and reports whether it was granted a slot meanwhile.
func (l *slots) leave(w *slotWaiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		return true
	}
	for i, o := range l.mu.waiters {
		if o == w {
			l.mu.waiters = append(l.mu.waiters[:i], l.mu.waiters[i+1:]...)
			break
		}
	}
	return false
}

func (l *slots) holdLocked(s *slot) {
	s.start = l.now() // its rate counts from here, not from when it began to wait
	l.mu.holders[s] = struct{}{}
	l.mu.held[s.owner]++
}

// release gives s's slot back, to the waiter it was asked back for if it still waits, else
// to the waiter whose owner holds the fewest.
func (l *slots) release(s *slot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.mu.holders[s]; !ok {
		return
	}
	delete(l.mu.holders, s)
	if l.mu.held[s.owner]--; l.mu.held[s.owner] <= 0 {
		delete(l.mu.held, s.owner)
	}
	if len(l.mu.waiters) == 0 {
		return
	}
	best := -1
	for i, w := range l.mu.waiters {
		if w == s.forWaiter {
			best = i
			break
		}
		if best < 0 || l.mu.held[w.s.owner] < l.mu.held[l.mu.waiters[best].s.owner] {
			best = i
		}
	}
	w := l.mu.waiters[best]
	l.mu.waiters = append(l.mu.waiters[:best], l.mu.waiters[best+1:]...)
	l.holdLocked(w.s)
	w.granted = true
	close(w.ready)
}

// victimLocked chooses the slot to ask back for a waiter of owner, and the answer its
// request gets; nil when none may be.
func (l *slots) victimLocked(owner string) (*slot, *Error) {
	now := l.now()
	// The owners holding or waiting, and what each holds that is not asked back yet.
	held := map[string]int{}
	for s := range l.mu.holders {
		if s.cutErr == nil {
			held[s.owner]++
		} else {
			held[s.owner] += 0
		}
	}
	for _, w := range l.mu.waiters {
		held[w.s.owner] += 0
	}
	share := max(1, l.n/len(held))

	var victim *slot
	var victimRank float64
	if held[owner] < share {
		for s := range l.mu.holders {
			if s.cutErr != nil || held[s.owner] <= share {
				continue
			}
			ok, rank, _ := l.progress(s, now)
			if !ok {
				continue
			}
			// The owner holding the most gives first; within it, the lowest rank.
			if victim == nil || held[s.owner] > held[victim.owner] || (held[s.owner] == held[victim.owner] && rank < victimRank) {
				victim, victimRank = s, rank
			}
		}
		if victim != nil {
			return victim, l.errShare(victim, held[victim.owner], share, now)
		}
	}
	// Of no use: the waiter's own, or another owner's that holds more than the waiter's.
	var why *Error
	for s := range l.mu.holders {
		if s.cutErr != nil || (s.owner != owner && held[s.owner] <= held[owner]) {
			continue
		}
		ok, rank, useless := l.progress(s, now)
		if !ok || useless == nil {
			continue
		}
		if victim == nil || rank < victimRank {
			victim, victimRank, why = s, rank, useless
		}
	}
	return victim, why
}

// progress tells whether s may give its slot up now, its rank among those that may (the
// lowest gives first), and, when it is of no use to anyone, the answer it gets for it.
func (l *slots) progress(s *slot, now time.Time) (ok bool, rank float64, useless *Error) {
	age := now.Sub(s.start)
	switch {
	case s.body != nil:
		if s.body.done.Load() {
			return false, 0, nil // inserting: it no longer waits for its client
		}
		got := s.body.total.Load()
		rate := float64(got) / max(age.Seconds(), 0.001)
		if l.minRate > 0 && age >= l.grace && rate < float64(l.minRate) {
			useless = errSlotSlow(got, age, l.minRate, l.what, l.env)
		}
		return true, rate, useless
	case s.stream != nil:
		if since := s.stream.writing.Load(); since != 0 {
			stalled := now.Sub(time.Unix(0, since))
			if stalled >= l.grace {
				useless = errSlotStalled(stalled, l.what, l.env)
			}
			return stalled >= l.grace, -stalled.Seconds(), useless
		}
		if !s.stream.follow.Load() {
			return false, 0, nil // a plain stream going out as fast as it is read
		}
		quiet := now.Sub(later(time.Unix(0, s.stream.last.Load()), s.start)) // not the time it waited for its slot
		if quiet >= l.grace {
			useless = errSlotStalled(quiet, l.what, l.env)
		}
		// A follow waiting for news: it ends after a whole line and its client follows
		// again; the longest quiet first, before any stalled write.
		return true, followRank - quiet.Seconds(), useless
	}
	return false, 0, nil
}

func (l *slots) errShare(s *slot, holds, share int, now time.Time) *Error {
	return &Error{
		Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: RetryAfterDefault,
		Message: fmt.Sprintf("this request gave its slot up to another client after %s: its key (or address) held %d of the %d %s (%s) while others waited, over its share of %d; nothing of it was kept; send fewer at once, and retry later",
			now.Sub(s.start).Round(time.Millisecond), holds, l.n, l.what, l.env, share),
	}
}

func errSlotSlow(got int64, age time.Duration, minRate int64, what, env string) *Error {
	return &Error{
		Status: http.StatusRequestTimeout, Code: "request_timeout",
		Message: fmt.Sprintf("body: %d bytes in %s, under %d bytes a second (OPSQ_SLOT_MIN_RATE) while other clients waited for one of the %s (%s): the request is cut and nothing of it was kept; send the whole body at once, as fast as it can go",
			got, age.Round(time.Millisecond), minRate, what, env),
	}
}

func errSlotStalled(quiet time.Duration, what, env string) *Error {
	return &Error{
		Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: RetryAfterDefault,
		Message: fmt.Sprintf("the stream had nothing read or nothing to send for %s while other clients waited for one of the %s (%s); follow again", quiet.Round(time.Millisecond), what, env),
	}
}

// ingestMiddleware holds an ingest slot while the handler runs. A JSON submission of at
// most small bytes (its length given) is read whole before it asks for one: its client
// holds no slot while it sends. An ingest asked to give its slot up has its body cut:
// its next read fails, its transaction rolls back, and its client gets the reason.
func (l *slots) ingestMiddleware(small int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if small > 0 && r.ContentLength > 0 && r.ContentLength <= small && !isNDJSON(r) {
				if err := readAhead(c, r.ContentLength); err != nil {
					return err
				}
			}
			s := &slot{owner: owner(c), body: idleBodyOf(c)}
			if s.body != nil && !s.body.done.Load() {
				b := s.body
				s.cut = func(err *Error) { b.cut(err) }
			} else {
				s.body = nil // nothing to cut: read ahead, or not a connection with deadlines
			}
			if err := l.acquire(r.Context(), s); err != nil {
				return err
			}
			defer l.release(s)
			c.Set(slotKey, s)
			err := next(c)
			if cut := l.cutOf(s); cut != nil && !c.Response().Committed {
				return cut
			}
			return err
		}
	}
}

// cutOf returns why s was asked back, or nil.
func (l *slots) cutOf(s *slot) *Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return s.cutErr
}

// streamMiddleware holds a results stream slot while the handler runs. A stream asked to
// give its slot up ends: a follow after a whole line, as at OPSQ_MAX_FOLLOW (its client
// follows again); a stream whose write waits has the write cut.
func (l *slots) streamMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		act := &streamActivity{}
		act.last.Store(l.now().UnixNano())
		yield, stop := context.WithCancel(r.Context())
		defer stop()
		rc := http.NewResponseController(c.Response().Writer)
		s := &slot{owner: owner(c), stream: act, cut: func(*Error) {
			stop()
			if act.writing.Load() != 0 {
				_ = rc.SetWriteDeadline(time.Now()) // a write that waits: cut it
			}
		}}
		if err := l.acquire(r.Context(), s); err != nil {
			return err
		}
		defer l.release(s)
		c.Set(slotKey, s)
		c.Set(yieldKey, yield)
		return next(c)
	}
}

const yieldKey = "opsq.slot_yield"

// yieldContext is ctx, ended too when the request's slot is asked back.
func yieldContext(c echo.Context, ctx context.Context) context.Context {
	if y, ok := c.Get(yieldKey).(context.Context); ok {
		return y
	}
	return ctx
}

// streamActivityOf returns what the request's results stream slot watches, or nil.
func streamActivityOf(c echo.Context) *streamActivity {
	if s := slotOf(c); s != nil {
		return s.stream
	}
	return nil
}

// readAhead reads the request's body of length n whole (to its end, so that its read
// deadlines are cleared) before the handler runs.
func readAhead(c echo.Context, n int64) error {
	r := c.Request()
	body, err := io.ReadAll(io.LimitReader(r.Body, n+1))
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// inUse reports the slots held now.
func (l *slots) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.holders)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
