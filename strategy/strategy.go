// Package strategy is the strategy tree of DESIGN.md §5: its JSON form (json.go), its
// compact text form for the CLI and the docs (text.go), their validation, and the small
// walks over a tree that the queuer needs to run it.
//
// A tree is a Node value; its children hang from pointers. The parsers only return valid
// trees, in which every pointer a Kind uses is set and every field it does not use is
// zero, so two trees are equal when Equal says so, and both text forms round-trip.
package strategy

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind names a building block.
type Kind string

// The building blocks. The first four are leaves; the others have children.
const (
	Random          Kind = "random"           // fair: cut the deck at a random offset
	OldestFirst     Kind = "oldest_first"     // FIFO by submission
	NewestFirst     Kind = "newest_first"     // LIFO by submission
	CustomPriority  Kind = "custom_priority"  // submission priority high→low, then oldest
	SelectOnly      Kind = "select_only"      // Key = Value, then Then
	PreferDistinct  Kind = "prefer_distinct"  // soft: prefer values of Key with fewer than Max in flight
	MaxSimultaneous Kind = "max_simultaneous" // hard: at most Max in flight per value of Key
	OrElse          Kind = "or_else"          // First, filled up from Fallback
	RateLimit       Kind = "rate_limit"       // hard: at most PerSecond per value of Key on average, Burst at once
	WeightedFair    Kind = "weighted_fair"    // shares per value of Key in proportion to Weights
)

// Kinds lists every building block, leaves first, in the order of DESIGN.md §5.
var Kinds = []Kind{Random, OldestFirst, NewestFirst, CustomPriority, SelectOnly, PreferDistinct, MaxSimultaneous, OrElse, RateLimit, WeightedFair}

// Leaf reports whether the block has no children (and no parameters).
func (k Kind) Leaf() bool {
	switch k {
	case Random, OldestFirst, NewestFirst, CustomPriority:
		return true
	}
	return false
}

// known reports whether k is one of Kinds.
func (k Kind) known() bool { return slices.Contains(Kinds, k) }

// knownKinds is the list of names in error messages.
var knownKinds = func() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}()

// Limits of a tree.
const (
	// MaxDepth is the deepest tree allowed, counting every node on the longest path from
	// the root to a leaf, the leaf included: "random" has depth 1.
	MaxDepth = 8
	// MaxLimit is the largest Max of prefer_distinct and max_simultaneous; the smallest is 1.
	MaxLimit = 1_000_000
	// MaxRate is the largest per_second of rate_limit; it must be more than 0. Its burst
	// is 1..MaxLimit.
	MaxRate = 1_000_000
	// MaxWeight is the largest weight of weighted_fair (in Weights or DefaultWeight); the
	// smallest is 1.
	MaxWeight = 1_000_000
	// MaxWeights is the most values weighted_fair may name in Weights.
	MaxWeights = 1_000
)

// Default is the strategy of a request that names none.
var Default = Node{Kind: Random}

// Node is one node of a strategy tree. Which fields a node uses depends on its Kind:
//
//	random, oldest_first, newest_first, custom_priority: none
//	select_only:                        Key, Value, Then
//	prefer_distinct, max_simultaneous:  Key, Max, Then
//	or_else:                            First, Fallback
//	rate_limit:                         Key, PerSecond, Burst, Then
//	weighted_fair:                      Key, Weights, DefaultWeight, Then
//
// The zero Node names no strategy: it marshals to JSON null, which Parse reads as Default.
type Node struct {
	Kind  Kind
	Key   string // a strategic metadata key: non-empty, valid UTF-8, no NUL
	Value Value  // the value select_only keeps
	Max   int    // in flight per value of Key: 1..MaxLimit
	// PerSecond is rate_limit's rate per value of Key, in chunks per second: more than 0,
	// at most MaxRate; Burst is how many it hands out at once after a quiet spell, 1..MaxLimit.
	PerSecond float64
	Burst     int
	// Weights are weighted_fair's weights of some values of Key (at most MaxWeights, each
	// value once, sorted by the value's canonical JSON); DefaultWeight is the weight of
	// every other value. Each weight is 1..MaxWeight.
	Weights       []Weight
	DefaultWeight int
	// Then orders what select_only, prefer_distinct and max_simultaneous let through. It
	// is required in a Node; the parsers fill in random when the input leaves it out.
	Then *Node
	// First is tried first by or_else; Fallback fills up what it leaves.
	First, Fallback *Node
}

// Weight is the weight of one value in a weighted_fair node.
type Weight struct {
	Value  Value
	Weight int
}

