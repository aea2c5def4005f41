package claims

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// inflightOf reads shard's published in-flight count.
func (f *fixture) inflightOf(shard int) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT inflight FROM opsq.shard_claims WHERE shard = $1", shard).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestPublishFenced: Publish writes a non-zero count for a shard held under the generation
// given, and nothing (ErrShardLost) under another generation, locally or in the database.
func TestPublishFenced(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	pgtest.WaitFor(t, 10*time.Second, "a holds the 64 shards", func() string {
		if n := len(a.shards()); n != 64 {
			return fmt.Sprintf("a holds %d shards", n)
		}
		return ""
	})
	waitCycles(t, a.Manager, 2)
	leases := a.Reservable()
	s, s2 := leases[0], leases[1]
	if n := f.inflightOf(s.Shard); n != 0 {
		t.Fatalf("shard %d: inflight %d before any reservation; want 0", s.Shard, n)
	}

	// A wrong generation: nothing written, and said so.
	err := a.Publish(t.Context(), s.Shard, s.Generation+1)
	if !errors.Is(err, ErrShardLost) {
		t.Errorf("Publish(shard %d, a wrong generation) = %v; want ErrShardLost", s.Shard, err)
	}
	if n := f.inflightOf(s.Shard); n != 0 {
		t.Errorf("shard %d: inflight %d after a Publish under a wrong generation; want 0", s.Shard, n)
	}

	// The right one: the count the Report gives, at least 1.
	a.setInflight(s.Shard, 3)
	if err := a.Publish(t.Context(), s.Shard, s.Generation); err != nil {
		t.Fatalf("Publish(shard %d, generation %d) = %v; want nil", s.Shard, s.Generation, err)
	}
	if n := f.inflightOf(s.Shard); n != 3 {
		t.Errorf("shard %d: inflight %d after Publish; want 3", s.Shard, n)
	}

	// Taken in the database (an operator's force-release) while the manager does not know
	// yet: the fenced write touches nothing, and the shard stops being reservable.
	a.pause()
	defer a.resume()
	f.exec("UPDATE opsq.shard_claims SET claimant = NULL, generation = generation + 1 WHERE shard = $1", s2.Shard)
	a.setInflight(s2.Shard, 1)
	err = a.Publish(t.Context(), s2.Shard, s2.Generation)
	if !errors.Is(err, ErrShardLost) {
		t.Errorf("Publish(shard %d) after a force-release = %v; want ErrShardLost", s2.Shard, err)
	}
	if n := f.inflightOf(s2.Shard); n != 0 {
		t.Errorf("shard %d: inflight %d after a Publish on a shard not held; want 0", s2.Shard, n)
	}
	if _, ok := a.Lease(s2.Shard); ok {
		t.Errorf("Lease(%d) after a Publish found it lost = true; want false", s2.Shard)
	}
}

// TestPublishStopsSoftTakeover: a reservation made right after a renewal that published 0,
// then a pause past the soft expiry: the published count keeps the shard from the other
// manager until the hard expiry, while it takes the shards with nothing in flight.
func TestPublishStopsSoftTakeover(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	pgtest.WaitFor(t, 10*time.Second, "a holds the 64 shards", func() string {
		if n := len(a.shards()); n != 64 {
			return fmt.Sprintf("a holds %d shards", n)
		}
		return ""
	})
	waitCycles(t, a.Manager, 2)
	s := a.Reservable()[5]

	// The renewal published 0; a reservation now, and the pause before the next renewal.
	a.pause()
	if n := f.inflightOf(s.Shard); n != 0 {
		t.Fatalf("shard %d: inflight %d; want 0 before the reservation", s.Shard, n)
	}
	a.setInflight(s.Shard, 1)
	if err := a.Publish(t.Context(), s.Shard, s.Generation); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	defer a.resume()

	b := f.start("b")
	pgtest.WaitFor(t, 15*time.Second, "b takes the 63 shards with nothing in flight", func() string {
		if n := len(b.shards()); n < 63 {
			return fmt.Sprintf("b holds %d shards", n)
		}
		return ""
	})
	waitCycles(t, b.Manager, 3) // b has had more chances to take s
	var claimant string
	var beforeHard bool
	if err := f.pool.QueryRow(t.Context(), `SELECT coalesce(claimant, ''), now() < hard_expires_at
		FROM opsq.shard_claims WHERE shard = $1`, s.Shard).Scan(&claimant, &beforeHard); err != nil {
		t.Fatal(err)
	}
	if claimant != a.id && beforeHard {
		t.Errorf("shard %d with a reservation in flight was taken by %q before its hard expiry; want it kept by %s", s.Shard, claimant, a.id)
	}
	if !beforeHard {
		t.Logf("the check ran past shard %d's hard expiry (a slow machine): it proves nothing this time", s.Shard)
	}
}

