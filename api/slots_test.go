package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slotsUnderTest is 4 ingest slots on a clock the test moves, and what was cut.
type slotsUnderTest struct {
	l   *slots
	now time.Time
	cut chan *slot
}

func newSlotsUnderTest() *slotsUnderTest {
	u := &slotsUnderTest{now: time.Unix(1_000_000, 0), cut: make(chan *slot, 8)}
	u.l = newSlots("ingests", "OPSQ_MAX_INGESTS", 4, 100*time.Millisecond, 1000, time.Second)
	u.l.now = func() time.Time { return u.now }
	return u
}

// upload takes a slot for owner at once, for an upload that has brought got bytes.
func (u *slotsUnderTest) upload(t *testing.T, owner string, got int64) *slot {
	t.Helper()
	s := &slot{owner: owner, body: &idleBody{}}
	s.body.total.Store(got)
	s.cut = func(*Error) { u.cut <- s }
	if err := u.l.acquire(t.Context(), s); err != nil {
		t.Fatalf("a free slot for %s: %v", owner, err)
	}
	return s
}

// wait asks for a slot for owner in the background.
func (u *slotsUnderTest) wait(t *testing.T, owner string) (*slot, <-chan error) {
	s := &slot{owner: owner, body: &idleBody{}}
	s.cut = func(*Error) { u.cut <- s }
	done := make(chan error, 1)
	go func() { done <- u.l.acquire(t.Context(), s) }()
	return s, done
}

func (u *slotsUnderTest) expectCut(t *testing.T, want *slot, status int, mentions string) {
	t.Helper()
	select {
	case got := <-u.cut:
		if got != want {
			t.Fatalf("cut %s's upload of %d bytes; want %s's of %d", got.owner, got.body.total.Load(), want.owner, want.body.total.Load())
		}
		u.l.mu.Lock()
		err := got.cutErr
		u.l.mu.Unlock()
		if err == nil || err.Status != status || !strings.Contains(err.Message, mentions) {
			t.Errorf("the cut's answer %v; want %d mentioning %q", err, status, mentions)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing cut; want one upload to give its slot up")
	}
}

// TestSlotsShare: a waiter of a key under its share takes a slot back from the key over
// it, its slowest upload, and gets that very slot once it is released.
func TestSlotsShare(t *testing.T) {
	t.Parallel()
	u := newSlotsUnderTest()
	var held []*slot
	for _, got := range []int64{500_000, 90_000, 300_000, 700_000} {
		held = append(held, u.upload(t, "A", got))
	}
	u.now = u.now.Add(10 * time.Millisecond) // within the grace: none is of no use yet
	_, done := u.wait(t, "B")
	u.expectCut(t, held[1], http.StatusServiceUnavailable, "share of 2")
	u.l.release(held[1])
	if err := <-done; err != nil {
		t.Fatalf("B's wait: %v; want the slot given up", err)
	}
	if n := u.l.inUse(); n != 4 {
		t.Errorf("%d slots in use; want 4", n)
	}
}

// TestSlotsAtShareWaits: a waiter of a key at its share takes nothing from another key,
// however slow; it takes one back only from its own key's uploads of no use, and
// otherwise is refused when its wait runs out.
func TestSlotsAtShareWaits(t *testing.T) {
	t.Parallel()
	u := newSlotsUnderTest()
	u.upload(t, "A", 1)
	u.upload(t, "A", 2)
	u.upload(t, "B", 1_000_000)
	b2 := u.upload(t, "B", 1_000_000)
	u.now = u.now.Add(2 * time.Second) // past the grace: A's are under the rate, B's are not

	_, done := u.wait(t, "B")
	err := <-done
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "OPSQ_MAX_INGESTS") {
		t.Fatalf("B at its share, its uploads fast: %v; want 503 busy after the wait", err)
	}
	select {
	case s := <-u.cut:
		t.Fatalf("%s's upload was cut for a waiter of B at its share; want none", s.owner)
	default:
	}

	b2.body.total.Store(10) // now B's own second upload is of no use: it gives way
	_, done = u.wait(t, "B")
	u.expectCut(t, b2, http.StatusRequestTimeout, "OPSQ_SLOT_MIN_RATE")
	u.l.release(b2)
	if err := <-done; err != nil {
		t.Fatalf("B's wait: %v; want its own slow upload's slot", err)
	}
}

// TestSlotsFreedToFewest: with 3 owners the share is 1; a waiter of an owner holding
// none takes a slot back from the owner over it with the slowest upload, while a waiter of
// an owner holding 2 waits.
func TestSlotsFreedToFewest(t *testing.T) {
	t.Parallel()
	u := newSlotsUnderTest()
	u.l.wait = 5 * time.Second
	a := u.upload(t, "A", 500_000)
	u.upload(t, "A", 1_000_000)
	u.upload(t, "B", 1_000_000)
	u.upload(t, "B", 1_000_000)
	_, doneB := u.wait(t, "B")
	waitFor(t, "B waiting", func() bool { u.l.mu.Lock(); defer u.l.mu.Unlock(); return len(u.l.mu.waiters) == 1 })
	_, doneC := u.wait(t, "C")
	u.expectCut(t, a, http.StatusServiceUnavailable, "share")
	u.l.release(a)
	if err := <-doneC; err != nil {
		t.Fatalf("C's wait: %v; want the slot taken back for it", err)
	}
	select {
	case err := <-doneB:
		t.Fatalf("B, at its share, was answered %v while C waited; want it still waiting", err)
	default:
	}
}
