package claims

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	opsqsql "opsq/sql"
)

// heldShard is a held shard as seen at the start of a step of a cycle.
type heldShard struct {
	shard      int
	generation int64
	draining   bool
	inflight   int
	available  bool
}

func heldShards(hs []heldShard) []int {
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = h.shard
	}
	slices.Sort(out)
	return out
}

// snapshotLocked lists the held shards, ordered by shard. m.mu is held.
func (m *Manager) snapshotLocked() []heldShard {
	out := make([]heldShard, 0, len(m.mu.leases))
	for shard, l := range m.mu.leases {
		out = append(out, heldShard{shard: shard, generation: l.generation, draining: l.draining, inflight: l.inflight})
	}
	slices.SortFunc(out, func(a, b heldShard) int { return a.shard - b.shard })
	return out
}

// cycle is one round of the protocol: re-read the settings, heartbeat, renew the held
// shards (those missed are lost), balance (mark the surplus draining, release what has
// drained, take free or expired shards up to the target). Nothing is dropped locally when
// the database cannot be reached: the local deadlines take care of that.
//
// A failed cycle counts in the stats: as a cycle failure always, and as a renewal failure
// when it failed before its renewal succeeded — the heartbeat fails first when the
// database is unreachable, and the held shards are not renewed then either.
func (m *Manager) cycle(ctx context.Context) (err error) {
	m.cycleMu.Lock()
	defer m.cycleMu.Unlock()
	began := time.Now()
	renewedOK := false
	defer func() {
		if err != nil {
			m.stats.cycleFailures.Add(1)
			if !renewedOK {
				m.stats.renewFailures.Add(1)
			}
		}
		m.endCycle(began, err)
	}()

	settings := m.Settings()
	loaded, settingsErr := m.loadSettings(ctx)
	if settingsErr == nil {
		settings = loaded
		m.setSettings(settings)
	}

	draining, err := m.heartbeat(ctx)
	if err != nil {
		return err
	}
	if settingsErr != nil {
		// The database answers, so the settings themselves are wrong: keep the last good ones.
		m.log.ErrorContext(ctx, "ignoring opsq.settings, keeping the values last read", slog.Any("error", settingsErr))
	}

	m.mu.Lock()
	drainAll := m.mu.drainAll
	m.mu.opDraining = draining
	held := m.snapshotLocked()
	m.mu.Unlock()
	if drainAll && !draining {
		if err := opsqsql.New(m.pool).ClaimsDrainInstance(ctx, opsqsql.ClaimsInstanceParams{Instance: m.cfg.Instance.ID}); err != nil {
			return fmt.Errorf("marking instance draining: %w", err)
		}
	}

	// Renew, and read what balancing needs, in one serializable transaction. The counts are
	// reported, written and applied under publishMu, so that a Publish between the report
	// and the write cannot be overwritten with the stale count.
	m.lockRenewal()
	for i := range held {
		held[i].inflight, held[i].available = m.cfg.Report(held[i].shard)
	}
	renewStart := time.Now()
	var renewed []int
	var balance opsqsql.ClaimsBalanceRow
	err = retrySerializable(ctx, m.pool, func(q opsqsql.Queries) error {
		db := q
		renewed = nil
		if len(held) > 0 {
			var err error
			if renewed, err = db.ClaimsRenew(ctx, renewParams(m.cfg.Instance.ID, held, settings)); err != nil {
				return err
			}
			if err := db.ClaimsReleaseDisabled(ctx, opsqsql.ClaimsInstanceParams{Instance: m.cfg.Instance.ID}); err != nil {
				return err
			}
		}
		var err error
		balance, err = db.ClaimsBalance(ctx, opsqsql.ClaimsBalanceParams{HeartbeatTimeout: settings.HeartbeatTimeout})
		return err
	})
	if err != nil {
		m.unlockRenewal()
		return fmt.Errorf("renewing %d shards: %w", len(held), err)
	}
	renewedOK = true
	m.stats.renewed(renewStart, time.Since(renewStart))
	lost := m.applyRenewal(held, renewed, renewStart.Add(settings.SoftExpiry))
	m.unlockRenewal()
	if len(lost) > 0 {
		m.stats.lost.Add(int64(len(lost)))
		m.log.WarnContext(ctx, "shards lost: taken by another instance or an operator", slog.Any("shards", lost))
		m.notifyLost(lost)
	}

	// Balance: on Citus with a home, against the placements as they are now (home.go).
	m.refreshHome(ctx, settings, balance.LiveInstances)
	goal := m.homeTarget(target(balance.EnabledShards, balance.LiveInstances, draining || drainAll))
	release, back, want := m.plan(goal, renewStart, settings)
	if len(back) > 0 && m.cfg.OnAcquired != nil {
		m.cfg.OnAcquired(back) // reservable again: waiting consumers may take their chunks
	}
	// A draining shard is released with reservations on it only after drain_timeout: its
	// count, reported at least half a renew interval after it stopped being reservable,
	// was not 0.
	if _, err := m.giveUp(ctx, release, func(h heldShard) bool { return h.inflight > 0 }); err != nil {
		return fmt.Errorf("releasing drained shards: %w", err)
	}
	if want > 0 || (goal > 0 && m.adoptable() > 0) {
		if err := m.acquire(ctx, want, settings); err != nil {
			return fmt.Errorf("acquiring up to %d shards: %w", want, err)
		}
	}
	return nil
}

