package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// jsonChain is the JSON form of chain(d), with then written out.
func jsonChain(d int) string {
	return strings.Repeat(`{"select_only": {"key": "k", "value": 1, "then": `, d-1) + `"random"` + strings.Repeat(`}}`, d-1)
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want *Node
	}{
		{name: "absent", in: ``, want: leaf(Random)},
		{name: "spaces", in: " \n ", want: leaf(Random)},
		{name: "null", in: `null`, want: leaf(Random)},
		{name: "random", in: `"random"`, want: leaf(Random)},
		{name: "oldest_first", in: `"oldest_first"`, want: leaf(OldestFirst)},
		{name: "newest_first", in: ` "newest_first" `, want: leaf(NewestFirst)},
		{name: "custom_priority", in: `"custom_priority"`, want: leaf(CustomPriority)},
		{
			name: "select_only string",
			in:   `{"select_only": {"key": "mode", "value": "preview", "then": "oldest_first"}}`,
			want: selectOnly("mode", StringValue("preview"), leaf(OldestFirst)),
		},
		{
			name: "select_only integer",
			in:   `{"select_only": {"key": "company_id", "value": 42, "then": "custom_priority"}}`,
			want: selectOnly("company_id", IntValue(42), leaf(CustomPriority)),
		},
		{
			name: "select_only string of digits",
			in:   `{"select_only": {"key": "company_id", "value": "42", "then": "random"}}`,
			want: selectOnly("company_id", StringValue("42"), leaf(Random)),
		},
		{
			name: "select_only largest integer",
			in:   `{"select_only": {"key": "n", "value": -9223372036854775808, "then": "random"}}`,
			want: selectOnly("n", IntValue(-1<<63), leaf(Random)),
		},
		{
			name: "then left out is random",
			in:   `{"select_only": {"value": "preview", "key": "mode"}}`,
			want: selectOnly("mode", StringValue("preview"), leaf(Random)),
		},
		{
			name: "then null is random",
			in:   `{"prefer_distinct": {"key": "c", "max": 1, "then": null}}`,
			want: preferDistinct("c", 1, leaf(Random)),
		},
		{
			name: "prefer_distinct",
			in:   `{"prefer_distinct": {"key": "company_id", "max": 1, "then": "newest_first"}}`,
			want: preferDistinct("company_id", 1, leaf(NewestFirst)),
		},
		{
			name: "max_simultaneous",
			in:   `{"max_simultaneous": {"key": "company_id", "max": 1000000, "then": "random"}}`,
			want: maxSimultaneous("company_id", 1000000, leaf(Random)),
		},
		{
			name: "or_else",
			in:   `{"or_else": {"first": {"select_only": {"key": "mode", "value": "preview", "then": "random"}}, "fallback": "random"}}`,
			want: orElse(selectOnly("mode", StringValue("preview"), leaf(Random)), leaf(Random)),
		},
		{
			name: "key with spaces and unicode",
			in:   `{"max_simultaneous": {"key": "société id", "max": 5}}`,
			want: maxSimultaneous("société id", 5, leaf(Random)),
		},
		{name: "depth 8", in: jsonChain(8), want: chain(8)},
		{
			name: "rate_limit",
			in:   `{"rate_limit": {"key": "company_id", "per_second": 10, "burst": 20, "then": "oldest_first"}}`,
			want: rateLimit("company_id", 10, 20, leaf(OldestFirst)),
		},
		{
			name: "rate_limit fractional, of @tenant, then left out",
			in:   `{"rate_limit": {"key": "@tenant", "per_second": 0.5, "burst": 1}}`,
			want: rateLimit("@tenant", 0.5, 1, leaf(Random)),
		},
		{
			name: "rate_limit at the bounds",
			in:   `{"rate_limit": {"key": "k", "per_second": 1e6, "burst": 1000000}}`,
			want: rateLimit("k", 1e6, 1000000, leaf(Random)),
		},
		{
			name: "weighted_fair",
			in:   `{"weighted_fair": {"key": "@tenant", "weights": {"globex": 1, "acme": 3}, "default_weight": 2, "then": "oldest_first"}}`,
			want: weightedFair("@tenant", []Weight{{StringValue("acme"), 3}, {StringValue("globex"), 1}}, 2, leaf(OldestFirst)),
		},
		{
			name: "weighted_fair integer values, default weight and then left out",
			in:   `{"weighted_fair": {"key": "company_id", "weights": {"42": 5, "-7": 1}}}`,
			want: weightedFair("company_id", []Weight{{IntValue(-7), 1}, {IntValue(42), 5}}, 1, leaf(Random)),
		},
		{
			name: "weighted_fair with no weights",
			in:   `{"weighted_fair": {"key": "k", "weights": {}, "default_weight": 1}}`,
			want: weightedFair("k", []Weight{}, 1, leaf(Random)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(json.RawMessage(tc.in), "strategy")
			if err != nil {
				t.Fatalf("got error %v; want %v", err, tc.want)
			}
			if !got.Equal(*tc.want) {
				t.Fatalf("got %v; want %v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("got an invalid tree: %v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		path string
		msg  string
	}{
		{name: "not JSON", in: `{"random"`, path: "strategy", msg: "not valid JSON"},
		{name: "trailing data", in: `"random" "random"`, path: "strategy", msg: "not valid JSON"},
		{name: "unknown name", in: `"fastest"`, path: "strategy", msg: `unknown strategy "fastest"; known: random, oldest_first, newest_first, custom_priority, select_only, prefer_distinct, max_simultaneous, or_else`},
		{name: "long name abbreviated", in: `"` + strings.Repeat("b", 100) + `"`, path: "strategy", msg: `unknown strategy "` + strings.Repeat("b", 40) + `…"; known`},
		{name: "text form in a JSON string", in: `"or_else(select_only(mode=preview), random)"`, path: "strategy", msg: `that is the text form, whose JSON form is {"or_else":{"first":{"select_only":{"key":"mode","value":"preview","then":"random"}},"fallback":"random"}}`},
		{name: "name needing parameters", in: `"select_only"`, path: "strategy", msg: `select_only takes parameters: {"select_only": {"key": …, "value": …, "then": …}}`},
		{name: "number", in: `42`, path: "strategy", msg: `must be a strategy name such as "random" or an object`},
		{name: "array", in: `["random"]`, path: "strategy", msg: "not [\"random\"]"},
		{name: "empty object", in: `{}`, path: "strategy", msg: "an empty object names no strategy"},
		{name: "two names", in: `{"select_only": {}, "or_else": {}}`, path: "strategy", msg: `must name exactly one strategy; got 2 keys: "select_only", "or_else"`},
		{name: "repeated name", in: `{"or_else": {}, "or_else": {}}`, path: "strategy.or_else", msg: "appears more than once"},
		{name: "unknown object", in: `{"whatever": {}}`, path: "strategy.whatever", msg: `unknown strategy "whatever"`},
		{name: "leaf as object", in: `{"random": {}}`, path: "strategy.random", msg: `random takes no parameters: write "random"`},
		{name: "parameters not an object", in: `{"prefer_distinct": ["k", 1]}`, path: "strategy.prefer_distinct", msg: `must be an object: {"prefer_distinct": {"key": …, "max": …, "then": …}}`},
		{name: "parameters null", in: `{"or_else": null}`, path: "strategy.or_else", msg: "must be an object"},
		{name: "unknown field", in: `{"select_only": {"key": "k", "value": 1, "when": 2}}`, path: "strategy.select_only", msg: `unknown field "when"; select_only takes key, value, then`},
		{name: "unknown fields", in: `{"or_else": {"first": "random", "fallback": "random", "b": 1, "a": 2}}`, path: "strategy.or_else", msg: `unknown fields "b", "a"; or_else takes first, fallback`},
		{name: "field of another kind", in: `{"prefer_distinct": {"key": "k", "max": 1, "value": 1}}`, path: "strategy.prefer_distinct", msg: `unknown field "value"`},
		{name: "repeated field", in: `{"select_only": {"key": "a", "key": "b", "value": 1}}`, path: "strategy.select_only.key", msg: "appears more than once"},
		{name: "no key", in: `{"select_only": {"value": 1}}`, path: "strategy.select_only.key", msg: "required"},
		{name: "null key", in: `{"prefer_distinct": {"key": null, "max": 1}}`, path: "strategy.prefer_distinct.key", msg: "required"},
		{name: "key not a string", in: `{"max_simultaneous": {"key": 7, "max": 1}}`, path: "strategy.max_simultaneous.key", msg: "must be a non-empty string"},
		{name: "empty key", in: `{"select_only": {"key": "", "value": 1}}`, path: "strategy.select_only.key", msg: "must be a non-empty string"},
		{name: "NUL in key", in: `{"select_only": {"key": "a\u0000", "value": 1}}`, path: "strategy.select_only.key", msg: "NUL"},
		{name: "no value", in: `{"select_only": {"key": "k"}}`, path: "strategy.select_only.value", msg: "required"},
		{name: "value null", in: `{"select_only": {"key": "k", "value": null}}`, path: "strategy.select_only.value", msg: "required"},
		{name: "value fraction", in: `{"select_only": {"key": "k", "value": 4.5}}`, path: "strategy.select_only.value", msg: "must be an integer or a string, not 4.5"},
		{name: "value exponent", in: `{"select_only": {"key": "k", "value": 1e3}}`, path: "strategy.select_only.value", msg: "must be an integer or a string"},
		{name: "value out of range", in: `{"select_only": {"key": "k", "value": 9223372036854775808}}`, path: "strategy.select_only.value", msg: "out of the int64 range"},
		{name: "value bool", in: `{"select_only": {"key": "k", "value": true}}`, path: "strategy.select_only.value", msg: "must be an integer or a string, not true"},
		{name: "value object", in: `{"select_only": {"key": "k", "value": {}}}`, path: "strategy.select_only.value", msg: "must be an integer or a string"},
		{name: "NUL in value", in: `{"select_only": {"key": "k", "value": "\u0000"}}`, path: "strategy.select_only.value", msg: "NUL"},
		{name: "no max", in: `{"prefer_distinct": {"key": "k"}}`, path: "strategy.prefer_distinct.max", msg: "required"},
		{name: "max 0", in: `{"prefer_distinct": {"key": "k", "max": 0}}`, path: "strategy.prefer_distinct.max", msg: "must be an integer between 1 and 1000000"},
		{name: "max too big", in: `{"max_simultaneous": {"key": "k", "max": 1000001}}`, path: "strategy.max_simultaneous.max", msg: "must be an integer between 1 and 1000000"},
		{name: "max huge", in: `{"max_simultaneous": {"key": "k", "max": 99999999999999999999999}}`, path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "max fraction", in: `{"max_simultaneous": {"key": "k", "max": 1.5}}`, path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "max string", in: `{"max_simultaneous": {"key": "k", "max": "5"}}`, path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "weight zero", in: `{"weighted_fair": {"key": "k", "weights": {"acme": 0}}}`, path: "strategy.weighted_fair.weights.acme", msg: "between 1 and 1000000"},
		{name: "weight negative", in: `{"weighted_fair": {"key": "k", "weights": {"acme": -3}}}`, path: "strategy.weighted_fair.weights.acme", msg: "between 1 and 1000000"},
		{name: "weight fraction", in: `{"weighted_fair": {"key": "k", "weights": {"acme": 1.5}}}`, path: "strategy.weighted_fair.weights.acme", msg: "between 1 and 1000000"},
		{name: "weight string", in: `{"weighted_fair": {"key": "k", "weights": {"acme": "3"}}}`, path: "strategy.weighted_fair.weights.acme", msg: "between 1 and 1000000"},
		{name: "weights not an object", in: `{"weighted_fair": {"key": "k", "weights": [3]}}`, path: "strategy.weighted_fair.weights", msg: "must be an object"},
		{name: "weights missing", in: `{"weighted_fair": {"key": "k"}}`, path: "strategy.weighted_fair.weights", msg: "required"},
		{name: "weights repeated", in: `{"weighted_fair": {"key": "k", "weights": {"a": 1, "a": 2}}}`, path: "strategy.weighted_fair.weights.a", msg: "more than once"},
		{name: "weights repeated as integer", in: `{"weighted_fair": {"key": "k", "weights": {"7": 1, "07": 2}}}`, path: "strategy.weighted_fair.weights.7", msg: "more than once"},
		{name: "default weight zero", in: `{"weighted_fair": {"key": "k", "weights": {}, "default_weight": 0}}`, path: "strategy.weighted_fair.default_weight", msg: "between 1 and 1000000"},
		{name: "default weight over", in: `{"weighted_fair": {"key": "k", "weights": {}, "default_weight": 1000001}}`, path: "strategy.weighted_fair.default_weight", msg: "between 1 and 1000000"},
		{name: "weights over 1000", in: `{"weighted_fair": {"key": "k", "weights": {` + manyWeights(1001) + `}}}`, path: "strategy.weighted_fair.weights", msg: "names 1001 values; at most 1000"},
		{
			name: "weighted_fair nested",
			in:   `{"or_else": {"first": "random", "fallback": {"weighted_fair": {"key": "k", "weights": {"x": 0}}}}}`,
			path: "strategy.or_else.fallback.weighted_fair.weights.x", msg: "between 1",
		},
		{name: "rate zero", in: `{"rate_limit": {"key": "k", "per_second": 0, "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "more than 0 and at most 1000000"},
		{name: "rate negative", in: `{"rate_limit": {"key": "k", "per_second": -1, "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "more than 0"},
		{name: "rate over 10^6", in: `{"rate_limit": {"key": "k", "per_second": 1000000.5, "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "at most 1000000"},
		{name: "rate huge", in: `{"rate_limit": {"key": "k", "per_second": 1e400, "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "at most 1000000"},
		{name: "rate string", in: `{"rate_limit": {"key": "k", "per_second": "10", "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "more than 0"},
		{name: "rate missing", in: `{"rate_limit": {"key": "k", "burst": 1}}`, path: "strategy.rate_limit.per_second", msg: "required"},
		{name: "burst zero", in: `{"rate_limit": {"key": "k", "per_second": 1, "burst": 0}}`, path: "strategy.rate_limit.burst", msg: "between 1 and 1000000"},
		{name: "burst negative", in: `{"rate_limit": {"key": "k", "per_second": 1, "burst": -3}}`, path: "strategy.rate_limit.burst", msg: "between 1 and 1000000"},
		{name: "burst fraction", in: `{"rate_limit": {"key": "k", "per_second": 1, "burst": 2.5}}`, path: "strategy.rate_limit.burst", msg: "between 1 and 1000000"},
		{name: "burst missing", in: `{"rate_limit": {"key": "k", "per_second": 1}}`, path: "strategy.rate_limit.burst", msg: "required"},
		{name: "rate_limit key missing", in: `{"rate_limit": {"per_second": 1, "burst": 1}}`, path: "strategy.rate_limit.key", msg: "required"},
		{name: "rate_limit with max", in: `{"rate_limit": {"key": "k", "per_second": 1, "burst": 1, "max": 2}}`, path: "strategy.rate_limit", msg: `unknown field "max"`},
		{
			name: "rate_limit nested",
			in:   `{"or_else": {"first": "random", "fallback": {"rate_limit": {"key": "k", "per_second": 1, "burst": 0}}}}`,
			path: "strategy.or_else.fallback.rate_limit.burst", msg: "between 1",
		},
		{name: "bad then", in: `{"select_only": {"key": "k", "value": 1, "then": "fastest"}}`, path: "strategy.select_only.then", msg: `unknown strategy "fastest"`},
		{name: "no first", in: `{"or_else": {"fallback": "random"}}`, path: "strategy.or_else.first", msg: "required"},
		{name: "no fallback", in: `{"or_else": {"first": "random"}}`, path: "strategy.or_else.fallback", msg: "required"},
		{name: "fallback null", in: `{"or_else": {"first": "random", "fallback": null}}`, path: "strategy.or_else.fallback", msg: "required"},
		{
			name: "deep error path",
			in:   `{"or_else": {"first": {"select_only": {"value": 1, "then": "random"}}, "fallback": "random"}}`,
			path: "strategy.or_else.first.select_only.key", msg: "required",
		},
		{
			name: "deep error in fallback",
			in:   `{"or_else": {"first": "random", "fallback": {"max_simultaneous": {"key": "k", "max": 0}}}}`,
			path: "strategy.or_else.fallback.max_simultaneous.max", msg: "between 1",
		},
		{
			name: "depth 9",
			in:   jsonChain(9),
			path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at most 8 levels, counting every node, the leaf included",
		},
		{
			name: "depth 9 by an implied then",
			in:   strings.Repeat(`{"select_only": {"key": "k", "value": 1, "then": `, 7) + `{"select_only": {"key": "k", "value": 1}}` + strings.Repeat(`}}`, 7),
			path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at most 8 levels",
		},
		{
			name: "very deep",
			in:   jsonChain(1000),
			path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at most 8 levels",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(json.RawMessage(tc.in), "strategy")
			checkError(t, err, tc.path, tc.msg)
			if !got.Equal(Node{}) {
				t.Fatalf("got %v with the error; want the zero Node", got)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	t.Parallel()
	_, err := Parse(json.RawMessage(`{"or_else": {"first": "random"}}`), "body.strategy")
	checkError(t, err, "body.strategy.or_else.fallback", "required")
}

func TestMarshalJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		node *Node
		want string
	}{
		{name: "zero", node: &Node{}, want: `null`},
		{name: "random", node: leaf(Random), want: `"random"`},
		{name: "custom_priority", node: leaf(CustomPriority), want: `"custom_priority"`},
		{name: "select_only", node: selectOnly("mode", StringValue("pre<view>"), leaf(OldestFirst)), want: `{"select_only":{"key":"mode","value":"pre<view>","then":"oldest_first"}}`},
		{name: "select_only integer", node: selectOnly("company_id", IntValue(42), leaf(Random)), want: `{"select_only":{"key":"company_id","value":42,"then":"random"}}`},
		{name: "prefer_distinct", node: preferDistinct("company_id", 1, leaf(Random)), want: `{"prefer_distinct":{"key":"company_id","max":1,"then":"random"}}`},
		{name: "max_simultaneous", node: maxSimultaneous("a \"b\"", 5, leaf(NewestFirst)), want: `{"max_simultaneous":{"key":"a \"b\"","max":5,"then":"newest_first"}}`},
		{
			name: "or_else",
			node: orElse(selectOnly("mode", StringValue("preview"), leaf(Random)), leaf(Random)),
			want: `{"or_else":{"first":{"select_only":{"key":"mode","value":"preview","then":"random"}},"fallback":"random"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := tc.node.MarshalJSON()
			if err != nil || string(b) != tc.want {
				t.Fatalf("got %s, %v; want %s", b, err, tc.want)
			}
			// encoding/json escapes <, > and & in what MarshalJSON returns.
			var escaped bytes.Buffer
			json.HTMLEscape(&escaped, []byte(tc.want))
			for _, v := range []any{tc.node, *tc.node} {
				b, err := json.Marshal(v)
				if err != nil || string(b) != escaped.String() {
					t.Fatalf("got json.Marshal(%T) %s, %v; want %s", v, b, err, escaped.String())
				}
			}
			back, err := Parse(b, "strategy")
			want := *tc.node
			if want.Equal(Node{}) {
				want = Default
			}
			if err != nil || !back.Equal(want) {
				t.Fatalf("got %v, %v from Parse(%s); want %v", back, err, b, want)
			}
		})
	}
}

func TestMarshalJSONInvalid(t *testing.T) {
	t.Parallel()
	_, err := json.Marshal(orElse(leaf(Random), nil))
	if err == nil || !strings.Contains(err.Error(), "strategy.or_else.fallback: required") {
		t.Fatalf("got %v; want the validation error", err)
	}
}

func TestUnmarshalJSON(t *testing.T) {
	t.Parallel()
	type request struct {
		Strategy Node `json:"strategy"`
	}
	for _, tc := range []struct {
		name string
		in   string
		want Node
		err  string
	}{
		{name: "absent", in: `{}`, want: Node{}},
		{name: "null", in: `{"strategy": null}`, want: Node{}},
		{name: "leaf", in: `{"strategy": "newest_first"}`, want: *leaf(NewestFirst)},
		{name: "tree", in: `{"strategy": {"prefer_distinct": {"key": "k", "max": 3}}}`, want: *preferDistinct("k", 3, leaf(Random))},
		{name: "error", in: `{"strategy": {"prefer_distinct": {"key": "k"}}}`, err: "strategy.prefer_distinct.max: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r request
			err := json.Unmarshal([]byte(tc.in), &r)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v; want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !r.Strategy.Equal(tc.want) {
				t.Fatalf("got %v, %v; want %v", r.Strategy, err, tc.want)
			}
		})
	}
}

// FuzzJSON checks that whatever Parse accepts is valid and round-trips through both forms.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`"random"`,
		`{"select_only": {"key": "mode", "value": "preview", "then": "oldest_first"}}`,
		`{"select_only": {"key": "c", "value": 42}}`,
		`{"or_else": {"first": {"max_simultaneous": {"key": "c", "max": 5}}, "fallback": {"prefer_distinct": {"key": "a b", "max": 1, "then": "custom_priority"}}}}`,
		`{"select_only": {"key": "k", "value": "-12"}}`,
		jsonChain(8),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(json.RawMessage(s), "strategy")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("got error %T %v; want *Error", err, err)
			}
			return
		}
		checkRoundTrips(t, n)
	})
}

// checkRoundTrips fails unless n is valid and both forms read back to it.
func checkRoundTrips(t *testing.T, n Node) {
	t.Helper()
	if err := n.Validate(); err != nil {
		t.Fatalf("got invalid tree %v: %v", n, err)
	}
	if n.Depth() > MaxDepth {
		t.Fatalf("got depth %d; want at most %d", n.Depth(), MaxDepth)
	}
	text := n.String()
	back, err := ParseText(text)
	if err != nil || !back.Equal(n) {
		t.Fatalf("got %v, %v from ParseText(%q); want %v", back, err, text, n)
	}
	if again := back.String(); again != text {
		t.Fatalf("got text %q; want %q", again, text)
	}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatalf("got %v from json.Marshal(%v)", err, n)
	}
	back, err = Parse(b, "strategy")
	if err != nil || !back.Equal(n) {
		t.Fatalf("got %v, %v from Parse(%s); want %v", back, err, b, n)
	}
}

// manyWeights is n members of a weights object, "v0": 1, "v1": 1, ….
func manyWeights(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%q: 1", fmt.Sprintf("v%d", i))
	}
	return strings.Join(parts, ", ")
}
