// Package valuerates counts, on one instance, the chunks handed out per value of the keys
// the strategies limit (rate_limit's and weighted_fair's keys, and the keys of throttles
// in force), over the last minute, for the dashboard (DESIGN.md §9: "throttles and rate
// limits in force", and each value's recent rate).
//
// Memory is bounded whatever the number of values: the minute is cut into Slots slots of
// SlotTime, and each slot counts at most Capacity values with the space-saving algorithm
// (Metwally, Agrawal, El Abbadi, 2005): a value not counted yet, when the slot is full,
// takes the place of the value counted least, and inherits its count as its possible
// error. A value's count in a slot is then known to within that error, at most the slot's
// hand-outs ÷ Capacity; Top reports the part that is certain (the count less its error),
// so that a rate is never overstated: exact while a slot sees at most Capacity values.
//
// It writes nothing to the database: the activity writer (queuer/internal/admin) publishes the
// instance's top values with its other figures, and the dashboard adds up the instances'.
package valuerates

import (
	"cmp"
	"container/heap"
	"slices"
	"sync"
	"time"
)

const (
	// SlotTime is the length of a slot: what the window moves by.
	SlotTime = 10 * time.Second
	// Slots is how many slots the window holds: the window is the slot in progress and
	// the Slots−1 before it, 50 to 60 s.
	Slots = 6
	// Capacity bounds the values one slot counts.
	Capacity = 128
	// Shown is how many values an instance publishes, and the dashboard shows.
	Shown = 20
)

// Rate is one value's hand-outs over the window.
type Rate struct {
	Key   string  // the strategic metadata key, or "@tenant"
	Value string  // the value's canonical JSON text
	Count int64   // chunks handed out in the window (at least this many)
	PerS  float64 // Count over the window's length, per second
}

// pair is one key and value.
type pair struct{ key, value string }

// entry is one value counted in a slot; i is its place in the slot's heap.
type entry struct {
	pair
	count, err int64
	i          int
}

// slot counts the values of one SlotTime: a min-heap by count (the value counted least
// first, the one a new value replaces) and an index by value.
type slot struct {
	n     int64 // the slot's number: time since the counter began ÷ SlotTime
	heap  entries
	index map[pair]*entry
}

// entries is a min-heap of entries by count.
type entries []*entry

func (h entries) Len() int           { return len(h) }
func (h entries) Less(i, j int) bool { return h[i].count < h[j].count }
func (h entries) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].i = i; h[j].i = j }
func (h *entries) Push(x any)        { e := x.(*entry); e.i = len(*h); *h = append(*h, e) }
func (h *entries) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// add counts one hand-out of p.
func (s *slot) add(p pair) {
	if e := s.index[p]; e != nil {
		e.count++
		heap.Fix(&s.heap, e.i)
		return
	}
	if len(s.heap) < Capacity {
		e := &entry{pair: p, count: 1}
		heap.Push(&s.heap, e)
		s.index[p] = e
		return
	}
	// Space-saving: p takes the place of the value counted least, and its count.
	e := s.heap[0]
	delete(s.index, e.pair)
	e.pair, e.err, e.count = p, e.count, e.count+1
	heap.Fix(&s.heap, 0)
	s.index[p] = e
}

// Counter counts hand-outs per value over the last minute. It is safe for concurrent use
// and has no goroutine; Add costs a map look-up and a heap fix under a mutex.
type Counter struct {
	now   func() time.Time
	start time.Time
	mu    struct {
		sync.Mutex
		slots [Slots]slot // slot n at n mod Slots
	}
}

// New returns a Counter that reads the time from now (nil: time.Now; its monotonic clock
// is what counts).
func New(now func() time.Time) *Counter {
	c := &Counter{now: now}
	if now == nil {
		c.now = time.Now
	}
	c.start = c.now()
	for i := range c.mu.slots {
		c.mu.slots[i] = slot{n: -1, index: map[pair]*entry{}}
	}
	return c
}

// slotOf is the number of the slot t falls in.
func (c *Counter) slotOf(t time.Time) int64 { return int64(max(t.Sub(c.start), 0) / SlotTime) }

// Add counts one chunk handed out with value (canonical JSON text) of key.
func (c *Counter) Add(key, value string) {
	n := c.slotOf(c.now())
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.mu.slots[n%Slots]
	if s.n != n {
		s.n, s.heap = n, s.heap[:0]
		clear(s.index)
	}
	s.add(pair{key, value})
}

// Top returns the n values handed out most over the window, most first (then by key and
// value), with their rates.
func (c *Counter) Top(n int) []Rate {
	now := c.now()
	cur := c.slotOf(now)
	first := max(cur-Slots+1, 0)
	from := c.start.Add(time.Duration(first) * SlotTime)
	span := max(now.Sub(from), time.Second).Seconds()
	counts := map[pair]int64{}
	c.mu.Lock()
	for i := range c.mu.slots {
		s := &c.mu.slots[i]
		if s.n < first || s.n > cur {
			continue
		}
		for _, e := range s.heap {
			if sure := e.count - e.err; sure > 0 {
				counts[e.pair] += sure
			}
		}
	}
	c.mu.Unlock()
	out := make([]Rate, 0, len(counts))
	for p, k := range counts {
		out = append(out, Rate{Key: p.key, Value: p.value, Count: k, PerS: float64(k) / span})
	}
	slices.SortFunc(out, func(a, b Rate) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value))
	})
	return out[:min(len(out), n)]
}
