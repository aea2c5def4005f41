package handout

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"opsq/strategy"
)

// weighted_fair (DESIGN.md §5, docs/rates.md): deficit round robin at chunk granularity
// over the values of a key, per instance. Each weighted_fair node has a ring: the values
// its weights name, the values found since, and one entry for all the others
// (fairOthers), each with a deficit. A value's turn adds its weight to its deficit, and
// the reserve asks then for that many chunks of the value alone (a select_only of it, so
// that a value that is a small part of the backlog is not read past). A value that gives
// fewer than it was offered has nothing to do: its deficit goes (as DRR drops an empty
// queue's) and it is skipped until new work may have come, so its share goes to the
// others. The others' turn (default_weight) reads then as it is: the values it hands out
// (it passes over the chunks of the values the ring knows, which have turns of their own)
// join the ring, with their first turn at the end of the round: a value that arrives late
// is served at once, and at its share from the next round.

// fairOthers is the ring's entry for the values it does not name: its turn reads then as
// it is, with default_weight. No value's canonical JSON is empty.
const fairOthers = ""

// Bounds of the fair state.
const (
	// fairDebtMax bounds, in quanta, what a value may owe for chunks the others' turns
	// handed out.
	fairDebtMax = 4
	// fairDryFor is how long a value that had nothing to do is skipped, unless new work
	// arrives first (Path.Handle clears the marks) or the fill hands it out.
	fairDryFor = 250 * time.Millisecond
	// fairForget is how long a value the weights do not name stays in the ring after it
	// last had work.
	fairForget = time.Minute
	// fairRingMax bounds the values one node's ring holds beyond its weights; the fill
	// still serves the others.
	fairRingMax = 10_000
)

// fairShares is the deficit round robin state of every weighted_fair node this instance
// ran, by the node's text. Safe for concurrent use.
type fairShares struct {
	mu struct {
		sync.Mutex
		byNode map[string]*drr
	}
}

func newFairShares() *fairShares {
	s := &fairShares{}
	s.mu.byNode = map[string]*drr{}
	return s
}

// of returns node n's state, made on first use. Nodes are few (one per strategy in use);
// a node's text holds its key and weights.
func (s *fairShares) of(n strategy.Node) *drr {
	k := n.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mu.byNode[k]
	if d == nil {
		d = &drr{node: n, values: map[string]*fairValue{fairOthers: {weighted: true}}}
		for _, v := range n.WeightedValues() {
			d.ring = append(d.ring, v)
			d.values[v] = &fairValue{weighted: true}
		}
		d.ring = append(d.ring, fairOthers) // the named values first
		s.mu.byNode[k] = d
	}
	return d
}

// newWork clears every value's mark of having nothing to do.
func (s *fairShares) newWork() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.mu.byNode {
		d.mu.Lock()
		for _, v := range d.values {
			v.dryUntil = time.Time{}
		}
		d.mu.Unlock()
	}
}

// drr is one weighted_fair node's ring. Safe for concurrent use: a turn is taken and its
// result recorded under the lock, the chunks are read between them.
type drr struct {
	node strategy.Node
	mu   sync.Mutex
	ring []string // canonical JSON values, in turn order
	next int      // the ring's pointer
	// values holds the state of each value in the ring.
	values map[string]*fairValue
}

// fairValue is one value's state.
type fairValue struct {
	weighted bool // named in the weights: never forgotten
	deficit  int  // chunks it may still take
	inTurn   bool // the pointer is on it and its quantum was added
	dryUntil time.Time
	lastWork time.Time
}

// clone is a copy for a preview, which must not move the instance's ring.
func (d *drr) clone() *drr {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &drr{node: d.node, ring: slices.Clone(d.ring), next: d.next, values: make(map[string]*fairValue, len(d.values))}
	for k, v := range d.values {
		vv := *v
		c.values[k] = &vv
	}
	return c
}

// turn picks the next value with something to do that skip does not name, and how many
// of at most room chunks it may take now; ok is false when there is none. The chunks are
// counted as taken until result says how many were.
//
// skipped reports that a value was passed over for a recent mark of having nothing to do
// (not read now: the walk is partial).
func (d *drr) turn(room int, skip map[string]bool, now time.Time) (value string, ask int, ok, skipped bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Every value a few times at most: a value that owes for chunks handed out in the
	// others' turns takes up to fairDebtMax+1 visits to be due again.
	for range (fairDebtMax + 2) * len(d.ring) {
		if len(d.ring) == 0 {
			return "", 0, false, skipped
		}
		d.next %= len(d.ring)
		v := d.ring[d.next]
		st := d.values[v]
		if !st.weighted && now.Sub(st.lastWork) > fairForget {
			d.drop(d.next)
			continue
		}
		if skip[v] || now.Before(st.dryUntil) {
			skipped = skipped || !skip[v]
			st.inTurn = false
			d.next++
			continue
		}
		if !st.inTurn {
			st.deficit += d.node.WeightOf(v) // its turn: a new quantum
			st.inTurn = true
		}
		if st.deficit <= 0 {
			st.inTurn = false
			d.next++
			continue
		}
		ask = min(st.deficit, room)
		st.deficit -= ask
		if st.deficit == 0 {
			st.inTurn = false
			d.next++ // its quantum is spent: the next value's turn
		}
		return v, ask, true, skipped
	}
	return "", 0, false, skipped
}

