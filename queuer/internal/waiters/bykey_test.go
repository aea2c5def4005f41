package waiters

import "testing"

// has reports whether key has waiters in w.
func (w *ByKey) has(key int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.byKey[key]) > 0
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWaitersWakeOnlyTheirKey: wake closes the channels of every waiter on its key, and
// of no other.
func TestWaitersWakeOnlyTheirKey(t *testing.T) {
	t.Parallel()
	w := NewByKey()
	a1, done1 := w.Add(1)
	defer done1()
	a2, done2 := w.Add(1)
	defer done2()
	b, doneB := w.Add(2)
	defer doneB()
	if !w.has(1) || !w.has(2) || w.has(3) {
		t.Fatalf("has(1), has(2), has(3) = %t, %t, %t; want true, true, false", w.has(1), w.has(2), w.has(3))
	}
	w.Wake(1)
	if !closed(a1) || !closed(a2) {
		t.Errorf("after wake(1): the waiters on 1 closed = %t, %t; want both", closed(a1), closed(a2))
	}
	if closed(b) {
		t.Error("after wake(1): the waiter on 2 is closed; want it waiting")
	}
	if !w.has(2) {
		t.Error("has(2) after wake(1) = false; want true")
	}
	if w.has(1) {
		t.Error("has(1) after wake(1) = true; want false")
	}
	w.Wake(1) // nobody left on 1: does not close a channel twice
	done1()   // unregistering after the wake-up is harmless
}

// TestWaitersUnregister: the function add returns takes the waiter out, so that a later
// wake-up does not touch its channel, and leaves the key's other waiters.
func TestWaitersUnregister(t *testing.T) {
	t.Parallel()
	w := NewByKey()
	gone, unregister := w.Add(5)
	stays, done := w.Add(5)
	defer done()
	unregister()
	if !w.has(5) {
		t.Fatal("has(5) after one of its two waiters left = false; want true")
	}
	w.Wake(5)
	if closed(gone) {
		t.Error("the channel of a waiter that left was closed; want it untouched")
	}
	if !closed(stays) {
		t.Error("the channel of the waiter that stayed is open after wake; want it closed")
	}

	_, last := w.Add(6)
	last()
	if w.has(6) {
		t.Error("has(6) after its only waiter left = true; want false")
	}
}

// TestWaitersWakeAll closes every channel, on every key.
func TestWaitersWakeAll(t *testing.T) {
	t.Parallel()
	w := NewByKey()
	var chans []<-chan struct{}
	for _, key := range []int64{1, 1, 2, 3} {
		ch, done := w.Add(key)
		defer done()
		chans = append(chans, ch)
	}
	w.WakeAll()
	for i, ch := range chans {
		if !closed(ch) {
			t.Errorf("waiter %d open after wakeAll; want closed", i)
		}
	}
	for _, key := range []int64{1, 2, 3} {
		if w.has(key) {
			t.Errorf("has(%d) after wakeAll = true; want false", key)
		}
	}
	ch, done := w.Add(1) // a waiter that comes after waits for the next wake-up
	defer done()
	if closed(ch) {
		t.Error("a waiter added after wakeAll is closed; want it waiting")
	}
}
