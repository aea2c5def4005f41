package strategy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Builders for trees in tests.

func leaf(k Kind) *Node { return &Node{Kind: k} }

func selectOnly(key string, v Value, then *Node) *Node {
	return &Node{Kind: SelectOnly, Key: key, Value: v, Then: then}
}

func preferDistinct(key string, m int, then *Node) *Node {
	return &Node{Kind: PreferDistinct, Key: key, Max: m, Then: then}
}

func maxSimultaneous(key string, m int, then *Node) *Node {
	return &Node{Kind: MaxSimultaneous, Key: key, Max: m, Then: then}
}

func weightedFair(key string, weights []Weight, def int, then *Node) *Node {
	return &Node{Kind: WeightedFair, Key: key, Weights: weights, DefaultWeight: def, Then: then}
}

func rateLimit(key string, perSecond float64, burst int, then *Node) *Node {
	return &Node{Kind: RateLimit, Key: key, PerSecond: perSecond, Burst: burst, Then: then}
}

func orElse(first, fallback *Node) *Node {
	return &Node{Kind: OrElse, First: first, Fallback: fallback}
}

// chain is a tree of depth d: d-1 select_only nodes around a random leaf.
func chain(d int) *Node {
	n := leaf(Random)
	for range d - 1 {
		n = selectOnly("k", IntValue(1), n)
	}
	return n
}

// checkError fails unless err is an *Error at path whose message contains msg.
func checkError(t *testing.T, err error, path, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v; want an *Error at %s containing %q", err, path, msg)
	}
	if e.Path != path || !strings.Contains(e.Message, msg) {
		t.Fatalf("got error %q; want one at %s containing %q", err, path, msg)
	}
}

func TestKindLeaf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind Kind
		want bool
	}{
		{Random, true}, {OldestFirst, true}, {NewestFirst, true}, {CustomPriority, true},
		{SelectOnly, false}, {PreferDistinct, false}, {MaxSimultaneous, false}, {OrElse, false},
		{"fastest", false}, {"", false},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			if got := tc.kind.Leaf(); got != tc.want {
				t.Fatalf("got %s.Leaf() = %v; want %v", tc.kind, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		node *Node
		path string // "" for a valid tree
		msg  string
	}{
		{name: "random", node: leaf(Random)},
		{name: "custom_priority", node: leaf(CustomPriority)},
		{name: "select_only", node: selectOnly("mode", StringValue("preview"), leaf(NewestFirst))},
		{name: "select_only integer zero", node: selectOnly("n", IntValue(0), leaf(Random))},
		{name: "prefer_distinct", node: preferDistinct("c", 1, leaf(OldestFirst))},
		{name: "max_simultaneous", node: maxSimultaneous("c", MaxLimit, leaf(Random))},
		{name: "or_else", node: orElse(leaf(Random), leaf(Random))},
		{name: "depth 8", node: chain(MaxDepth)},

		{name: "zero", node: &Node{}, path: "strategy", msg: "empty node"},
		{name: "unknown kind", node: leaf("fastest"), path: "strategy", msg: `unknown strategy "fastest"; known: random,`},
		{name: "depth 9", node: chain(MaxDepth + 1), path: "strategy" + strings.Repeat(".select_only.then", MaxDepth), msg: "at most 8 levels"},
		{name: "leaf with key", node: &Node{Kind: Random, Key: "k"}, path: "strategy.random.key", msg: "not a parameter of random"},
		{name: "leaf with value", node: &Node{Kind: OldestFirst, Value: StringValue("")}, path: "strategy.oldest_first.value", msg: "not a parameter"},
		{name: "leaf with max", node: &Node{Kind: NewestFirst, Max: 1}, path: "strategy.newest_first.max", msg: "not a parameter"},
		{name: "leaf with then", node: &Node{Kind: CustomPriority, Then: leaf(Random)}, path: "strategy.custom_priority.then", msg: "not a parameter"},
		{name: "select_only with max", node: &Node{Kind: SelectOnly, Key: "k", Max: 1, Then: leaf(Random)}, path: "strategy.select_only.max", msg: "not a parameter"},
		{name: "prefer_distinct with value", node: &Node{Kind: PreferDistinct, Key: "k", Max: 1, Value: IntValue(1), Then: leaf(Random)}, path: "strategy.prefer_distinct.value", msg: "not a parameter"},
		{name: "or_else with key", node: &Node{Kind: OrElse, Key: "k", First: leaf(Random), Fallback: leaf(Random)}, path: "strategy.or_else.key", msg: "not a parameter"},
		{name: "select_only with first", node: &Node{Kind: SelectOnly, Key: "k", First: leaf(Random), Then: leaf(Random)}, path: "strategy.select_only.first", msg: "not a parameter"},
		{name: "max_simultaneous with fallback", node: &Node{Kind: MaxSimultaneous, Key: "k", Max: 1, Fallback: leaf(Random), Then: leaf(Random)}, path: "strategy.max_simultaneous.fallback", msg: "not a parameter"},
		{name: "empty key", node: selectOnly("", IntValue(1), leaf(Random)), path: "strategy.select_only.key", msg: "must be a non-empty string"},
		{name: "NUL in key", node: preferDistinct("a\x00", 1, leaf(Random)), path: "strategy.prefer_distinct.key", msg: "NUL"},
		{name: "key not UTF-8", node: maxSimultaneous("\xff", 1, leaf(Random)), path: "strategy.max_simultaneous.key", msg: "UTF-8"},
		{name: "NUL in value", node: selectOnly("k", StringValue("\x00"), leaf(Random)), path: "strategy.select_only.value", msg: "NUL"},
		{name: "value not UTF-8", node: selectOnly("k", StringValue("\xff"), leaf(Random)), path: "strategy.select_only.value", msg: "UTF-8"},
		{name: "max 0", node: preferDistinct("k", 0, leaf(Random)), path: "strategy.prefer_distinct.max", msg: "must be an integer between 1 and 1000000"},
		{name: "max too big", node: maxSimultaneous("k", MaxLimit+1, leaf(Random)), path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "no then", node: selectOnly("k", IntValue(1), nil), path: "strategy.select_only.then", msg: "required"},
		{name: "no first", node: orElse(nil, leaf(Random)), path: "strategy.or_else.first", msg: "required"},
		{name: "no fallback", node: orElse(leaf(Random), nil), path: "strategy.or_else.fallback", msg: "required"},
		{name: "bad child", node: orElse(leaf(Random), preferDistinct("k", -1, leaf(Random))), path: "strategy.or_else.fallback.prefer_distinct.max", msg: "between 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.node.Validate()
			if tc.path == "" {
				if err != nil {
					t.Fatalf("got %v; want a valid tree", err)
				}
				return
			}
			checkError(t, err, tc.path, tc.msg)
		})
	}
}

