package queuer

import (
	"errors"
	"sync"
	"sync/atomic"
)

// MaxWaitersDefault is the default of Config.MaxWaiters.
const MaxWaitersDefault = 20_000

// ErrTooManyWaiters is returned by a reserve that would wait, or a status wait, when
// Config.MaxWaiters requests already wait on this instance (DESIGN.md §8, bounded waiters).
var ErrTooManyWaiters = errors.New("too many requests waiting on this instance")

// signal is the queue of the reserves waiting for work on this instance, first come first
// woken, and the count of every waiting request (reserves and status waits) against the
// instance's bound. A wake-up wakes as many waiters as the new work can serve (wake), or
// all of them (broadcast) when anything may have changed.
//
// A waiter joins before it looks for work and waits on its channel after: a wake-up that
// comes between the look and the wait is kept in the channel, so none is lost. A woken
// waiter leaves the queue; it rejoins (at the front, keeping its place) before it looks
// again. One that leaves holding a wake-up it did not use passes it on. Safe for
// concurrent use.
type signal struct {
	max     int64
	waiting atomic.Int64 // reserves and status waits admitted
	woke    atomic.Int64 // wake-ups delivered, for tests and metrics
	parked  atomic.Int64 // reserves waiting on their channel (not looking)

	mu struct {
		sync.Mutex
		head, tail *waiter
		n          int
		// epoch counts the wake-ups from new work; a wake-up passed on by a waiter that
		// found nothing for itself carries its epoch (see pass).
		epoch uint64
	}
}

// waiter is one waiting reserve.
type waiter struct {
	ch         chan struct{} // holds at most one wake-up
	prev, next *waiter
	queued     bool
	epoch      uint64 // the epoch of the wake-up it got last
	passed     uint64 // the epoch of the last wake-up it passed on
	poke       func() // called after each wake-up it is given (Parked.OnWake), or nil
}

func newSignal(max int) *signal {
	if max <= 0 {
		max = MaxWaitersDefault
	}
	return &signal{max: int64(max)}
}

// admit counts one more waiting request, or returns ErrTooManyWaiters.
func (s *signal) admit() error {
	if s.waiting.Add(1) > s.max {
		s.waiting.Add(-1)
		return ErrTooManyWaiters
	}
	return nil
}

// done uncounts a request admitted.
func (s *signal) done() { s.waiting.Add(-1) }

// join admits a reserve and queues it at the back.
func (s *signal) join() (*waiter, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	s.pushBackLocked(w)
	s.mu.Unlock()
	return w, nil
}

// rejoin queues a woken waiter again, at the front, where it was, before it looks again.
func (s *signal) rejoin(w *waiter) {
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

// leave takes w out of the queue and uncounts it. A wake-up it holds unused goes to the
// next waiter, since it may have been meant for work w did not take.
func (s *signal) leave(w *waiter) {
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
	s.done()
}

// wake wakes up to n waiters, first come first woken: n chunks became reservable.
func (s *signal) wake(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.epoch++
	s.wakeLocked(n, s.mu.epoch)
}

// broadcast wakes every waiter: shards were acquired, the listener reconnected, or the
// instance drains.
func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.epoch++
	s.wakeLocked(s.mu.n, s.mu.epoch)
}

// pass hands the wake-up that woke w on to the next waiter, and queues w at the back: w
// found nothing it could take, though the work it was woken for may still be there for a
// waiter whose strategy allows it. It does so once per epoch: when the wake-up comes back
// to w, it went around every waiter in between, and it stops there.
func (s *signal) pass(w *waiter) {
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

func (s *signal) wakeLocked(n int, epoch uint64) {
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

// onWake sets the function called after each wake-up w is given.
func (s *signal) onWake(w *waiter, poke func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.poke = poke
}

func (s *signal) pushBackLocked(w *waiter) {
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

func (s *signal) removeLocked(w *waiter) {
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
