package handout

import (
	"context"
	"slices"

	"opsq/strategy"
)

// The one walk of a strategy tree, for a reserve (run) and a preview alike: the wrappers
// (select_only, prefer_distinct, max_simultaneous, rate_limit) add to the frame their leaves are read
// in, or_else tries its first branch and then its fallback, weighted_fair gives each value
// its turn (fair.go), and the leaves are read by the
// walker, a reserve taking chunks and a preview listing them.

// walker is what a walk does at the nodes whose work differs between a reserve and a
// preview.
type walker interface {
	// full reports that the walk may stop: enough chunks, or the scan bound reached.
	full() bool
	// scanBound reports that the walk stopped for the scan bound, with room for more chunks.
	scanBound() bool
	// leaf reads a leaf's candidates in f and takes what it may.
	leaf(ctx context.Context, kind strategy.Kind, f frame) error
	// selectOnly may serve a select_only node then over filter by a way of its own
	// (a reserve scans a rare value's few submissions one by one); done reports that it did,
	// and the walk goes no further down. Otherwise only, when not nil, is the few
	// submissions the leaves below may read (frame.only).
	selectOnly(ctx context.Context, filter strategy.Filter, then strategy.Node, f frame) (done bool, only []int64, err error)
	// tenants may serve a tree then confined to tenants (frame f filters by them) by a way
	// of its own: nothing at all when the tenants have nothing in progress, their few
	// submissions one by one when they hold few chunks (tenants.go); done reports that it
	// did.
	tenants(ctx context.Context, tenants []string, then strategy.Node, f frame) (done bool, err error)
	// others may serve a weighted_fair's turn of the others (then in frame f, which
	// passes over the chunks of the values known, the ring's, of key) by a way of its own:
	// nothing at all when every submission in progress has a known value, the few
	// without one submission by submission (scan.go); done reports that it did.
	others(ctx context.Context, key string, known []string, then strategy.Node, f frame) (done bool, err error)
	// deferred takes, after a prefer_distinct's subtree, the saturated candidates it
	// deferred, in order, while it wants more (soft: with nothing unsaturated left, they
	// are handed out after all).
	deferred(ctx context.Context, cands []candidate, f frame) error
	// fairState is a weighted_fair node's deficit round robin (fair.go): the instance's
	// for a reserve, a copy for a preview.
	fairState(n strategy.Node) *drr
	// count is how many chunks the walk took; space how many more it may take.
	count() int
	space() int
	// limit makes the walk full once it took n chunks, until restore is called: a
	// weighted_fair value's turn.
	limit(n int) (restore func())
	// partial notes that the walk left out chunks it did not read (a weighted_fair value
	// skipped for having had nothing to do): an empty answer proves nothing.
	partial()
}

// frame is what the wrappers above a node add to its leaves.
type frame struct {
	filters []strategy.Filter // select_only
	// only, when not nil, is every submission in progress that the select_only filters
	// above may match, when they are few: the leaves below read them one by one, not the
	// backlog (a weighted_fair value's turn over a then of its own select_only, whose cost
	// would otherwise grow with the chunks of other values).
	only     []int64
	distinct []rule       // prefer_distinct: saturated values are deferred
	limits   []rule       // max_simultaneous: a global slot per value
	rates    []rateRule   // rate_limit: a global token per value (rates.go)
	deferred *[]candidate // where prefer_distinct collects saturated candidates
	fairs    []*fairSeen  // weighted_fair's fills: the values handed out
	// counted are the keys of the rate_limit and weighted_fair nodes above: the chunks
	// handed out are counted per value of them (Config.ValueRates).
	counted []string
}

// rule is a prefer_distinct's or a max_simultaneous's key and most in flight.
type rule struct {
	key string
	max int
}

// walk runs node n of a strategy tree in frame f.
func walk(ctx context.Context, w walker, n strategy.Node, f frame) error {
	switch n.Kind {
	case strategy.OrElse:
		if err := walk(ctx, w, *n.First, f); err != nil || w.full() {
			return err
		}
		return walk(ctx, w, *n.Fallback, f)
	case strategy.SelectOnly:
		return within(ctx, w, n.Filter(), *n.Then, f)
	case strategy.MaxSimultaneous:
		f.limits = append(append([]rule(nil), f.limits...), rule{n.Key, n.Max})
		return walk(ctx, w, *n.Then, f)
	case strategy.RateLimit:
		f.rates = append(append([]rateRule(nil), f.rates...), rateRule{n.Key, n.PerSecond, n.Burst})
		f.counted = withKey(f.counted, n.Key)
		return walk(ctx, w, *n.Then, f)
	case strategy.WeightedFair:
		return walkFair(ctx, w, n, f)
	case strategy.PreferDistinct:
		var deferred []candidate
		f.distinct = append(append([]rule(nil), f.distinct...), rule{n.Key, n.Max})
		f.deferred = &deferred
		if err := walk(ctx, w, *n.Then, f); err != nil {
			return err
		}
		f.distinct, f.deferred = f.distinct[:len(f.distinct)-1], nil
		return w.deferred(ctx, deferred, f)
	default:
		return w.leaf(ctx, n.Kind, f)
	}
}

// withKey returns keys with key, a copy when it adds it.
func withKey(keys []string, key string) []string {
	if slices.Contains(keys, key) {
		return keys
	}
	return append(append([]string(nil), keys...), key)
}

// within runs then in f restricted by filter, as a select_only node does.
func within(ctx context.Context, w walker, filter strategy.Filter, then strategy.Node, f frame) error {
	done, only, err := w.selectOnly(ctx, filter, then, f)
	if done || err != nil {
		return err
	}
	if only != nil {
		f.only = only
	}
	f.filters = append(append([]strategy.Filter(nil), f.filters...), filter)
	return walk(ctx, w, then, f)
}

// walkTenants runs a strategy tree from its root, confined to tenants (nil: all): its
// leaves' scans carry the tenant filter (strategy.TenantFilter), as under a select_only of
// "@tenant", unless the walker serves it otherwise (walker.tenants).
func walkTenants(ctx context.Context, w walker, n strategy.Node, tenants []string) error {
	if tenants == nil {
		return walk(ctx, w, n, frame{})
	}
	f := frame{filters: []strategy.Filter{strategy.TenantFilter(tenants)}}
	if done, err := w.tenants(ctx, tenants, n, f); done || err != nil {
		return err
	}
	return walk(ctx, w, n, f)
}
