package queuer

import "sync"

// signal wakes every goroutine waiting for "something changed". A waiter takes the current
// channel with next before it looks, then waits on it; broadcast closes it and starts a
// new one. Safe for concurrent use.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}
