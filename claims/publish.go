package claims

import (
	"context"
	"fmt"
	"slices"
	"time"

	opsqsql "opsq/sql"
)

// ErrShardLost is returned by Publish when the instance no longer holds the shard under
// the generation given: another owner or an operator took it, or it was disabled. It is
// package sql's: every fenced write refused (a *sql.FenceError, which names the shard and
// the generation, as Publish returns it) is ErrShardLost.
var ErrShardLost = opsqsql.ErrShardLost

// Publish makes sure that opsq.shard_claims shows a non-zero in-flight count for shard
// before a reservation on it is handed out. The count is otherwise published only at
// renewal: a reservation made right after a renewal that published 0, followed by a pause
// of this instance past the soft expiry, would let another instance take the shard (soft
// expiry allows a takeover when inflight = 0) and hand the chunk out again while its lease
// lives. Call it after the reservation is counted by Report and before the chunk is
// handed out; do not hand it out when Publish fails.
//
// It writes nothing when the last published count is already non-zero (the next renewal
// then reports the new reservation). Otherwise it publishes max(Report, 1), fenced by
// generation, in a SERIALIZABLE transaction; it returns ErrShardLost when the shard is not
// held under generation (and the shard stops being reservable until a renewal says
// otherwise). It publishes the other held shards whose count is 0 and that have
// reservations in the same transaction. Safe for concurrent use; it waits for a renewal
// that is in progress.
func (m *Manager) Publish(ctx context.Context, shard int, generation int64) error {
	m.mu.Lock()
	l, ok := m.mu.leases[shard]
	switch {
	case !ok || l.generation != generation:
		m.mu.Unlock()
		return fmt.Errorf("publishing the in-flight count: %w", &opsqsql.FenceError{Shard: shard, Generation: generation})
	case l.inflight > 0 && !m.mu.renewing:
		// No renewal has read the counts since this reservation was counted, so the next
		// one includes it; until then the published count is non-zero.
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()

	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	// Every held shard whose last published count is 0 and that has reservations now is
	// published at once: the first reservations on many shards (a burst of new work) cost
	// one transaction, not one each.
	m.mu.Lock()
	l, ok = m.mu.leases[shard]
	lost, published := !ok || l.generation != generation, ok && l.inflight > 0
	var todo []heldShard
	if !lost && !published {
		for s, l := range m.mu.leases {
			if l.inflight == 0 {
				todo = append(todo, heldShard{shard: s, generation: l.generation})
			}
		}
	}
	m.mu.Unlock()
	if lost {
		return fmt.Errorf("publishing the in-flight count: %w", &opsqsql.FenceError{Shard: shard, Generation: generation})
	}
	if published {
		return nil // a renewal or a Publish that ran meanwhile published a non-zero count
	}
	shards, generations, counts := make([]int32, 0, len(todo)), make([]int64, 0, len(todo)), make([]int32, 0, len(todo))
	for _, h := range todo {
		n, _ := m.cfg.Report(h.shard)
		if h.shard == shard {
			n = max(n, 1)
		}
		if n > 0 {
			shards, generations, counts = append(shards, int32(h.shard)), append(generations, h.generation), append(counts, int32(n))
		}
	}
	var written []int
	err := retrySerializable(ctx, m.pool, func(q opsqsql.Queries) error {
		var err error
		written, err = q.ClaimsPublish(ctx, opsqsql.ClaimsPublishParams{
			Instance: m.cfg.Instance.ID, Shards: shards, Generations: generations, Inflight: counts,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("publishing the in-flight count of shard %d: %w", shard, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range shards {
		l, ok := m.mu.leases[int(s)]
		if !ok || l.generation != generations[i] {
			continue
		}
		if slices.Contains(written, int(s)) {
			l.inflight = max(l.inflight, int(counts[i]))
		} else {
			l.deadline = time.Time{} // not ours: serve nothing from it until a renewal decides
		}
	}
	if !slices.Contains(written, shard) {
		return fmt.Errorf("publishing the in-flight count: %w", &opsqsql.FenceError{Shard: shard, Generation: generation})
	}
	return nil
}

// lockRenewal is taken by a cycle before it reports the counts it renews with.
func (m *Manager) lockRenewal() {
	m.publishMu.Lock()
	m.mu.Lock()
	m.mu.renewing = true
	m.mu.Unlock()
}

// unlockRenewal is called once the renewal's counts are applied, or it failed.
func (m *Manager) unlockRenewal() {
	m.mu.Lock()
	m.mu.renewing = false
	m.mu.Unlock()
	m.publishMu.Unlock()
}
