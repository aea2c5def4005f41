package waiters

import (
	"context"
	"errors"
	"testing"

	"opsq/queuer/identity"
)

// woken reports whether w holds a wake-up, and takes it.
// len returns the number of queued waiters.
func (s *Queue) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.n
}

func woken(w *Waiter) bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

func joinN(t *testing.T, s *Queue, n int) []*Waiter {
	t.Helper()
	ws := make([]*Waiter, n)
	for i := range ws {
		w, err := s.Join(context.Background())
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
		ws[i] = w
	}
	return ws
}

func wokenIndexes(ws []*Waiter) []int {
	var out []int
	for i, w := range ws {
		if woken(w) {
			out = append(out, i)
		}
	}
	return out
}

func TestSignalWakesExactlyNFirstComeFirst(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	ws := joinN(t, s, 10)
	s.Wake(3)
	if got := wokenIndexes(ws); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("wake(3) woke waiters %v; want [0 1 2], the first three to join", got)
	}
	if n := s.len(); n != 7 {
		t.Errorf("%d waiters queued after wake(3) of 10; want 7", n)
	}
	s.Wake(2)
	if got := wokenIndexes(ws); len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Errorf("the next wake(2) woke %v; want [3 4]", got)
	}
	s.Wake(100)
	if got := wokenIndexes(ws); len(got) != 5 {
		t.Errorf("wake(100) with 5 queued woke %d; want 5", len(got))
	}
	s.Wake(1) // nobody queued: nothing happens, nothing is kept for later
	w, _ := s.Join(context.Background())
	if woken(w) {
		t.Errorf("a waiter that joined after a wake-up with nobody queued holds it; want none")
	}
}

func TestSignalRejoinKeepsPlace(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	ws := joinN(t, s, 5)
	s.Wake(1)
	if !woken(ws[0]) {
		t.Fatal("wake(1) did not wake the first waiter")
	}
	s.Rejoin(ws[0]) // found nothing: parks again at the front
	s.Wake(1)
	if got := wokenIndexes(ws); len(got) != 1 || got[0] != 0 {
		t.Errorf("after rejoining, wake(1) woke %v; want [0], the waiter that rejoined", got)
	}
}

func TestSignalNoLostWakeUp(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	w, _ := s.Join(context.Background())
	// The wake-up comes after the waiter joined and before it waits on its channel (while it
	// looks for work): the channel keeps it.
	s.Wake(1)
	select {
	case <-w.ch:
	default:
		t.Fatal("a wake-up between joining and waiting was lost")
	}
}

func TestSignalLeavePassesUnusedWakeUp(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	ws := joinN(t, s, 3)
	s.Wake(1)
	// ws[0] was woken while it looked and found chunks from an earlier wake-up: it leaves
	// without using this one, which goes to the next waiter.
	s.Leave(ws[0])
	if got := wokenIndexes(ws[1:]); len(got) != 1 || got[0] != 0 {
		t.Errorf("an unused wake-up of a leaving waiter woke %v of the others; want [0] (the next)", got)
	}
}

func TestSignalPassGoesAroundOnce(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	ws := joinN(t, s, 4)
	s.Wake(1)
	// Every waiter in turn is woken, rejoins, finds nothing it can take, and passes on.
	passes := 0
	for i := 0; i < 20; i++ {
		got := -1
		for j, w := range ws {
			if woken(w) {
				got = j
			}
		}
		if got < 0 {
			break
		}
		s.Rejoin(ws[got])
		s.Pass(ws[got])
		passes++
	}
	if passes != 5 {
		t.Errorf("a wake-up nobody could use was passed on %d times among 4 waiters; want 5 (each once, and the first again, who stops)", passes)
	}
	if n := s.len(); n != 4 {
		t.Errorf("%d waiters queued; want 4", n)
	}
}

