package queuer

import (
	"sync"

	"opsq/reserver"
)

// tombstones remember chunks that were finished or retried here while a reserve scan that
// began earlier may still be running. Such a scan reads a snapshot taken before the
// change, so it can still see the chunk as it was; without the tombstone, once the
// reservation is released, it would hand the chunk out again. A tombstone lives until
// every scan that began before it has ended. Safe for concurrent use.
type tombstones struct {
	mu     sync.Mutex
	epoch  uint64
	keys   map[reserver.Key]uint64 // key -> epoch of its change
	active map[uint64]int          // running scans by the epoch they began in
}

func newTombstones() *tombstones {
	return &tombstones{keys: map[reserver.Key]uint64{}, active: map[uint64]int{}}
}

// begin registers a scan; call it before the scan's query, and end when it is done.
func (t *tombstones) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active[t.epoch]++
	return t.epoch
}

func (t *tombstones) end(epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[epoch]--; t.active[epoch] == 0 {
		delete(t.active, epoch)
		t.collectLocked()
	}
}

// add marks keys changed now; call it before the keys' reservations are released.
func (t *tombstones) add(keys ...reserver.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.active) == 0 {
		return // no scan can have seen them
	}
	t.epoch++
	for _, k := range keys {
		t.keys[k] = t.epoch
	}
}

func (t *tombstones) has(k reserver.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.keys[k]
	return ok
}

// collectLocked drops the tombstones no running scan can need: those of changes made
// before the oldest running scan began.
func (t *tombstones) collectLocked() {
	if len(t.keys) == 0 {
		return
	}
	oldest, any := uint64(0), false
	for e := range t.active {
		if !any || e < oldest {
			oldest, any = e, true
		}
	}
	for k, e := range t.keys {
		if !any || e <= oldest {
			delete(t.keys, k)
		}
	}
}
