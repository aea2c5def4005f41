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

func TestManagerSplitsShardsAndRebalances(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	ms := []*manager{f.start("a"), f.start("b"), f.start("c")}
	took := pgtest.WaitFor(t, 10*time.Second, "3 managers split 64 shards 20 to 22 each", func() string { return balanced(ms, 64, 20, 22) })
	t.Logf("3 managers balanced %s after the third started", took)
	for _, m := range ms {
		if err := m.Running(); err != nil {
			t.Errorf("%s: Running() = %v; want nil", m.id, err)
		}
	}

	s := startSampler(ms...)
	d := f.start("d")
	s.add(d)
	ms = append(ms, d)
	took = pgtest.WaitFor(t, 10*time.Second, "4 managers hold 16±1 shards each", func() string { return balanced(ms, 64, 15, 17) })
	t.Logf("a fourth manager joined: balanced at 16±1 after %s (renew interval %s)", took, fast.Renew)
	took = pgtest.WaitFor(t, 10*time.Second, "4 managers hold 16 shards each", func() string { return balanced(ms, 64, 16, 16) })
	t.Logf("exactly 16 each after %s", took)

	// Graceful stop of one: the others take its shards.
	stopped := time.Now()
	ms[0].Stop()
	rest := ms[1:]
	took = pgtest.WaitFor(t, 10*time.Second, "3 managers hold 20 to 22 shards after one stopped", func() string { return balanced(rest, 64, 20, 22) })
	t.Logf("a manager stopped gracefully: its shards moved in %s", took)
	s.finish(t)
	if lost, _ := ms[0].lostSince(stopped); len(lost) != 16 {
		t.Errorf("the stopped manager reported %d shards lost at Stop; want its 16", len(lost))
	}
	if err := ms[0].Running(); err == nil {
		t.Errorf("Running() of a stopped manager = nil; want an error")
	}

	// The database agrees with the managers' views.
	owners := map[string]int{}
	for _, c := range f.claims() {
		if c.Claimant == nil {
			t.Errorf("shard %d unclaimed; want every shard claimed", c.Shard)
			continue
		}
		owners[*c.Claimant]++
	}
	for _, m := range rest {
		if got := owners[m.id]; got != len(m.shards()) {
			t.Errorf("%s holds %d shards in opsq.shard_claims and %d by Reservable", m.id, got, len(m.shards()))
		}
	}
}

// A manager killed without releasing anything: shards with nothing in flight move after
// the soft expiry, shards with reservations in flight only after the hard expiry.
func TestManagerAbandonedShardsExpire(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	ms := []*manager{f.start("a"), f.start("b"), f.start("c")}
	pgtest.WaitFor(t, 10*time.Second, "3 managers split 64 shards", func() string { return balanced(ms, 64, 20, 22) })

	dead := ms[0]
	for _, s := range dead.shards() {
		dead.setInflight(s, s%2) // odd shards busy, even ones idle
	}
	waitCycles(t, dead.Manager, 2) // the counts are written
	dead.abandon()
	killed := f.claims()
	var idle, busy []int
	for s, c := range killed {
		if c.Claimant != nil && *c.Claimant == dead.id {
			if s%2 == 0 {
				idle = append(idle, s)
			} else {
				busy = append(busy, s)
			}
		}
	}
	if len(idle) == 0 || len(busy) == 0 {
		t.Fatalf("the killed manager held %d idle and %d busy shards; want some of each", len(idle), len(busy))
	}
	start := time.Now()
	took := pgtest.WaitFor(t, 10*time.Second, "the idle shards of a killed manager move", func() string {
		claims := f.claims()
		for _, s := range idle {
			if c := claims[s]; c.Claimant == nil || *c.Claimant == dead.id {
				return fmt.Sprintf("shard %d still held by the killed manager", s)
			}
		}
		return ""
	})
	t.Logf("idle shards of a killed manager moved after %s (soft expiry %s, heartbeat timeout %s)", took, fast.Soft, fast.Heartbeat)
	took = pgtest.WaitFor(t, 10*time.Second, "every shard of a killed manager moves", func() string { return balanced(ms[1:], 64, 32, 32) })
	t.Logf("busy shards of a killed manager moved after %s (hard expiry %s)", time.Since(start), fast.Hard)
	_ = took

	after := f.claims()
	for _, s := range idle {
		before, now := killed[s], after[s]
		if now.AcquiredAt.Before(*before.SoftExpiresAt) {
			t.Errorf("idle shard %d taken at %s, before its soft expiry %s", s, now.AcquiredAt, before.SoftExpiresAt)
		}
		if !now.AcquiredAt.Before(*before.HardExpiresAt) {
			t.Errorf("idle shard %d taken at %s, not before its hard expiry %s; want it taken after the soft expiry", s, now.AcquiredAt, before.HardExpiresAt)
		}
	}
	for _, s := range busy {
		before, now := killed[s], after[s]
		if now.AcquiredAt.Before(*before.HardExpiresAt) {
			t.Errorf("busy shard %d taken at %s, before its hard expiry %s", s, now.AcquiredAt, before.HardExpiresAt)
		}
		if now.Generation <= before.Generation {
			t.Errorf("shard %d changed owner without a new generation: %d, then %d", s, before.Generation, now.Generation)
		}
	}
}