// Error is a validation error; Path names the offending node or field
// ("strategy.or_else.first.select_only.key").
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string { return e.Path + ": " + e.Message }

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// child is one child of a node: the name of its field in the JSON form and the node.
type child struct {
	field string
	node  *Node
}

// children returns the child fields that n's Kind uses, set or not, in JSON order.
func (n Node) children() []child {
	switch n.Kind {
	case SelectOnly, PreferDistinct, MaxSimultaneous, RateLimit, WeightedFair:
		return []child{{"then", n.Then}}
	case OrElse:
		return []child{{"first", n.First}, {"fallback", n.Fallback}}
	}
	return nil
}

// childPath is the path of a child or a parameter of the node at path.
func (n Node) childPath(path, field string) string {
	return path + "." + string(n.Kind) + "." + field
}

// Validate checks a tree built in Go; the parsers return only trees that pass it. Errors
// are *Error with paths rooted at "strategy".
func (n Node) Validate() error { return n.validate("strategy", 1) }

func (n Node) validate(path string, depth int) error {
	if err := checkDepth(path, depth); err != nil {
		return err
	}
	switch {
	case n.Kind == "":
		return errorf(path, "empty node: no Kind")
	case !n.Kind.known():
		return errorf(path, "unknown strategy %s; known: %s", quote(string(n.Kind)), knownKinds)
	}
	usesKey := n.Kind == SelectOnly || n.Kind == PreferDistinct || n.Kind == MaxSimultaneous || n.Kind == RateLimit ||
		n.Kind == WeightedFair
	for _, stray := range []struct {
		field string
		set   bool
		used  bool
	}{
		{"key", n.Key != "", usesKey},
		{"value", n.Value != (Value{}), n.Kind == SelectOnly},
		{"max", n.Max != 0, n.Kind == PreferDistinct || n.Kind == MaxSimultaneous},
		{"per_second", n.PerSecond != 0, n.Kind == RateLimit},
		{"burst", n.Burst != 0, n.Kind == RateLimit},
		{"weights", len(n.Weights) > 0, n.Kind == WeightedFair},
		{"default_weight", n.DefaultWeight != 0, n.Kind == WeightedFair},
		{"then", n.Then != nil, usesKey},
		{"first", n.First != nil, n.Kind == OrElse},
		{"fallback", n.Fallback != nil, n.Kind == OrElse},
	} {
		if stray.set && !stray.used {
			return errorf(n.childPath(path, stray.field), "not a parameter of %s", n.Kind)
		}
	}
	if usesKey {
		if err := checkKey(n.childPath(path, "key"), n.Key); err != nil {
			return err
		}
	}
	switch n.Kind {
	case SelectOnly:
		if err := checkValue(n.Value, n.childPath(path, "value")); err != nil {
			return err
		}
	case PreferDistinct, MaxSimultaneous:
		if err := checkMax(n.childPath(path, "max"), n.Max); err != nil {
			return err
		}
	case RateLimit:
		if err := checkRate(n.childPath(path, "per_second"), n.PerSecond); err != nil {
			return err
		}
		if err := checkBurst(n.childPath(path, "burst"), n.Burst); err != nil {
			return err
		}
	case WeightedFair:
		if err := checkWeights(n.childPath(path, "weights"), n.Weights); err != nil {
			return err
		}
		if err := checkWeight(n.childPath(path, "default_weight"), n.DefaultWeight); err != nil {
			return err
		}
	}
	for _, c := range n.children() {
		p := n.childPath(path, c.field)
		if c.node == nil {
			return errorf(p, "required")
		}
		if err := c.node.validate(p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkDepth fails when the node at path, depth nodes from the root, goes too deep.
func checkDepth(path string, depth int) error {
	if depth > MaxDepth {
		return errorf(path, "nested too deep: a strategy may have at most %d levels, counting every node, the leaf included", MaxDepth)
	}
	return nil
}

// checkKey checks a strategic metadata key as the submissions API does.
func checkKey(path, key string) error {
	switch {
	case key == "":
		return errorf(path, "must be a non-empty string")
	case strings.ContainsRune(key, 0):
		return errorf(path, "must not contain NUL characters (\\u0000)")
	case !utf8.ValidString(key):
		return errorf(path, "must be valid UTF-8")
	}
	return nil
}

// maxMessage is the error message of a bad max, in both forms.
var maxMessage = fmt.Sprintf("must be an integer between 1 and %d", MaxLimit)

func checkMax(path string, m int) error {
	if m < 1 || m > MaxLimit {
		return errorf(path, "%s", maxMessage)
	}
	return nil
}

// rateMessage and burstMessage are the error messages of a bad per_second and burst, in
// both forms.
var (
	rateMessage  = fmt.Sprintf("must be a number of chunks per second more than 0 and at most %d", MaxRate)
	burstMessage = fmt.Sprintf("must be an integer between 1 and %d", MaxLimit)
)

func checkRate(path string, r float64) error {
	if !(r > 0 && r <= MaxRate) { // NaN too
		return errorf(path, "%s", rateMessage)
	}
	return nil
}

func checkBurst(path string, b int) error {
	if b < 1 || b > MaxLimit {
		return errorf(path, "%s", burstMessage)
	}
	return nil
}

// weightMessage is the error message of a bad weight, in both forms.
var weightMessage = fmt.Sprintf("must be an integer between 1 and %d", MaxWeight)

func checkWeight(path string, w int) error {
	if w < 1 || w > MaxWeight {
		return errorf(path, "%s", weightMessage)
	}
	return nil
}

// checkWeights checks weighted_fair's weights: at most MaxWeights, each value once and
// valid, in the canonical order, each weight in range. A weight's path names its value
// ("strategy.weighted_fair.weights.acme").
func checkWeights(path string, ws []Weight) error {
	if len(ws) > MaxWeights {
		return errorf(path, "names %d values; at most %d", len(ws), MaxWeights)
	}
	for i, w := range ws {
		at := path + "." + valueText(w.Value)
		if err := checkValue(w.Value, at); err != nil {
			return err
		}
		if err := checkWeight(at, w.Weight); err != nil {
			return err
		}
		if i > 0 && string(valueJSON(ws[i-1].Value)) >= string(valueJSON(w.Value)) {
			return errorf(at, "weights must name each value once, sorted by the value's JSON text")
		}
	}
	return nil
}

// sortWeights puts weights in the canonical order; it reports a value named twice.
func sortWeights(ws []Weight) (dup Value, ok bool) {
	slices.SortFunc(ws, func(a, b Weight) int { return strings.Compare(string(valueJSON(a.Value)), string(valueJSON(b.Value))) })
	for i := 1; i < len(ws); i++ {
		if ws[i-1].Value == ws[i].Value {
			return ws[i].Value, false
		}
	}
	return Value{}, true
}

// WeightOf is a weighted_fair node's weight of the value whose canonical JSON text is
// value (as a submission's strategic metadata holds it).
func (n Node) WeightOf(value string) int {
	i, ok := slices.BinarySearchFunc(n.Weights, value, func(w Weight, v string) int { return strings.Compare(string(valueJSON(w.Value)), v) })
	if ok {
		return n.Weights[i].Weight
	}
	return n.DefaultWeight
}

// WeightedValues returns the canonical JSON text of each value a weighted_fair node names
// in Weights, in its order.
func (n Node) WeightedValues() []string {
	out := make([]string, len(n.Weights))
	for i, w := range n.Weights {
		out[i] = string(valueJSON(w.Value))
	}
	return out
}

// ValueFilter is the filter that keeps the submissions whose strategic metadata has
// key = the value whose canonical JSON text is value, as a select_only of it does.
func ValueFilter(key, value string) Filter { return Filter{Key: key, Value: []byte(value)} }

// Equal reports whether two trees are the same, following the pointers.
func (n Node) Equal(m Node) bool {
	if n.Kind != m.Kind || n.Key != m.Key || n.Value != m.Value || n.Max != m.Max ||
		n.PerSecond != m.PerSecond || n.Burst != m.Burst || n.DefaultWeight != m.DefaultWeight ||
		!slices.Equal(n.Weights, m.Weights) {
		return false
	}
	eq := func(a, b *Node) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Equal(*b)
	}
	return eq(n.Then, m.Then) && eq(n.First, m.First) && eq(n.Fallback, m.Fallback)
}

// Depth is the number of nodes on the longest path from n to a leaf, both included.
func (n Node) Depth() int {
	d := 0
	for _, c := range n.children() {
		if c.node != nil {
			d = max(d, c.node.Depth())
		}
	}
	return d + 1
}

// Walk calls fn for n and every node below it, parents before children and first before
// fallback, with the node's path as in errors ("strategy", "strategy.or_else.first", …).
func (n Node) Walk(fn func(path string, n Node)) { n.walk("strategy", fn) }

func (n Node) walk(path string, fn func(string, Node)) {
	fn(path, n)
	for _, c := range n.children() {
		if c.node != nil {
			c.node.walk(n.childPath(path, c.field), fn)
		}
	}
}

// Keys returns the strategic metadata keys the tree uses, sorted, each once.
func (n Node) Keys() []string {
	var keys []string
	n.Walk(func(_ string, m Node) {
		if m.Key != "" {
			keys = append(keys, m.Key)
		}
	})
	slices.Sort(keys)
	return slices.Compact(keys)
}
