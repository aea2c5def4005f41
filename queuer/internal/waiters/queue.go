// Package waiters is where requests wait on an instance without a database connection:
// the queue of reserves waiting for work (Queue: first come first woken, as many woken as
// the new work can serve, a wake-up passed on by a waiter that cannot use it), the waits
// on one submission's end (ByKey), and the admission bound they share (queuer.Config.MaxWaiters,
// DESIGN.md §8). It does not look for work or read a submission's state: its callers do,
// between the wake-ups it gives them.
package waiters

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/identity"
	"opsq/queuer/internal/notify"
)

// MaxDefault is the default bound of the requests waiting on an instance (queuer.Config.MaxWaiters).
const MaxDefault = 20_000

// ErrTooMany is returned by a reserve that would wait, or a status wait, when
// the bound of requests already wait on this instance (DESIGN.md §8, bounded waiters).
var ErrTooMany = errors.New("too many requests waiting on this instance")

// ErrTooManyForKey is returned by a reserve that would wait, or a status wait, when its
// caller's API key already holds its share of the waiters (DESIGN.md §8: no key holds
// more than half of them). It wraps ErrTooMany.
var ErrTooManyForKey = fmt.Errorf("%w: this API key holds its share of them", ErrTooMany)

// Queue is the queue of the reserves waiting for work on this instance, first come first
// woken, and the count of every waiting request (reserves and status waits) against the
// instance's bound. A wake-up wakes as many waiters as the new work can serve (Wake), or
// all of them (Broadcast) when anything may have changed.
//
// A waiter joins before it looks for work and waits on its channel after: a wake-up that
// comes between the look and the wait is kept in the channel, so none is lost. A woken
// waiter leaves the queue; it rejoins (at the front, keeping its place) before it looks
// again. One that leaves holding a wake-up it did not use passes it on. Safe for
// concurrent use.
type Queue struct {
	max     int64
	perKey  int64        // the most waiting requests of one caller (its API key's name)
	waiting atomic.Int64 // reserves and status waits admitted
	woke    atomic.Int64 // wake-ups delivered, for tests and metrics
	parked  atomic.Int64 // reserves waiting on their channel (not looking)

	mu struct {
		sync.Mutex
		head, tail *Waiter
		n          int
		// epoch counts the wake-ups from new work; a wake-up passed on by a waiter that
		// found nothing for itself carries its epoch (see pass).
		epoch uint64
	}
	keys struct {
		sync.Mutex
		// waiting counts the admitted requests of each caller that has one: at most max
		// entries, since each holds an admitted request.
		waiting map[string]int64
	}
}

// Waiter is one waiting reserve: it waits on C.
type Waiter struct {
	ch         chan struct{} // holds at most one wake-up
	prev, next *Waiter
	queued     bool
	epoch      uint64 // the epoch of the wake-up it got last
	passed     uint64 // the epoch of the last wake-up it passed on
	poke       func() // called after each wake-up it is given (Parked.OnWake), or nil
	key        string // its caller's, counted against the caller's share
}

// New returns an empty queue that admits up to most waiting requests (0: MaxDefault), of
// which up to perKey of one caller (0: half of most, at least 1).
func New(most, perKey int) *Queue {
	if most <= 0 {
		most = MaxDefault
	}
	if perKey <= 0 {
		perKey = most / 2
	}
	s := &Queue{max: int64(most), perKey: int64(min(max(perKey, 1), most))}
	s.keys.waiting = map[string]int64{}
	return s
}

// Admit counts one more waiting request of ctx's caller (identity.From), or returns
// ErrTooMany when the instance's bound is reached, or ErrTooManyForKey when the caller's
// share is. A request without a caller (OPSQ_AUTH=off) counts against the instance's
// bound only.
func (s *Queue) Admit(ctx context.Context) error { return s.admit(keyOf(ctx)) }

// Done uncounts a request admitted with ctx.
func (s *Queue) Done(ctx context.Context) { s.done(keyOf(ctx)) }

func keyOf(ctx context.Context) string {
	id, _ := identity.From(ctx)
	return id.Name
}

func (s *Queue) admit(key string) error {
	if key != "" {
		s.keys.Lock()
		n := s.keys.waiting[key]
		if n >= s.perKey {
			s.keys.Unlock()
			return ErrTooManyForKey
		}
		s.keys.waiting[key] = n + 1
		s.keys.Unlock()
	}
	if s.waiting.Add(1) > s.max {
		s.waiting.Add(-1)
		s.uncountKey(key)
		return ErrTooMany
	}
	return nil
}

func (s *Queue) done(key string) {
	s.waiting.Add(-1)
	s.uncountKey(key)
}

func (s *Queue) uncountKey(key string) {
	if key == "" {
		return
	}
	s.keys.Lock()
	defer s.keys.Unlock()
	if n := s.keys.waiting[key] - 1; n > 0 {
		s.keys.waiting[key] = n
	} else {
		delete(s.keys.waiting, key)
	}
}

