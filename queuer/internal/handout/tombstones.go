package handout

import (
	"sync"

	"opsq/reserver"
)

// tombstones remember chunks that were finished or retried here while a reserve scan that
// began earlier may still be running. Such a scan reads a snapshot taken before the
// change, so it can still see the chunk as it was; without the tombstone, once the
// reservation is released, it would hand the chunk out again. A tombstone lives until
// every scan that began before it has ended. A buffer of candidates (buffer.go) is a scan
// that has not ended: it holds its scan's epoch (retain) until it is dropped.
//
// A retried chunk is reservable again at once: its tombstone hides only the rows read
// before the retry, those with the retries count of the attempt retried or lower, so that
// a scan that reads the chunk as it is now takes it, however long an older buffer keeps the
// tombstone. Safe for concurrent use.
type tombstones struct {
	mu    sync.Mutex
	epoch uint64
	keys  map[reserver.Key]grave // key -> its last change
	// log is the changes in the order they were made (by epoch), so that collecting the
	// old ones costs what it drops, not what is kept.
	log    []tombstone
	active map[uint64]int // running scans by the epoch they began in
}

type tombstone struct {
	key   reserver.Key
	epoch uint64
}

// grave is a key's last change: its epoch, and the highest retries count of the rows it
// makes stale (finished: any).
type grave struct {
	epoch   uint64
	retries int32
}

// anyRetries is the retries count of a finished chunk's tombstone: every row of it is
// stale.
const anyRetries = 1<<31 - 1

func newTombstones() *tombstones {
	return &tombstones{keys: map[reserver.Key]grave{}, active: map[uint64]int{}}
}

// begin registers a scan; call it before the scan's query, and end when it is done.
func (t *tombstones) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active[t.epoch]++
	return t.epoch
}

// retain registers one more holder of the epoch of a scan that is still registered (a
// buffer that outlives its scan, a reserve that takes from a buffer): it calls end too.
func (t *tombstones) retain(epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[epoch] == 0 {
		panic("queuer: tombstones.retain of an epoch no scan holds")
	}
	t.active[epoch]++
}

func (t *tombstones) end(epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[epoch]--; t.active[epoch] == 0 {
		delete(t.active, epoch)
		t.collectLocked()
	}
}

// add marks keys finished now (completed, failed); call it before the keys' reservations
// are released.
func (t *tombstones) add(keys ...reserver.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.active) == 0 {
		return // no scan can have seen them
	}
	t.epoch++
	for _, k := range keys {
		t.addLocked(k, anyRetries)
	}
}

// addRetried marks k's attempt retries retried now: the rows of k read with that retries
// count or a lower one are stale. Call it before the reservation is released.
func (t *tombstones) addRetried(k reserver.Key, retries int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.active) == 0 {
		return // no scan can have seen it
	}
	t.epoch++
	if g, ok := t.keys[k]; ok && g.retries > retries {
		retries = g.retries // finished, or a later attempt retried: keep what it hides
	}
	t.addLocked(k, retries)
}

func (t *tombstones) addLocked(k reserver.Key, retries int32) {
	t.keys[k] = grave{epoch: t.epoch, retries: retries}
	t.log = append(t.log, tombstone{k, t.epoch})
}

// has reports whether k has a tombstone, whatever rows of it it hides.
func (t *tombstones) has(k reserver.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.keys[k]
	return ok
}

// stale reports whether a row of k read with this retries count may be out of date: the
// chunk was finished, or that attempt retried, since a running scan began.
func (t *tombstones) stale(k reserver.Key, retries int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.keys[k]
	return ok && retries <= g.retries
}

// len is how many tombstones are kept.
func (t *tombstones) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// collectLocked drops the tombstones no running scan can need: those of changes made
// before the oldest running scan began.
func (t *tombstones) collectLocked() {
	if len(t.log) == 0 {
		return
	}
	oldest, any := uint64(0), false
	for e := range t.active {
		if !any || e < oldest {
			oldest, any = e, true
		}
	}
	n := 0
	for ; n < len(t.log) && (!any || t.log[n].epoch <= oldest); n++ {
		if d := t.log[n]; t.keys[d.key].epoch == d.epoch {
			delete(t.keys, d.key) // not changed again since
		}
	}
	clear(t.log[:n])
	t.log = t.log[n:]
	if len(t.log) == 0 {
		t.log = nil
	}
}
