package handout

import (
	"fmt"
	"strings"
	"sync"

	"opsq/strategy"
)

// Resume hints keep the cost of an ordered reserve (oldest_first, newest_first,
// custom_priority) from growing with the chunks already reserved: those sit at the head of
// the order, and every scan would read past them again. When a scan reads a long run of
// reserved chunks before its first free one, it leaves the position at the end of that run
// as a hint; the next scan of the same leaf, filters and shards starts there, and wraps
// around to the beginning (up to the hint) when it reaches the end. A hint is dropped
// whenever chunks may have become free before it: a retry, an expired lease, a lost or
// acquired shard, a released reservation; for newest_first and custom_priority also when
// new work arrives (it may sort before the hint).

// hintMinRun is the shortest run of reserved chunks worth a hint.
const hintMinRun = 64

// hints owns the resume hints of ordered scans: for each leaf, filters and shards
// (hintKey), the position after the run of reserved chunks its last scan began with. Safe
// for concurrent use.
type hints struct {
	mu     sync.Mutex
	byScan map[string]strategy.Position
}

func newHints() *hints { return &hints{byScan: map[string]strategy.Position{}} }

// hintKey names a scan: its leaf, filters and shards.
func hintKey(kind strategy.Kind, filters []strategy.Filter, shards []int32) string {
	var b strings.Builder
	b.WriteString(string(kind))
	for _, f := range filters {
		fmt.Fprintf(&b, "|%s=%s", f.Key, f.Value)
		for _, v := range f.Values {
			fmt.Fprintf(&b, ",%s", v)
		}
	}
	fmt.Fprintf(&b, "|%v", shards)
	return b.String()
}

func (h *hints) get(key string) (strategy.Position, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.byScan[key]
	return p, ok
}

func (h *hints) set(key string, p strategy.Position) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byScan[key] = p
}

// clear drops every hint: chunks may have become free anywhere.
func (h *hints) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.byScan)
}

// clearNewWork drops the hints that new chunks may sort before: all but oldest_first's,
// whose new work comes after everything there is.
func (h *hints) clearNewWork() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.byScan {
		if !strings.HasPrefix(k, string(strategy.OldestFirst)+"|") {
			delete(h.byScan, k)
		}
	}
}
