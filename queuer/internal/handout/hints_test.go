package handout

import (
	"testing"

	"opsq/strategy"
)

// TestHintKeyNamesLeafFiltersAndShards: two scans share a hint only when their leaf,
// filters and shards are the same.
func TestHintKeyNamesLeafFiltersAndShards(t *testing.T) {
	t.Parallel()
	preview := []strategy.Filter{{Key: "mode", Value: []byte(`"preview"`)}}
	full := []strategy.Filter{{Key: "mode", Value: []byte(`"full"`)}}
	base := hintKey(strategy.OldestFirst, preview, []int32{1, 2})
	if again := hintKey(strategy.OldestFirst, []strategy.Filter{{Key: "mode", Value: []byte(`"preview"`)}}, []int32{1, 2}); again != base {
		t.Errorf("the same scan named %q and %q; want one name", base, again)
	}
	for name, other := range map[string]string{
		"another leaf":      hintKey(strategy.NewestFirst, preview, []int32{1, 2}),
		"another filter":    hintKey(strategy.OldestFirst, full, []int32{1, 2}),
		"no filter":         hintKey(strategy.OldestFirst, nil, []int32{1, 2}),
		"other shards":      hintKey(strategy.OldestFirst, preview, []int32{1, 3}),
		"fewer shards":      hintKey(strategy.OldestFirst, preview, []int32{1}),
		"one more filter":   hintKey(strategy.OldestFirst, append(preview, strategy.Filter{Key: "company_id", Value: []byte("7")}), []int32{1, 2}),
		"shards run in one": hintKey(strategy.OldestFirst, preview, []int32{12}),
	} {
		if other == base {
			t.Errorf("%s: named %q, as the base scan; want another name", name, other)
		}
	}
}

func TestHintsSetGetClear(t *testing.T) {
	t.Parallel()
	h := newHints()
	k := hintKey(strategy.CustomPriority, nil, []int32{0})
	if _, ok := h.get(k); ok {
		t.Fatalf("get(%q) of a new hints = ok; want none", k)
	}
	p := strategy.Position{Priority: -5, SubmissionID: 10, ChunkIndex: 3}
	h.set(k, p)
	if got, ok := h.get(k); !ok || got != p {
		t.Fatalf("get(%q) = %+v, %t; want %+v, true", k, got, ok, p)
	}
	q := strategy.Position{Priority: -5, SubmissionID: 11}
	h.set(k, q)
	if got, _ := h.get(k); got != q {
		t.Fatalf("get(%q) after a second set = %+v; want %+v (the last one)", k, got, q)
	}
	h.clear()
	if _, ok := h.get(k); ok {
		t.Errorf("get(%q) after clear = ok; want none", k)
	}
}

// TestHintsClearNewWorkKeepsOnlyOldestFirst: new work sorts after every oldest_first hint,
// and may sort before any other.
func TestHintsClearNewWorkKeepsOnlyOldestFirst(t *testing.T) {
	t.Parallel()
	h := newHints()
	p := strategy.Position{SubmissionID: 1}
	filters := []strategy.Filter{{Key: "mode", Value: []byte(`"preview"`)}}
	keys := map[strategy.Kind]string{}
	for _, kind := range []strategy.Kind{strategy.OldestFirst, strategy.NewestFirst, strategy.CustomPriority} {
		keys[kind] = hintKey(kind, filters, []int32{4})
		h.set(keys[kind], p)
	}
	h.clearNewWork()
	for kind, k := range keys {
		_, ok := h.get(k)
		if want := kind == strategy.OldestFirst; ok != want {
			t.Errorf("%s's hint after clearNewWork: kept = %t; want %t", kind, ok, want)
		}
	}
}