// A paused manager (SIGSTOP) with reservations in flight keeps its shards until the hard
// expiry; it stops serving them at its soft deadline, and sees the loss when it resumes.
func TestManagerPausedPastExpiry(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	ms := []*manager{a, b}
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced(ms, 64, 32, 32) })
	a.setDefaultInflight(1)
	waitCycles(t, a.Manager, 2)

	a.pause()
	paused := time.Now()
	held := a.Reservable()
	before := f.claims()
	took := pgtest.WaitFor(t, 5*time.Second, "a paused manager stops serving at its soft deadline", func() string {
		if n := len(a.Reservable()); n > 0 {
			return fmt.Sprintf("%d shards still reservable", n)
		}
		return ""
	})
	t.Logf("paused manager: Reservable() empty %s after the pause (soft expiry %s)", took, fast.Soft)
	if took < fast.Soft-2*fast.Renew {
		t.Errorf("Reservable() emptied %s after the pause; want no earlier than the soft expiry %s after the last renewal", took, fast.Soft)
	}
	if err := a.Running(); err == nil {
		t.Errorf("Running() of a paused manager past its soft expiry = nil; want an error")
	}
	if _, ok := a.Lease(held[0].Shard); ok {
		t.Errorf("Lease(%d) of a paused manager past its deadline = true; want false", held[0].Shard)
	}

	pgtest.WaitFor(t, 10*time.Second, "b takes the paused manager's shards", func() string {
		if n := len(b.shards()); n != 64 {
			return fmt.Sprintf("b holds %d shards", n)
		}
		return ""
	})
	t.Logf("b took the paused manager's shards %s after the pause (hard expiry %s)", time.Since(paused), fast.Hard)
	after := f.claims()
	for _, l := range held {
		if at, hard := after[l.Shard].AcquiredAt, before[l.Shard].HardExpiresAt; at.Before(*hard) {
			t.Errorf("shard %d with reservations in flight taken at %s, before its hard expiry %s", l.Shard, at, hard)
		}
	}

	resumed := time.Now()
	a.resume()
	pgtest.WaitFor(t, 5*time.Second, "the resumed manager sees its shards lost", func() string {
		lost, _ := a.lostSince(resumed)
		if len(lost) < len(held) {
			return fmt.Sprintf("%d of %d shards reported lost", len(lost), len(held))
		}
		return ""
	})
	for _, l := range held {
		if now, ok := a.Lease(l.Shard); ok && now.Generation <= l.Generation {
			t.Errorf("after resuming, Lease(%d) = generation %d; want the shard lost (held under %d before)", l.Shard, now.Generation, l.Generation)
		}
	}
	took = pgtest.WaitFor(t, 10*time.Second, "2 managers rebalance after the resume", func() string { return balanced(ms, 64, 32, 32) })
	t.Logf("rebalanced %s after the resume", took)
}

