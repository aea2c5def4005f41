package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// A Drain whose context ends with reservations in flight (drain_timeout, or a second
// signal) releases every shard still held, Abandon first, while the claims still hold; a
// stopped instance never leaves its shards to expire (DESIGN.md §4, Graceful shutdown).
func TestManagerDrainCancelledReleasesBusyShards(t *testing.T) {
	t.Parallel()
	slow := fast
	slow.Drain = time.Minute // only the context ends this drain
	f := setup(t, slow)
	a, b := f.start("a"), f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })
	busy := a.shards()[:3]
	for _, s := range busy {
		a.setInflight(s, 2)
	}
	waitCycles(t, a.Manager, 1)
	before := f.claims()

	ctx, cancel := context.WithCancel(t.Context())
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(ctx) }()
	took := pgtest.WaitFor(t, 5*time.Second, "the idle shards of a draining manager move", func() string {
		if n := len(b.shards()); n != 61 {
			return fmt.Sprintf("b holds %d shards; want 61", n)
		}
		return ""
	})
	t.Logf("Drain: idle shards released and taken in %s", took)
	if got, _ := a.abandoned(); len(got) > 0 {
		t.Errorf("Abandon called with %v for shards released empty; want no call", got)
	}

	cancel() // the second signal
	select {
	case err := <-drained:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Drain() after its context was cancelled = %v; want an error wrapping context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return within 10s of its context's end")
	}
	got, free := a.abandoned()
	if !slices.Equal(got, busy) {
		t.Errorf("Abandon called with shards %v; want the busy ones %v", got, busy)
	}
	if len(free) > 0 {
		t.Errorf("Abandon called with shards %v no longer held; want it called while the claims hold", free)
	}
	after := f.claims()
	for _, s := range busy {
		if c := after[s]; c.Claimant != nil && *c.Claimant == a.id {
			t.Errorf("busy shard %d still claimed by %s after Drain returned", s, a.id)
		} else if c.Generation <= before[s].Generation {
			t.Errorf("busy shard %d released at generation %d (was %d); want it bumped", s, c.Generation, before[s].Generation)
		}
	}
	took = pgtest.WaitFor(t, 5*time.Second, "b holds every shard", func() string { return balanced([]*manager{b}, 64, 64, 64) })
	t.Logf("b held every shard %s after the drain was cancelled", took)
}

// Stop releases the shards with reservations in flight too, Abandon first.
func TestManagerStopReleasesBusyShards(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	a.setDefaultInflight(1)
	waitCycles(t, a.Manager, 1)
	a.Stop()
	got, free := a.abandoned()
	if len(got) != 64 || len(free) > 0 {
		t.Errorf("Stop called Abandon with %d shards, %v of them no longer held; want all 64, held", len(got), free)
	}
	for s, c := range f.claims() {
		if c.Claimant != nil {
			t.Errorf("shard %d still claimed by %s after Stop; want every shard released", s, *c.Claimant)
		}
	}
}

// A manager draining its surplus serves those shards again when the target rises before
// they are released, and says so (OnAcquired), so that waiting consumers look again.
func TestManagerSurplusDrainCancelled(t *testing.T) {
	t.Parallel()
	slow := fast
	slow.Drain = time.Minute // the surplus stays draining while reservations are in flight
	f := setup(t, slow)
	a := f.start("a")
	a.setDefaultInflight(1)
	pgtest.WaitFor(t, 10*time.Second, "a holds 64 shards", func() string { return balanced([]*manager{a}, 64, 64, 64) })

	b := f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "a drains its surplus", func() string {
		if n := len(a.shards()); n != 32 {
			return fmt.Sprintf("a serves %d shards; want 32", n)
		}
		return ""
	})
	if n := len(b.shards()); n != 0 {
		t.Fatalf("b holds %d shards while a's surplus has reservations in flight; want 0", n)
	}
	stopped := time.Now()
	b.Stop() // the target of a is 64 again
	took := pgtest.WaitFor(t, 10*time.Second, "a serves its draining shards again", func() string {
		if n := len(a.shards()); n != 64 {
			return fmt.Sprintf("a serves %d shards; want 64", n)
		}
		return ""
	})
	if n := len(a.acquiredSince(stopped)); n != 32 {
		t.Errorf("OnAcquired reported %d shards served again; want the 32 that were draining", n)
	}
	t.Logf("a served its 32 draining shards again %s after b stopped", took)
}
