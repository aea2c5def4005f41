package admin

import (
	"fmt"
	"testing"
	"time"

	"opsq/reserver"
)

// TestTopConsumers: what the reserver holds and the names seen are one list, most in
// flight first, then the most recently seen, cut to n.
func TestTopConsumers(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	loads := []reserver.ConsumerLoad{
		{Consumer: "a", Inflight: 2, OldestReservedAt: ago(300), NewestReservedAt: ago(20)},
		{Consumer: "b", Inflight: 7, OldestReservedAt: ago(5), NewestReservedAt: ago(1)},
	}
	seen := map[string]time.Time{"a": ago(3), "idle": ago(40), "idler": ago(600)}
	got := topConsumers(loads, seen, now, 3)
	want := []string{"b:7:5000:1000", "a:2:300000:3000", "idle:0:-:40000"}
	if len(got) != len(want) {
		t.Fatalf("topConsumers = %+v; want %v", got, want)
	}
	for i, e := range got {
		oldest := "-"
		if e.OldestLeaseAge != nil {
			oldest = fmt.Sprint(*e.OldestLeaseAge)
		}
		if s := fmt.Sprintf("%s:%d:%s:%d", e.Consumer, e.Inflight, oldest, e.LastSeenAge); s != want[i] {
			t.Errorf("topConsumers[%d] = %s; want %s (name:in flight:oldest ms:seen ms ago)", i, s, want[i])
		}
	}
}

// TestSeenIsBounded: at most seenMax names; a new one while full waits until old ones are
// forgotten (SeenFor), and a snapshot forgets them.
func TestSeenIsBounded(t *testing.T) {
	t.Parallel()
	s := NewSeen()
	t0 := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for i := range seenMax + 10 {
		s.Note(fmt.Sprintf("c-%d", i), t0)
	}
	if n := len(s.snapshot(t0)); n != seenMax {
		t.Fatalf("%d names remembered; want %d", n, seenMax)
	}
	s.Note("c-0", t0.Add(SeenFor)) // known: refreshed even while full
	s.Note("late", t0.Add(SeenFor+time.Second))
	snap := s.snapshot(t0.Add(SeenFor + time.Second))
	if len(snap) != 2 || snap["late"].IsZero() || snap["c-0"].IsZero() {
		t.Errorf("after an hour: %d names (%v); want c-0 and late", len(snap), snap["late"])
	}
}
