package peers

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/sql/pgtest"
)

// TestRouterNoteWork: an event of new work counts an announcement, and each shard it
// names (every shard, for work anywhere) gets a tip and is no longer marked empty.
func TestRouterNoteWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		event    notify.Event
		wantTips []int
	}{
		{"over every shard", notify.NewWork{Chunks: 5}, []int{0, 1, 2, 3}},
		{"anything may have changed", notify.Resync{}, []int{0, 1, 2, 3}},
		{"on shards named", notify.NewWork{Shards: []int{3, 1, 3}, Chunks: 3}, []int{1, 3}},
		{"none", notify.NewWork{Shards: []int{}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newTestRouter(nil)
			r.MarkUnavailable([]claims.Lease{{Shard: 1}, {Shard: 2}}, r.Announced())
			before := r.Announced()
			r.Handle(c.event)
			if r.Announced() == before {
				t.Errorf("%#v did not count an announcement", c.event)
			}
			for _, s := range c.wantTips {
				if _, ok := r.mu.tips[s]; !ok {
					t.Errorf("%#v: no tip for shard %d; want one", c.event, s)
				}
				if !r.Available(s) {
					t.Errorf("%#v: shard %d still marked empty; want available", c.event, s)
				}
			}
			if len(r.mu.tips) != len(c.wantTips) {
				t.Errorf("%#v: %d tips; want %d", c.event, len(r.mu.tips), len(c.wantTips))
			}
		})
	}
}

// TestRouterLocalWorkWaitsForItsNotify: work raised ahead of its own NOTIFY changes
// nothing here: the NOTIFY does, on every instance.
func TestRouterLocalWorkWaitsForItsNotify(t *testing.T) {
	t.Parallel()
	r := newTestRouter(nil)
	before := r.Announced()
	r.Handle(notify.NewWork{Shards: []int{2}, Chunks: 1, Local: true})
	if r.Announced() != before || len(r.mu.tips) != 0 {
		t.Errorf("local work: %d announcements, %d tips; want none", r.Announced()-before, len(r.mu.tips))
	}
}

// newTestRouter returns a router of 4 shards without a database, on now (nil: the
// system's clock), whose requests are signed with a cluster key of its own.
func newTestRouter(now func() time.Time) *Router {
	return New(Config{ShardCount: 4, Instance: "me", Now: now, Log: slog.New(slog.DiscardHandler),
		Keys: tokens.NewStaticKeyring([]byte(strings.Repeat("k", 32)))})
}

// TestRouterStaleScanMarksNothing: a scan that began before an announcement of work does
// not mark shards empty; one that began after does, until work is announced on them.
func TestRouterStaleScanMarksNothing(t *testing.T) {
	t.Parallel()
	r := newTestRouter(nil)
	leases := []claims.Lease{{Shard: 7}}
	since := r.Announced()
	r.markAvailable(9) // work announced while the scan ran
	r.MarkUnavailable(leases, since)
	if !r.Available(7) {
		t.Fatal("a scan that began before an announcement marked shard 7 empty; want it left available")
	}
	r.MarkUnavailable(leases, r.Announced())
	if r.Available(7) {
		t.Fatal("a scan with no announcement since marked nothing; want shard 7 empty")
	}
	r.markAvailable(7)
	if !r.Available(7) {
		t.Fatal("markAvailable(7) left shard 7 empty")
	}
}

// TestRouterDryPeer: a peer that answered a forwarded reserve with nothing is not
// forwarded to for its published availability until dryTTL has passed.
func TestRouterDryPeer(t *testing.T) {
	t.Parallel()
	clock := pgtest.NewClock()
	r := newTestRouter(clock.Now)
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
	r := newTestRouter(clock.Now)
	r.mu.peers = []peer{{id: "b", url: "http://b", shards: []int32{3}}}
	r.mu.urls = map[int]string{3: "http://b"}
	fresh := func() { r.mu.Lock(); r.mu.read = clock.Now(); r.mu.Unlock() }
	fresh()
	r.noteWork([]int{3})
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
