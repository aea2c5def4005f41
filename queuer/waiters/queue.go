// Package waiters is where requests wait on an instance without a database connection:
// the queue of reserves waiting for work (Queue: first come first woken, as many woken as
// the new work can serve, a wake-up passed on by a waiter that cannot use it), the waits
// on one submission's end (ByKey), and the admission bound they share (queuer.Config.MaxWaiters,
// DESIGN.md §8). It does not look for work or read a submission's state: its callers do,
// between the wake-ups it gives them.
package waiters

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/notify"
)

// MaxDefault is the default bound of the requests waiting on an instance (queuer.Config.MaxWaiters).
const MaxDefault = 20_000

// ErrTooMany is returned by a reserve that would wait, or a status wait, when
// the bound of requests already wait on this instance (DESIGN.md §8, bounded waiters).
var ErrTooMany = errors.New("too many requests waiting on this instance")

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
}

// Waiter is one waiting reserve: it waits on C.
type Waiter struct {
	ch         chan struct{} // holds at most one wake-up
	prev, next *Waiter
	queued     bool
	epoch      uint64 // the epoch of the wake-up it got last
	passed     uint64 // the epoch of the last wake-up it passed on
	poke       func() // called after each wake-up it is given (Parked.OnWake), or nil
}

// New returns an empty queue that admits up to max waiting requests (0: MaxDefault).
func New(max int) *Queue {
	if max <= 0 {
		max = MaxDefault
	}
	return &Queue{max: int64(max)}
}

// Admit counts one more waiting request, or returns ErrTooMany.
func (s *Queue) Admit() error {
	if s.waiting.Add(1) > s.max {
		s.waiting.Add(-1)
		return ErrTooMany
	}
	return nil
}

// Done uncounts a request admitted.
func (s *Queue) Done() { s.waiting.Add(-1) }

// Join admits a reserve and queues it at the back.
func (s *Queue) Join() (*Waiter, error) {
	if err := s.Admit(); err != nil {
		return nil, err
	}
	w := &Waiter{ch: make(chan struct{}, 1)}
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
	s.Done()
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