// TestPublishNotOverwrittenByRenewal: a renewal that reported 0 before a Publish must not
// write that stale 0 over the published count.
func TestPublishNotOverwrittenByRenewal(t *testing.T) {
	t.Parallel()
	// A renew interval long enough that no second renewal runs while the test looks.
	f := setup(t, timings{Renew: time.Second, Soft: 4 * time.Second, Hard: 8 * time.Second, Heartbeat: 4 * time.Second, Drain: 2 * time.Second})
	var mu sync.Mutex
	counts := map[int]int{}
	block := -1                      // the shard whose next Report blocks
	reporting := make(chan struct{}) // closed when that Report has read its count
	release := make(chan struct{})   // closed to let it return
	report := func(shard int) (int, bool) {
		mu.Lock()
		n, blocked := counts[shard], shard == block
		if blocked {
			block = -1
		}
		mu.Unlock()
		if blocked {
			close(reporting)
			<-release
		}
		return n, n > 0
	}
	m, err := New(Config{
		Pool: f.pool, Instance: Instance{ID: "race", AdvertiseURL: "http://race.invalid", Version: "test"},
		Logger: pgtest.Logger(t, slog.LevelWarn), Report: report,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := m.Reservable()[0]
	waitCycles(t, m, 1) // s renewed with 0
	mu.Lock()
	block = s.Shard
	mu.Unlock()
	select {
	case <-reporting:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal reported shard's count within 10s")
	}
	// The renewal read 0; now a reservation is counted and published.
	m.mu.Lock()
	cycled := m.mu.cycled // closed when this cycle ends
	m.mu.Unlock()
	mu.Lock()
	counts[s.Shard] = 1
	mu.Unlock()
	published := make(chan error, 1)
	go func() { published <- m.Publish(context.Background(), s.Shard, s.Generation) }()
	var pubErr error
	returned := false
	select {
	case pubErr = <-published:
		returned = true
		t.Errorf("Publish returned (%v) while a renewal was between its report and its write; want it to wait", pubErr)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case <-cycled:
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal did not end within 10s")
	}
	if !returned {
		pubErr = <-published
	}
	if pubErr != nil {
		t.Fatalf("Publish: %v", pubErr)
	}
	if n := f.inflightOf(s.Shard); n < 1 {
		t.Errorf("shard %d: inflight %d after Publish and the renewal that reported 0 before it; want at least 1", s.Shard, n)
	}
}

// TestPublishRefusalNamesTheShard: Publish under a generation the shard is not held at
// returns a *sql.FenceError naming the shard and that generation.
func TestPublishRefusalNamesTheShard(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	const shard, generation = 5, 1 << 40 // never reached
	err := a.Publish(t.Context(), shard, generation)
	var fenced *opsqsql.FenceError
	if !errors.As(err, &fenced) || fenced.Shard != shard || fenced.Generation != generation {
		t.Fatalf("Publish(shard %d, generation %d) = %v; want a *sql.FenceError naming them", shard, generation, err)
	}
	if !errors.Is(err, ErrShardLost) {
		t.Errorf("errors.Is(%v, ErrShardLost) = false; want true", err)
	}
}