func TestEqual(t *testing.T) {
	t.Parallel()
	tree := func() *Node {
		return orElse(selectOnly("mode", StringValue("preview"), leaf(Random)), maxSimultaneous("c", 5, leaf(OldestFirst)))
	}
	for _, tc := range []struct {
		name string
		a, b *Node
		want bool
	}{
		{name: "same tree, other pointers", a: tree(), b: tree(), want: true},
		{name: "zero", a: &Node{}, b: &Node{}, want: true},
		{name: "kind", a: leaf(Random), b: leaf(OldestFirst)},
		{name: "key", a: preferDistinct("a", 1, leaf(Random)), b: preferDistinct("b", 1, leaf(Random))},
		{name: "42 and \"42\"", a: selectOnly("k", IntValue(42), leaf(Random)), b: selectOnly("k", StringValue("42"), leaf(Random))},
		{name: "max", a: preferDistinct("a", 1, leaf(Random)), b: preferDistinct("a", 2, leaf(Random))},
		{name: "then", a: preferDistinct("a", 1, leaf(Random)), b: preferDistinct("a", 1, leaf(NewestFirst))},
		{name: "nil then", a: preferDistinct("a", 1, leaf(Random)), b: preferDistinct("a", 1, nil)},
		{name: "first", a: orElse(leaf(Random), leaf(Random)), b: orElse(leaf(CustomPriority), leaf(Random))},
		{name: "fallback", a: orElse(leaf(Random), leaf(Random)), b: orElse(leaf(Random), leaf(CustomPriority))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.a.Equal(*tc.b); got != tc.want {
				t.Fatalf("got %v.Equal(%v) = %v; want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Equal(*tc.a); got != tc.want {
				t.Fatalf("got %v.Equal(%v) = %v; want %v", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

func TestDepthWalkKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		node  *Node
		depth int
		paths []string
		keys  []string
	}{
		{name: "leaf", node: leaf(Random), depth: 1, paths: []string{"strategy"}},
		{
			name: "select_only", node: selectOnly("mode", StringValue("preview"), leaf(Random)), depth: 2,
			paths: []string{"strategy", "strategy.select_only.then"}, keys: []string{"mode"},
		},
		{
			name:  "or_else, deeper on the fallback side",
			node:  orElse(leaf(Random), maxSimultaneous("company_id", 5, preferDistinct("account", 1, leaf(OldestFirst)))),
			depth: 4,
			paths: []string{
				"strategy",
				"strategy.or_else.first",
				"strategy.or_else.fallback",
				"strategy.or_else.fallback.max_simultaneous.then",
				"strategy.or_else.fallback.max_simultaneous.then.prefer_distinct.then",
			},
			keys: []string{"account", "company_id"},
		},
		{
			name:  "repeated keys",
			node:  orElse(selectOnly("b", IntValue(1), preferDistinct("a", 1, leaf(Random))), maxSimultaneous("b", 2, leaf(Random))),
			depth: 4,
			paths: []string{
				"strategy",
				"strategy.or_else.first",
				"strategy.or_else.first.select_only.then",
				"strategy.or_else.first.select_only.then.prefer_distinct.then",
				"strategy.or_else.fallback",
				"strategy.or_else.fallback.max_simultaneous.then",
			},
			keys: []string{"a", "b"},
		},
		{name: "depth 8", node: chain(8), depth: 8, keys: []string{"k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.node.Depth(); got != tc.depth {
				t.Fatalf("got depth %d; want %d", got, tc.depth)
			}
			if tc.paths != nil {
				var paths []string
				tc.node.Walk(func(path string, n Node) {
					paths = append(paths, path)
					if path == "strategy" && !n.Equal(*tc.node) {
						t.Errorf("got root %v; want %v", n, tc.node)
					}
				})
				if !slices.Equal(paths, tc.paths) {
					t.Fatalf("got paths %q; want %q", paths, tc.paths)
				}
			}
			if got := tc.node.Keys(); !slices.Equal(got, tc.keys) {
				t.Fatalf("got keys %q; want %q", got, tc.keys)
			}
		})
	}
}

// TestWalkMatchesErrors checks that Walk's paths are those of validation errors.
func TestWalkMatchesErrors(t *testing.T) {
	t.Parallel()
	bad := preferDistinct("k", 0, leaf(Random))
	tree := orElse(leaf(Random), selectOnly("k", IntValue(1), bad))
	var badPath string
	tree.Walk(func(path string, n Node) {
		if n.Kind == PreferDistinct {
			badPath = path
		}
	})
	checkError(t, tree.Validate(), badPath+".prefer_distinct.max", "between 1")
}