// endCycle records the outcome of a cycle and wakes Drain.
func (m *Manager) endCycle(began time.Time, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		if m.mu.failures > 0 {
			m.log.Info("claims cycle succeeded again", slog.Int("failed_cycles", m.mu.failures))
		}
		m.mu.lastOK, m.mu.failures = began, 0
	}
	close(m.mu.cycled)
	m.mu.cycled = make(chan struct{})
}

// heartbeat marks the instance alive and reports whether it is drained, registering it
// again when it was forgotten.
func (m *Manager) heartbeat(ctx context.Context) (draining bool, err error) {
	m.mu.Lock()
	node := m.mu.node
	m.mu.Unlock()
	started := time.Now()
	draining, err = Heartbeat(ctx, m.pool, m.cfg.Instance.ID, node)
	switch {
	case errors.Is(err, ErrForgotten):
		m.log.WarnContext(ctx, "instance was forgotten by the cluster; registering again", slog.String("instance", m.cfg.Instance.ID))
		return false, m.register(ctx)
	case err != nil:
		return false, err
	}
	if m.cfg.OnNode != nil {
		m.cfg.OnNode(node, started.Add(NodeReuseAfter/2))
	}
	return draining, nil
}

func renewParams(instance string, held []heldShard, s Settings) opsqsql.ClaimsRenewParams {
	n := len(held)
	shards, generations, inflight := make([]int32, n), make([]int64, n), make([]int32, n)
	available, draining := make([]bool, n), make([]bool, n)
	for i, h := range held {
		shards[i], generations[i], inflight[i] = int32(h.shard), h.generation, int32(h.inflight)
		available[i], draining[i] = h.available, h.draining
	}
	return opsqsql.ClaimsRenewParams{
		Instance: instance, SoftExpiry: s.SoftExpiry, HardExpiry: s.HardExpiry,
		Shards: shards, Generations: generations, Inflight: inflight,
		Available: available, Draining: draining,
	}
}

// applyRenewal moves the deadlines of the renewed shards and forgets the others, which are
// returned: lost.
func (m *Manager) applyRenewal(held []heldShard, renewed []int, deadline time.Time) (lost []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range held {
		l := m.mu.leases[h.shard]
		if l == nil || l.generation != h.generation {
			continue
		}
		if slices.Contains(renewed, h.shard) {
			l.deadline, l.inflight = deadline, h.inflight
			continue
		}
		delete(m.mu.leases, h.shard)
		lost = append(lost, h.shard)
	}
	slices.Sort(lost)
	return lost
}

