package handout

import (
	"sync"
	"time"

	"opsq/strategy"
)

// Reserve from memory. The owner of a shard owns it alone, so after one scan of a leaf it
// already knows the leaf's next candidates: the rows the scan read past the ones the
// reserve needed. A buffer keeps them, and the next reserves of the same leaf take from
// it with no candidate query.

// Bounds of the buffers.
const (
	// bufferFillMin is how many rows a scan that fills a buffer asks for at least; it asks
	// for bufferFillPerWant times what the reserve wants, up to batchMax.
	bufferFillMin     = 256
	bufferFillPerWant = 4
	// bufferLeafMax and bufferLeafBytes bound one buffer: its candidates, and their inputs.
	bufferLeafMax   = batchMax
	bufferLeafBytes = 4 << 20
	// bufferTotalMax and bufferTotalBytes bound all the buffers of an instance together;
	// the oldest buffers are dropped to make room for a new one.
	bufferTotalMax   = 8 * batchMax
	bufferTotalBytes = 16 << 20
	// bufferLifetime bounds how long a buffer lives, used or not: the tombstones of every
	// chunk finished meanwhile are kept that long.
	bufferLifetime = time.Second
)

// buffers owns the buffers of candidates of this instance, one per leaf it has scanned
// (hintKey, the key of the resume hints too: the leaf's kind, its select_only filters, and
// the shards it ran over).
//
// A buffer is what one scan read past what its reserve took: the scan goes on reading
// after the answers are full, up to fillRows rows, and keeps the candidates it did not
// take, in the leaf's order (the scan's), each free (not reserved, not tombstoned) when it
// read it. A later reserve of the same leaf takes them from the front and checks
// each one at take time as the scan path checks a scanned one (run.takeBuffered, then
// run.take): not reserved here, no tombstone, its shard still held under the generation
// the scan read it under, and the answer's bounds. So the buffer is a scan that has not
// ended, and it is safe for the reason a running scan is: a chunk finished or retried here
// after the scan's snapshot gets a tombstone that lives until every scan that began before
// the change has ended, and a buffer holds its scan's tombstone epoch until it is dropped
// (a reserve that took candidates out of it holds the epoch too, until it ends). A retried
// chunk's tombstone hides only the rows read before the retry (tombstones.addRetried), so
// a scan finds the chunk again at once, however long a buffer keeps the tombstone.
//
// A buffer is dropped when it is drained, when it is bufferLifetime old (used or not, so
// that tombstones cannot accumulate), to make room under the budget (bufferTotalMax
// candidates and bufferTotalBytes of inputs over all buffers, the oldest first), and when
// what it holds may no longer be what a scan would find:
//   - a shard lost or acquired (dropAll): a buffer names its shards, and its candidates
//     carry the generations they were read under;
//   - chunks freed (a retry, an expired lease, a released reservation: dropFreed): the
//     ordered leaves' buffers, since those chunks may sort first, as the resume hints
//     (hints.go) are dropped; random's buffer stays, the chunks are found by a later scan;
//   - new work (dropNewWork): newest_first's and custom_priority's buffers, since new
//     chunks may sort first (as hints.clearNewWork); oldest_first's new work sorts last;
//   - a submission cancelled, failed or paused (dropSubmission): its candidates.
//
// A fill whose scan began before one of these drops installs nothing (the eras).
//
// Only leaves whose answer does not depend on what else is reserved are buffered: a leaf
// under prefer_distinct or max_simultaneous (whose candidates are deferred or refused by
// the in-flight counts of the moment) stays on the scan path. The scans of a few
// submissions one by one (a rare select_only value, a small tenant: run.submissions) are
// buffered under a key naming those submissions.
//
// Safe for concurrent use. It has no goroutine; a buffer's expiry runs on a timer.
type buffers struct {
	tombs    *tombstones
	lifetime time.Duration // guarded by mu; bufferLifetime but in tests
	mu       struct {
		sync.Mutex
		byLeaf map[string]*buffer
		// era counts, per leaf kind, the drops that make a scan begun before them unfit
		// to fill a buffer.
		era     map[strategy.Kind]uint64
		entries int // candidates in all buffers
		bytes   int // their inputs
		stopped bool
	}
}

// buffer is the next candidates of one leaf. Its fields are guarded by buffers.mu.
type buffer struct {
	key   string
	kind  strategy.Kind
	cands []candidate
	bytes int
	// generation is what the scan's run held each shard under; a candidate of a shard held
	// under another generation now is not handed out.
	generation map[int]int64
	epoch      uint64 // the scan's tombstone epoch, held until the buffer is dropped
	expires    time.Time
	timer      *time.Timer
}

func newBuffers(tombs *tombstones) *buffers {
	b := &buffers{tombs: tombs, lifetime: bufferLifetime}
	b.mu.byLeaf = map[string]*buffer{}
	b.mu.era = map[strategy.Kind]uint64{}
	return b
}

// buffered reports whether a leaf in frame f may be served from a buffer.
func buffered(f frame) bool {
	return len(f.distinct) == 0 && len(f.limits) == 0 && f.deferred == nil
}

// fillRows is how many rows a scan that fills a buffer asks for, for a run that wants
// want chunks.
func fillRows(want int) int {
	return min(max(bufferFillMin, bufferFillPerWant*want), batchMax)
}

// era returns the era of kind, to pass to install.
func (b *buffers) era(kind strategy.Kind) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.era[kind]
}