// knows reports whether value has an entry of its own in the ring.
func (d *drr) knows(value string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.values[value]
	return ok
}

// known returns the values the ring has turns of their own for, sorted: the others' turn
// passes over their chunks.
func (d *drr) known() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.values)-1)
	for v := range d.values {
		if v != fairOthers {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// drop removes the value at ring position i.
func (d *drr) drop(i int) {
	delete(d.values, d.ring[i])
	d.ring = slices.Delete(d.ring, i, i+1)
	if d.next > i {
		d.next--
	}
}

// result records that value, offered ask chunks, took got. When it took fewer and the
// request had room for more (full is false), it had nothing more to do: its deficit goes
// and it is skipped for fairDryFor. When the request filled first, the untaken chunks go
// back to its deficit.
func (d *drr) result(value string, ask, got int, full bool, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.values[value]
	if st == nil {
		return // forgotten meanwhile
	}
	if got > 0 {
		st.lastWork = now
	}
	switch {
	case got >= ask:
	case full:
		st.deficit += ask - got // not taken for want of room: still its due
	default:
		st.deficit, st.dryUntil = 0, now.Add(fairDryFor)
		if st.inTurn {
			st.inTurn = false
			d.next++
		}
	}
}

// saw records what the others' turn handed out, count by value: a value the ring knows
// is charged for its chunks (its deficit may go below 0, and its next turns are the
// shorter: over time each value gets its weight's share whoever's turn handed it out);
// a value it does not know joins it, just before the pointer, so that its first turn
// comes at the end of the current round.
func (d *drr) saw(values map[string]int, now time.Time) {
	if len(values) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range slices.Sorted(maps.Keys(values)) {
		if st := d.values[v]; st != nil {
			st.dryUntil, st.lastWork = time.Time{}, now
			st.deficit = max(st.deficit-values[v], -fairDebtMax*d.node.WeightOf(v))
			continue
		}
		if len(d.values) >= len(d.node.Weights)+1+fairRingMax {
			continue
		}
		d.values[v] = &fairValue{lastWork: now}
		at := d.next % max(len(d.ring), 1)
		d.ring = slices.Insert(d.ring, at, v)
		d.next = at + 1
	}
}

// fairSeen counts the values of one key that the chunks taken under it had: what the
// others' turn of a weighted_fair handed out.
type fairSeen struct {
	key    string
	values map[string]int
	// known reports the values the ring names: the others' turn passes over their chunks.
	known func(value string) bool
}

// passes reports whether the others' turn passes over a candidate with these strategic
// values: one of a value the ring names, which has turns of its own.
func (s *fairSeen) passes(values map[string]string) bool {
	v, ok := values[s.key]
	return ok && s.known(v)
}

// add counts the value of the key in values, a candidate's strategic values.
func (s *fairSeen) add(values map[string]string) {
	if v, ok := values[s.key]; ok {
		s.values[v]++
	}
}

// walkFair runs a weighted_fair node n in frame f: the turns of the ring's values, while
// the walker has room. A named value's turn is a select_only of it over then; the turn of
// the others (fairOthers) is then as it is, and the chunks it hands out of values the
// ring knows are charged to them.
func walkFair(ctx context.Context, w walker, n strategy.Node, f frame) error {
	d := w.fairState(n)
	f.counted = withKey(f.counted, n.Key)
	skip := map[string]bool{}
	for !w.full() {
		v, ask, ok, skipped := d.turn(w.space(), skip, time.Now())
		if skipped {
			w.partial()
		}
		if !ok {
			return nil
		}
		before := w.count()
		restore := w.limit(before + ask)
		var err error
		var seen *fairSeen
		if v == fairOthers {
			seen = &fairSeen{key: n.Key, values: map[string]int{}, known: d.knows}
			g := f
			g.fairs = append(append([]*fairSeen(nil), f.fairs...), seen)
			var done bool
			if done, err = w.others(ctx, n.Key, d.known(), *n.Then, g); !done && err == nil {
				err = walk(ctx, w, *n.Then, g)
			}
		} else {
			err = within(ctx, w, strategy.ValueFilter(n.Key, v), *n.Then, f)
		}
		restore()
		got := w.count() - before
		now := time.Now()
		// A turn the scan bound cut short had nothing to do within reach: were its due kept,
		// the pointer would stay on it, and every reserve would spend the bound on it again.
		d.result(v, ask, got, w.full() && !w.scanBound(), now)
		if seen != nil {
			d.saw(seen.values, now)
		}
		if err != nil {
			return err
		}
		if got < ask {
			skip[v] = true // nothing more of it in this request
		}
	}
	return nil
}

// fairPasses reports whether a weighted_fair's others' turn in f passes over c.
func fairPasses(c candidate, f frame) bool {
	for _, s := range f.fairs {
		if s.passes(c.info.values) {
			return true
		}
	}
	return false
}