// Join admits a reserve of ctx's caller (as Admit) and queues it at the back.
func (s *Queue) Join(ctx context.Context) (*Waiter, error) {
	key := keyOf(ctx)
	if err := s.admit(key); err != nil {
		return nil, err
	}
	w := &Waiter{ch: make(chan struct{}, 1), key: key}
	s.mu.Lock()
	s.pushBackLocked(w)
	s.mu.Unlock()
	return w, nil
}

// Rejoin queues a woken waiter again, at the front, where it was, before it looks again.
func (s *Queue) Rejoin(w *Waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.queued {
		return
	}
	w.prev, w.next = nil, s.mu.head
	if s.mu.head != nil {
		s.mu.head.prev = w
	} else {
		s.mu.tail = w
	}
	s.mu.head = w
	w.queued = true
	s.mu.n++
}

// Leave takes w out of the queue and uncounts it. A wake-up it holds unused goes to the
// next waiter, since it may have been meant for work w did not take.
func (s *Queue) Leave(w *Waiter) {
	s.mu.Lock()
	s.removeLocked(w)
	var unused bool
	select {
	case <-w.ch:
		unused = true
	default:
	}
	if unused {
		s.wakeLocked(1, w.epoch)
	}
	s.mu.Unlock()
	s.done(w.key)
}

// Wake wakes up to n waiters, first come first woken: n chunks became reservable.
func (s *Queue) Wake(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.epoch++
	s.wakeLocked(n, s.mu.epoch)
}

// Broadcast wakes every waiter: shards were acquired, the listener reconnected, or the
// instance drains.
func (s *Queue) Broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.epoch++
	s.wakeLocked(s.mu.n, s.mu.epoch)
}

// Pass hands the wake-up that woke w on to the next waiter, and queues w at the back: w
// found nothing it could take, though the work it was woken for may still be there for a
// waiter whose strategy allows it. It does so once per epoch: when the wake-up comes back
// to w, it went around every waiter in between, and it stops there.
func (s *Queue) Pass(w *Waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.passed == w.epoch {
		return
	}
	w.passed = w.epoch
	s.removeLocked(w)
	s.wakeLocked(1, w.epoch)
	s.pushBackLocked(w)
}

func (s *Queue) wakeLocked(n int, epoch uint64) {
	for ; n > 0 && s.mu.head != nil; n-- {
		w := s.mu.head
		s.removeLocked(w)
		w.epoch = epoch
		s.woke.Add(1)
		select {
		case w.ch <- struct{}{}:
		default: // already holds one
		}
		if w.poke != nil {
			w.poke()
		}
	}
}

// OnWake sets the function called after each wake-up w is given.
func (s *Queue) OnWake(w *Waiter, poke func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.poke = poke
}

func (s *Queue) pushBackLocked(w *Waiter) {
	w.prev, w.next = s.mu.tail, nil
	if s.mu.tail != nil {
		s.mu.tail.next = w
	} else {
		s.mu.head = w
	}
	s.mu.tail = w
	w.queued = true
	s.mu.n++
}

func (s *Queue) removeLocked(w *Waiter) {
	if !w.queued {
		return
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.mu.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.mu.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	s.mu.n--
}

// C is the channel w is woken on; it holds at most one wake-up.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Block is how a parked waiter's caller waits between two looks: it returns true once it
// has received a wake-up from wake, false once until has passed, or an error that ends the
// wait. It may return false early; the caller then waits again.
type Block func(wake <-chan struct{}, until time.Time) (woken bool, err error)

// Sleep waits for w's next wake-up with block, counted as parked meanwhile.
func (s *Queue) Sleep(w *Waiter, until time.Time, block Block) (bool, error) {
	s.parked.Add(1)
	defer s.parked.Add(-1)
	return block(w.ch, until)
}

// Waiting is how many requests wait now (reserves and status waits admitted).
func (s *Queue) Waiting() int64 { return s.waiting.Load() }

// Parked is how many reserves wait on their channel now (not looking).
func (s *Queue) Parked() int64 { return s.parked.Load() }

// Woken is how many wake-ups were delivered, for tests and metrics.
func (s *Queue) Woken() int64 { return s.woke.Load() }

// Handle wakes as many waiters as an event brings reservable chunks, or all of them when
// anything may have changed. Work raised ahead of its own NOTIFY (NewWork.Local) wakes
// nobody: the NOTIFY does, on every instance.
func (s *Queue) Handle(e notify.Event) {
	switch e := e.(type) {
	case notify.NewWork:
		switch {
		case e.Local:
		case e.Chunks < 0:
			s.Broadcast()
		default:
			s.Wake(e.Chunks)
		}
	case notify.ChunksFreed:
		s.Wake(len(e.Chunks))
	case notify.ShardsChanged:
		if len(e.Acquired) > 0 {
			s.Broadcast() // the new shards may hold work
		}
	case notify.Resync:
		s.Broadcast()
	}
}