// plan applies the target: it marks the surplus draining, or takes draining shards back
// (back) when below target, and returns the draining shards to release now and how many
// shards to acquire. A shard is released once a Report taken at least half a renew
// interval after it stopped being reservable said 0 — so that a reservation begun just
// before is counted — or once it has drained for drain_timeout (its reservations left are
// then abandoned: Config.Abandon).
func (m *Manager) plan(target int, reportedAt time.Time, s Settings) (release []heldShard, back []int, want int) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var active, draining []heldShard
	for _, h := range m.snapshotLocked() {
		_, shunned := m.mu.home.shunned[h.shard]
		switch {
		case h.draining && shunned: // left the home node: never served again here
		case h.draining:
			draining = append(draining, h)
		default:
			active = append(active, h)
		}
	}
	switch {
	case len(active) > target:
		surplus := chooseSurplus(active, len(active)-target, m.mu.home.isHome)
		for _, shard := range surplus {
			l := m.mu.leases[shard]
			l.draining, l.drainingSince = true, now
		}
		m.log.Info("draining surplus shards", slog.Int("target", target), slog.Any("shards", surplus))
	case len(active) < target && len(draining) > 0:
		back = chooseReactivate(draining, target-len(active))
		for _, shard := range back {
			m.mu.leases[shard].draining = false
		}
		m.log.Info("serving draining shards again", slog.Int("target", target), slog.Any("shards", back))
		want = target - len(active) - len(back)
	case len(active) < target:
		want = target - len(active)
	}
	for shard, l := range m.mu.leases {
		if !l.draining {
			continue
		}
		settled := reportedAt.Sub(l.drainingSince) >= s.RenewInterval/2
		if (settled && l.inflight == 0) || now.Sub(l.drainingSince) >= s.DrainTimeout {
			release = append(release, heldShard{shard: shard, generation: l.generation, draining: true, inflight: l.inflight})
		}
	}
	return release, back, want
}

// release gives shards back, fenced by generation, and returns those released; the others
// were no longer held.
func (m *Manager) release(ctx context.Context, hs []heldShard) ([]int, error) {
	shards, generations := make([]int32, len(hs)), make([]int64, len(hs))
	for i, h := range hs {
		shards[i], generations[i] = int32(h.shard), h.generation
	}
	var released []int
	err := retrySerializable(ctx, m.pool, func(q opsqsql.Queries) error {
		var err error
		released, err = q.ClaimsRelease(ctx, opsqsql.ClaimsReleaseParams{
			Instance: m.cfg.Instance.ID, Shards: shards, Generations: generations,
		})
		return err
	})
	slices.Sort(released)
	return released, err
}

// forget drops released shards from the local state.
func (m *Manager) forget(hs []heldShard) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hs {
		if l := m.mu.leases[h.shard]; l != nil && l.generation == h.generation {
			delete(m.mu.leases, h.shard)
		}
	}
}

// acquire takes up to want free or expired shards.
func (m *Manager) acquire(ctx context.Context, want int, s Settings) error {
	m.mu.Lock()
	held := make([]int32, 0, len(m.mu.leases))
	for shard := range m.mu.leases {
		held = append(held, int32(shard))
	}
	prefer, avoid, extra := m.mu.home.homeAcquire(s.ShardCount)
	m.mu.Unlock()
	held = append(held, avoid...)
	want += extra
	began := time.Now()
	var got []opsqsql.ClaimsAcquireRow
	err := retrySerializable(ctx, m.pool, func(q opsqsql.Queries) error {
		var err error
		got, err = q.ClaimsAcquire(ctx, opsqsql.ClaimsAcquireParams{
			Instance: m.cfg.Instance.ID, Want: want, Held: held, Prefer: prefer, SoftExpiry: s.SoftExpiry, HardExpiry: s.HardExpiry,
		})
		return err
	})
	if err != nil || len(got) == 0 {
		return err
	}
	shards := make([]int, len(got))
	now := time.Now()
	m.mu.Lock()
	for i, a := range got {
		// Taken by a cycle that began before Drain: never reservable, released by the next.
		m.mu.leases[a.Shard] = &lease{generation: a.Generation, deadline: began.Add(s.SoftExpiry),
			draining: m.mu.drainAll, drainingSince: now}
		shards[i] = a.Shard
	}
	m.mu.home.keepAcquired(shards)
	m.mu.Unlock()
	m.stats.acquired.Add(int64(len(got)))
	slices.Sort(shards)
	m.log.InfoContext(ctx, "acquired shards", slog.Any("shards", shards))
	if m.cfg.OnAcquired != nil {
		m.cfg.OnAcquired(shards)
	}
	return nil
}