func TestManagerDrain(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })
	busy := a.shards()[:3]
	for _, s := range busy {
		a.setInflight(s, 2)
	}
	waitCycles(t, a.Manager, 1)

	drained := make(chan error, 1)
	go func() { drained <- a.Drain(context.Background()) }()
	pgtest.WaitFor(t, time.Second, "Drain stops reserving at once", func() string {
		if n := len(a.Reservable()); n > 0 {
			return fmt.Sprintf("%d shards reservable", n)
		}
		return ""
	})
	took := pgtest.WaitFor(t, 5*time.Second, "the idle shards of a draining manager move", func() string {
		if n := len(b.shards()); n != 61 {
			return fmt.Sprintf("b holds %d shards; want 61", n)
		}
		return ""
	})
	t.Logf("Drain: idle shards released and taken in %s", took)
	for _, s := range busy {
		if l, ok := a.Lease(s); !ok || !l.Draining {
			t.Errorf("Lease(%d) of a draining manager = %+v, %v; want held and draining while reservations are in flight", s, l, ok)
		}
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with shards in flight", err)
	default:
	}

	for _, s := range busy {
		a.setInflight(s, 0)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain() = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the last reservations ended")
	}
	pgtest.WaitFor(t, 5*time.Second, "b holds every shard", func() string { return balanced([]*manager{b}, 64, 64, 64) })
	var draining bool
	if err := f.pool.QueryRow(t.Context(), "SELECT draining FROM opsq.instances WHERE id = $1", a.id).Scan(&draining); err != nil || !draining {
		t.Errorf("opsq.instances.draining of a drained instance = %v, %v; want true", draining, err)
	}

	// A Drain bounded by a context returns its error while shards are in flight.
	c := f.start("c")
	pgtest.WaitFor(t, 10*time.Second, "b and c split 64 shards", func() string { return balanced([]*manager{b, c}, 64, 32, 32) })
	c.setDefaultInflight(1)
	waitCycles(t, c.Manager, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := c.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain with reservations in flight = %v; want context.DeadlineExceeded", err)
	}
}

// Drained shards are released after drain_timeout even with reservations in flight.
func TestManagerDrainTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	a.setDefaultInflight(1)
	waitCycles(t, a.Manager, 1)
	start := time.Now()
	if err := a.Drain(t.Context()); err != nil {
		t.Fatalf("Drain() = %v; want nil after the drain timeout", err)
	}
	took := time.Since(start)
	t.Logf("Drain with reservations in flight returned after %s (drain_timeout %s)", took, fast.Drain)
	if took < fast.Drain {
		t.Errorf("Drain returned after %s; want no earlier than drain_timeout %s", took, fast.Drain)
	}
}

func TestManagerDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	ctl := f.control()
	a := f.start("a")
	if n := len(a.Reservable()); n != 64 {
		t.Fatalf("a single manager holds %d shards after Start; want 64", n)
	}

	cut := time.Now()
	ctl.cut()
	if n := len(a.Reservable()); n != 64 {
		t.Errorf("right after the database went away, %d shards reservable; want 64 until the soft deadline", n)
	}
	took := pgtest.WaitFor(t, 5*time.Second, "shards stop being reservable", func() string {
		if n := len(a.Reservable()); n > 0 {
			return fmt.Sprintf("%d shards reservable", n)
		}
		return ""
	})
	t.Logf("database unreachable: Reservable() emptied %s after the cut (soft expiry %s)", took, fast.Soft)
	if took < fast.Soft-2*fast.Renew {
		t.Errorf("Reservable() emptied %s after the cut; want about the soft expiry %s", took, fast.Soft)
	}
	if err := a.Running(); err == nil {
		t.Error("Running() = nil with the database unreachable past the soft expiry; want an error")
	}

	ctl.restore()
	took = pgtest.WaitFor(t, 10*time.Second, "shards reservable again after the database came back", func() string {
		if n := len(a.Reservable()); n != 64 {
			return fmt.Sprintf("%d shards reservable", n)
		}
		if err := a.Running(); err != nil {
			return err.Error()
		}
		return ""
	})
	t.Logf("database back: shards reservable again after %s (total outage %s)", took, time.Since(cut))
	if lost, _ := a.lostSince(cut); len(lost) > 0 {
		t.Errorf("shards %v reported lost; want none: nobody else took them", lost)
	}
}

