package queuer

import (
	"slices"
	"testing"

	"opsq/claims"
	"opsq/migrations/pgtest"
)

func TestRouterNoteWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payload  string
		want     int
		wantTips []int
	}{
		{"all:5", 5, []int{0, 1, 2, 3}},
		{"all", -1, []int{0, 1, 2, 3}},
		{"3,1,3", 3, []int{1, 3}},
		{"nonsense", 0, nil},
	} {
		t.Run(c.payload, func(t *testing.T) {
			t.Parallel()
			r := newRouter(nil, "me", nil, nil, nil)
			r.markUnavailable([]claims.Lease{{Shard: 1}, {Shard: 2}}, r.announced())
			before := r.announced()
			if got := r.noteWork(c.payload, 4); got != c.want {
				t.Errorf("noteWork(%q) = %d chunks; want %d", c.payload, got, c.want)
			}
			if r.announced() == before {
				t.Errorf("noteWork(%q) did not count an announcement", c.payload)
			}
			for _, s := range c.wantTips {
				if _, ok := r.mu.tips[s]; !ok {
					t.Errorf("noteWork(%q): no tip for shard %d; want one", c.payload, s)
				}
				if !r.available(s) {
					t.Errorf("noteWork(%q): shard %d still marked empty; want available", c.payload, s)
				}
			}
			if len(r.mu.tips) != len(c.wantTips) {
				t.Errorf("noteWork(%q): %d tips; want %d", c.payload, len(r.mu.tips), len(c.wantTips))
			}
		})
	}
}

// TestRouterStaleScanMarksNothing: a scan that began before an announcement of work does
// not mark shards empty; one that began after does, until work is announced on them.
func TestRouterStaleScanMarksNothing(t *testing.T) {
	t.Parallel()
	r := newRouter(nil, "me", nil, nil, nil)
	leases := []claims.Lease{{Shard: 7}}
	since := r.announced()
	r.markAvailable(9) // work announced while the scan ran
	r.markUnavailable(leases, since)
	if !r.available(7) {
		t.Fatal("a scan that began before an announcement marked shard 7 empty; want it left available")
	}
	r.markUnavailable(leases, r.announced())
	if r.available(7) {
		t.Fatal("a scan with no announcement since marked nothing; want shard 7 empty")
	}
	r.markAvailable(7)
	if !r.available(7) {
		t.Fatal("markAvailable(7) left shard 7 empty")
	}
}

// TestRouterDryPeer: a peer that answered a forwarded reserve with nothing is not
// forwarded to for its published availability until dryTTL has passed.
func TestRouterDryPeer(t *testing.T) {
	t.Parallel()
	clock := pgtest.NewClock()
	r := newRouter(nil, "me", nil, nil, nil)
	r.clock = clock
	r.mu.peers = []peer{{id: "b", url: "http://b", shards: []int32{3}}}
	fresh := func() { r.mu.Lock(); r.mu.read = clock.Now(); r.mu.Unlock() } // no read of the database
	fresh()
	if got := r.forwardTargets(t.Context()); !slices.Equal(got, []string{"http://b"}) {
		t.Fatalf("forwardTargets = %v; want the peer that published work", got)
	}
	if r.answeredEmpty("http://b") { // it answered with nothing, and no tip points to it
		t.Error("answeredEmpty with no tip to the peer = true; want false (the peer is dry)")
	}
	if got := r.forwardTargets(t.Context()); len(got) != 0 {
		t.Errorf("forwardTargets right after the peer answered with nothing = %v; want none", got)
	}
	clock.Add(dryTTL)
	fresh()
	if got := r.forwardTargets(t.Context()); !slices.Equal(got, []string{"http://b"}) {
		t.Errorf("forwardTargets dryTTL later = %v; want the peer again", got)
	}
}

// TestRouterFreshTipOutlivesEmptyAnswer: a peer tipped less than tipGrace ago that answers
// with nothing may not have seen the work yet: the tip stays, and the waiter is told to look
// again; an empty answer after tipGrace forgets the tip and marks the peer dry.
func TestRouterFreshTipOutlivesEmptyAnswer(t *testing.T) {
	t.Parallel()
	clock := pgtest.NewClock()
	r := newRouter(nil, "me", nil, nil, nil)
	r.clock = clock
	r.mu.peers = []peer{{id: "b", url: "http://b", shards: []int32{3}}}
	r.mu.urls = map[int]string{3: "http://b"}
	fresh := func() { r.mu.Lock(); r.mu.read = clock.Now(); r.mu.Unlock() }
	fresh()
	r.noteWork("3", 4)
	if !r.answeredEmpty("http://b") {
		t.Error("answeredEmpty right after a tip = false; want true (look again)")
	}
	if _, ok := r.mu.tips[3]; !ok {
		t.Error("an empty answer to a fresh tip forgot it; want the tip kept")
	}
	clock.Add(tipGrace)
	fresh()
	if r.answeredEmpty("http://b") {
		t.Error("answeredEmpty tipGrace after the tip = true; want false")
	}
	if got := r.forwardTargets(t.Context()); len(got) != 0 {
		t.Errorf("forwardTargets after an empty answer to a stale tip = %v; want none (tip forgotten, peer dry)", got)
	}
}