func TestSignalCap(t *testing.T) {
	t.Parallel()
	s := New(3, 0)
	ws := joinN(t, s, 2)
	if err := s.Admit(context.Background()); err != nil { // a status wait
		t.Fatalf("the third waiter: %v", err)
	}
	if _, err := s.Join(context.Background()); !errors.Is(err, ErrTooMany) {
		t.Fatalf("the fourth waiter with a bound of 3: err = %v; want ErrTooMany", err)
	}
	if err := s.Admit(context.Background()); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a status wait beyond the bound: err = %v; want ErrTooMany", err)
	}
	s.Leave(ws[0])
	if _, err := s.Join(context.Background()); err != nil {
		t.Errorf("a waiter after one left: %v; want admitted", err)
	}
	if got := s.Waiting(); got != 3 {
		t.Errorf("%d waiting counted; want 3", got)
	}
}

func TestSignalBroadcast(t *testing.T) {
	t.Parallel()
	s := New(100, 0)
	ws := joinN(t, s, 50)
	s.Broadcast()
	if got := wokenIndexes(ws); len(got) != 50 {
		t.Errorf("broadcast woke %d of 50; want all", len(got))
	}
}

// TestPerKeyShare: one key holds at most its share of the waiters (half the bound by
// default), reserves and status waits together; other keys, and requests without a key,
// are still admitted up to the instance's bound; a key's slot comes back when its
// request leaves, and the count of a key without waiters is forgotten.
func TestPerKeyShare(t *testing.T) {
	t.Parallel()
	s := New(10, 0) // a share of 5
	greedy := identity.With(context.Background(), identity.Caller{Name: "greedy", Role: "consumer"})
	other := identity.With(context.Background(), identity.Caller{Name: "other", Role: "consumer"})
	var ws []*Waiter
	for i := range 4 {
		w, err := s.Join(greedy)
		if err != nil {
			t.Fatalf("greedy's waiter %d: %v", i+1, err)
		}
		ws = append(ws, w)
	}
	if err := s.Admit(greedy); err != nil { // a status wait: the fifth
		t.Fatalf("greedy's status wait: %v", err)
	}
	if _, err := s.Join(greedy); !errors.Is(err, ErrTooManyForKey) || !errors.Is(err, ErrTooMany) {
		t.Fatalf("greedy's sixth waiter: err = %v; want ErrTooManyForKey, an ErrTooMany", err)
	}
	if err := s.Admit(greedy); !errors.Is(err, ErrTooManyForKey) {
		t.Fatalf("greedy's sixth waiter (a status wait): err = %v; want ErrTooManyForKey", err)
	}
	for i := range 5 {
		if _, err := s.Join(other); err != nil {
			t.Fatalf("other's waiter %d with greedy at its share: %v", i+1, err)
		}
	}
	if _, err := s.Join(context.Background()); !errors.Is(err, ErrTooMany) || errors.Is(err, ErrTooManyForKey) {
		t.Fatalf("a waiter without a key past the bound: err = %v; want ErrTooMany", err)
	}
	s.Leave(ws[0])
	if _, err := s.Join(greedy); err != nil {
		t.Fatalf("greedy's waiter after one of its own left: %v; want admitted", err)
	}
	for _, w := range ws[1:] {
		s.Leave(w)
	}
	s.Done(greedy)
	s.keys.Lock()
	n := s.keys.waiting["greedy"]
	s.keys.Unlock()
	if n != 1 {
		t.Errorf("greedy counted %d waiting; want 1", n)
	}
	if got := s.Waiting(); got != 6 {
		t.Errorf("%d waiting counted; want 6 (5 of other, 1 of greedy)", got)
	}

	if s := New(10, 3); s.perKey != 3 {
		t.Errorf("New(10, 3) gives a key %d; want 3", s.perKey)
	}
	if s := New(1, 0); s.perKey != 1 {
		t.Errorf("New(1, 0) gives a key %d; want 1", s.perKey)
	}
}