func TestManagerStartStop(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	m := f.newManager("a")
	m.Stop() // before Start
	if err := m.Start(t.Context()); err == nil {
		t.Error("Start after Stop = nil; want an error")
	}
	if err := m.Drain(t.Context()); !errors.Is(err, errNotRunning) {
		t.Errorf("Drain of a stopped manager = %v; want errNotRunning", err)
	}

	m = f.newManager("b")
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("second Start = nil; want an error")
	}
	m.mu.Lock()
	node := m.mu.node
	m.mu.Unlock()
	if got := m.Settings(); got.RenewInterval != fast.Renew || got.SoftExpiry != fast.Soft {
		t.Errorf("Settings() = %+v; want the test's timings", got)
	}
	m.Stop()
	m.Stop()
	var n int
	if err := f.pool.QueryRow(t.Context(), "SELECT count(*) FROM opsq.instances WHERE node_id = $1", node).Scan(&n); err != nil || n != 0 {
		t.Errorf("instances with the stopped manager's node id: %d, %v; want 0 (deregistered)", n, err)
	}
	for s, c := range f.claims() {
		if c.Claimant != nil {
			t.Errorf("shard %d still claimed by %s after Stop", s, *c.Claimant)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no pool":     {Instance: Instance{ID: "x"}},
		"no instance": {Pool: nil},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New() = nil error; want one", name)
		}
	}
}

func TestTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		enabled, live int
		draining      bool
		want          int
	}{
		{64, 1, false, 64},
		{64, 3, false, 22},
		{64, 4, false, 16},
		{64, 5, false, 13},
		{63, 2, false, 32},
		{64, 0, false, 64},
		{64, 3, true, 0},
		{0, 3, false, 0},
	} {
		t.Run(fmt.Sprintf("%d/%d/%v", tc.enabled, tc.live, tc.draining), func(t *testing.T) {
			if got := target(tc.enabled, tc.live, tc.draining); got != tc.want {
				t.Errorf("target(%d, %d, %v) = %d; want %d", tc.enabled, tc.live, tc.draining, got, tc.want)
			}
		})
	}
}

func TestChooseSurplus(t *testing.T) {
	t.Parallel()
	hs := []heldShard{{shard: 1, inflight: 5}, {shard: 2, inflight: 0}, {shard: 3, inflight: 2}, {shard: 4, inflight: 0}}
	if got, want := chooseSurplus(hs, 3, noHome), []int{2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("chooseSurplus = %v; want %v (least in flight)", got, want)
	}
	if got, want := chooseReactivate(hs, 2), []int{1, 3}; !slices.Equal(got, want) {
		t.Errorf("chooseReactivate = %v; want %v (most in flight)", got, want)
	}
	if got := chooseSurplus(hs, 9, noHome); len(got) != 4 {
		t.Errorf("chooseSurplus(9 of 4) = %v; want all 4", got)
	}
}

func TestSettingsCheckClaims(t *testing.T) {
	t.Parallel()
	ok := Settings{RenewInterval: time.Second, SoftExpiry: 10 * time.Second, HardExpiry: time.Minute, HeartbeatTimeout: 10 * time.Second}
	if err := ok.checkClaims(); err != nil {
		t.Errorf("checkClaims(defaults) = %v; want nil", err)
	}
	for name, mod := range map[string]func(*Settings){
		"renew >= soft":      func(s *Settings) { s.RenewInterval = 10 * time.Second },
		"soft > hard":        func(s *Settings) { s.SoftExpiry = 2 * time.Minute },
		"renew >= heartbeat": func(s *Settings) { s.HeartbeatTimeout = time.Second },
	} {
		s := ok
		mod(&s)
		if err := s.checkClaims(); err == nil {
			t.Errorf("%s: checkClaims() = nil; want an error", name)
		}
	}
}

func noHome(int) bool { return false }
