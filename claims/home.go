package claims

import (
	"context"
	"log/slog"
	"slices"
	"time"

	opsqsql "opsq/sql"
)

// homeMap is what an instance homed on a Citus worker (Config.Home) knows of where opsq's
// shards live, read from the coordinator's catalog (sql/claims_placements.sql) at every
// claim round. Without a home it stays empty and every rule below is a no-op.
//
//   - With no more live instances than nodes holding placements, the instance's target is
//     the shards on its home node plus the kept ones: shards of no home that it took after
//     seeing them free at two rounds in a row (nobody homed where they live wanted them),
//     which is how every shard stays served when a node has no instance. The kept are
//     forgotten, and so offered again, when the number of live instances changes.
//   - With more live instances than nodes, the fair target of everyone else (DESIGN.md §4)
//     holds, and the home only orders the choices.
//   - Home shards are acquired first, and the others drained first when over target.
//   - A shard held that left the home node (citus_move_shard_placement, a rebalance) is
//     drained through the normal hand-over, and not taken again for a hard expiry, so that
//     the instance homed where it went (whose target rose with it) takes it.
type homeMap struct {
	read      bool
	shards    map[int]bool // the shards on the home node
	nodes     int          // the nodes holding placements
	live      int          // the live instances at the last round
	wasFree   map[int]bool // free at the previous read
	adoptable []int        // free at the last two reads, of no home, not shunned
	kept      map[int]bool
	shunned   map[int]time.Time
}

// isHome reports whether shard's chunks are on the home node. m.mu is held.
func (h *homeMap) isHome(shard int) bool { return h.shards[shard] }

// local reports whether the home sets the target: there are no more live instances than
// nodes. m.mu is held.
func (h *homeMap) local() bool { return h.read && h.live <= h.nodes }

// refreshHome reads the placements, and marks draining the active shards held that left the
// home node since the last read. It logs and keeps the last map when the read fails: a
// catalog read never fails a claim round.
func (m *Manager) refreshHome(ctx context.Context, s Settings, live int) {
	if m.cfg.Home == "" {
		return
	}
	rows, err := opsqsql.New(m.pool).ClaimsPlacements(ctx)
	if err != nil {
		m.log.WarnContext(ctx, "reading the shards' placements on Citus; keeping the last read", slog.Any("error", err))
		return
	}
	home, nodes, free := map[int]bool{}, map[string]bool{}, map[int]bool{}
	for _, r := range rows {
		nodes[r.Node] = true
		if r.Node == m.cfg.Home {
			home[r.Shard] = true
		}
		if r.Free {
			free[r.Shard] = true
		}
	}
	if len(rows) > 0 && !nodes[m.cfg.Home] {
		m.log.WarnContext(ctx, "OPSQ_CITUS_HOME names no node holding opsq's chunks", slog.String("home", m.cfg.Home))
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &m.mu.home
	var left []int
	if h.read {
		for shard, l := range m.mu.leases {
			if h.shards[shard] && !home[shard] {
				h.shunned[shard] = now.Add(s.HardExpiry)
				if !l.draining {
					l.draining, l.drainingSince = true, now
					left = append(left, shard)
				}
			}
		}
	}
	for shard, until := range h.shunned {
		if now.After(until) || home[shard] {
			delete(h.shunned, shard)
		}
	}
	if live != h.live || h.kept == nil {
		h.kept = map[int]bool{}
	}
	for shard := range h.kept {
		if m.mu.leases[shard] == nil || home[shard] {
			delete(h.kept, shard)
		}
	}
	h.adoptable = h.adoptable[:0]
	for shard := range free {
		if _, shunned := h.shunned[shard]; h.wasFree[shard] && !home[shard] && !shunned {
			h.adoptable = append(h.adoptable, shard)
		}
	}
	slices.Sort(h.adoptable)
	h.read, h.shards, h.nodes, h.live, h.wasFree = true, home, len(nodes), live, free
	if len(left) > 0 {
		slices.Sort(left)
		m.log.InfoContext(ctx, "shards left the home node: handing them over", slog.String("home", m.cfg.Home), slog.Any("shards", left))
	}
}

// homeTarget is the target of an instance with a home (see homeMap); fair otherwise, and
// 0 stays 0 (draining). m.mu is not held.
func (m *Manager) homeTarget(fair int) int {
	if m.cfg.Home == "" || fair == 0 {
		return fair
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := &m.mu.home; h.local() {
		return len(h.shards) + len(h.kept)
	}
	return fair
}

// homeAcquire returns, for an acquisition, the shards to take first (the home's), the
// shards not to take (the shunned; and while local, every shard of no home that is not
// adoptable) and how many adoptable shards to add to the shards wanted. m.mu is held.
func (h *homeMap) homeAcquire(shardCount int) (prefer, avoid []int32, extra int) {
	if !h.read {
		return nil, nil, 0
	}
	for shard := range shardCount {
		if h.shards[shard] {
			prefer = append(prefer, int32(shard))
		}
	}
	for shard := range h.shunned {
		avoid = append(avoid, int32(shard))
	}
	if !h.local() {
		return prefer, avoid, 0
	}
	for shard := range shardCount {
		_, shunned := h.shunned[shard]
		if !h.shards[shard] && !shunned && !slices.Contains(h.adoptable, shard) {
			avoid = append(avoid, int32(shard))
		}
	}
	return prefer, avoid, len(h.adoptable)
}

// keepAcquired records the shards of no home acquired while local as kept. m.mu is held.
func (h *homeMap) keepAcquired(shards []int) {
	if !h.local() {
		return
	}
	for _, shard := range shards {
		if !h.shards[shard] {
			h.kept[shard] = true
		}
	}
}

// adoptable is how many shards an instance with a home may adopt now.
func (m *Manager) adoptable() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.home.local() {
		return 0
	}
	return len(m.mu.home.adoptable)
}