// install makes cands, the rest of a scan of kind begun in era (of buffers.era) under the
// tombstone epoch and generations of its run, the buffer of key, in place of any other.
// The buffer holds epoch (retain) until it is dropped. It installs nothing when a drop
// that concerns kind happened since era.
func (b *buffers) install(key string, kind strategy.Kind, cands []candidate, generation map[int]int64, epoch, era uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.stopped || b.mu.era[kind] != era {
		return
	}
	if old := b.mu.byLeaf[key]; old != nil {
		b.dropLocked(old)
	}
	n, bytes := 0, 0
	for n < len(cands) && n < bufferLeafMax && bytes+len(cands[n].input) <= bufferLeafBytes {
		bytes += len(cands[n].input)
		n++
	}
	if n == 0 {
		return
	}
	for b.mu.entries+n > bufferTotalMax || b.mu.bytes+bytes > bufferTotalBytes {
		var oldest *buffer
		for _, o := range b.mu.byLeaf {
			if oldest == nil || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		b.dropLocked(oldest) // the per-leaf bounds are under the total: some buffer is there
	}
	nb := &buffer{
		key: key, kind: kind, cands: append([]candidate(nil), cands[:n]...), bytes: bytes,
		generation: generation, epoch: epoch, expires: time.Now().Add(b.lifetime),
	}
	for i := range nb.cands {
		nb.cands[i].info = nil // looked up again at take time
	}
	b.tombs.retain(epoch)
	nb.timer = time.AfterFunc(b.lifetime, func() { b.expire(nb) })
	b.mu.byLeaf[key] = nb
	b.mu.entries += n
	b.mu.bytes += bytes
}

// take removes up to n candidates from the front of key's buffer and returns them with the
// buffer, whose tombstone epoch the caller now holds too: it calls tombs.end(buf.epoch)
// once it is done with the candidates, and putBack with those it did not use. A nil buffer:
// none (or expired).
func (b *buffers) take(key string, n int) (*buffer, []candidate) {
	b.mu.Lock()
	defer b.mu.Unlock()
	buf := b.mu.byLeaf[key]
	if buf == nil {
		return nil, nil
	}
	if !time.Now().Before(buf.expires) {
		b.dropLocked(buf)
		return nil, nil
	}
	n = min(n, len(buf.cands))
	out := make([]candidate, n)
	copy(out, buf.cands)
	clear(buf.cands[:n])
	buf.cands = buf.cands[n:]
	bytes := 0
	for _, c := range out {
		bytes += len(c.input)
	}
	buf.bytes -= bytes
	b.mu.entries -= n
	b.mu.bytes -= bytes
	b.tombs.retain(buf.epoch)
	if len(buf.cands) == 0 {
		b.dropLocked(buf) // drained
	}
	return buf, out
}

// putBack returns to the front of buf the candidates a take did not use, in their order,
// if buf is still the buffer of its leaf; else they are left for a later scan.
func (b *buffers) putBack(buf *buffer, rest []candidate) {
	if len(rest) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.byLeaf[buf.key] != buf {
		return
	}
	bytes := 0
	for i := range rest {
		bytes += len(rest[i].input)
	}
	buf.cands = append(append(make([]candidate, 0, len(rest)+len(buf.cands)), rest...), buf.cands...)
	buf.bytes += bytes
	b.mu.entries += len(rest)
	b.mu.bytes += bytes
}

// expire drops buf at the end of its lifetime, if it is still there.
func (b *buffers) expire(buf *buffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.byLeaf[buf.key] == buf {
		b.dropLocked(buf)
	}
}

func (b *buffers) dropLocked(buf *buffer) {
	delete(b.mu.byLeaf, buf.key)
	if buf.timer != nil {
		buf.timer.Stop()
	}
	b.mu.entries -= len(buf.cands)
	b.mu.bytes -= buf.bytes
	buf.cands, buf.bytes = nil, 0
	b.tombs.end(buf.epoch)
}

// dropKinds drops the buffers of the kinds, and moves their eras on.
func (b *buffers) dropKinds(kinds ...strategy.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range kinds {
		b.mu.era[k]++
	}
	for _, buf := range b.mu.byLeaf {
		for _, k := range kinds {
			if buf.kind == k {
				b.dropLocked(buf)
				break
			}
		}
	}
}

// dropAll drops every buffer: a shard was lost or acquired, or notifications may have been
// missed.
func (b *buffers) dropAll() { b.dropKinds(leafKinds...) }

// leafKinds are the kinds of the leaves.
var leafKinds = []strategy.Kind{strategy.Random, strategy.OldestFirst, strategy.NewestFirst, strategy.CustomPriority}

// dropFreed drops the buffers that chunks freed again may sort before: the ordered
// leaves'.
func (b *buffers) dropFreed() {
	b.dropKinds(strategy.OldestFirst, strategy.NewestFirst, strategy.CustomPriority)
}

// dropNewWork drops the buffers that new chunks may sort before: newest_first's and
// custom_priority's.
func (b *buffers) dropNewWork() {
	b.dropKinds(strategy.NewestFirst, strategy.CustomPriority)
}

// dropSubmission removes the candidates of submission id, cancelled, failed or paused, from every
// buffer.
func (b *buffers) dropSubmission(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range leafKinds {
		b.mu.era[k]++
	}
	for _, buf := range b.mu.byLeaf {
		kept := buf.cands[:0]
		for _, c := range buf.cands {
			if c.key.SubmissionID == id {
				buf.bytes -= len(c.input)
				b.mu.bytes -= len(c.input)
				b.mu.entries--
				continue
			}
			kept = append(kept, c)
		}
		clear(buf.cands[len(kept):])
		buf.cands = kept
		if len(buf.cands) == 0 {
			b.dropLocked(buf)
		}
	}
}

// stop drops every buffer and installs no more.
func (b *buffers) stop() {
	b.dropAll()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.stopped = true
}

// size is how many candidates, and bytes of inputs, the buffers hold.
func (b *buffers) size() (entries, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.entries, b.mu.bytes
}
