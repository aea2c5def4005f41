package strategy

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// textChain is the text form of chain(d).
func textChain(d int) string {
	return strings.Repeat("select_only(k=1, ", d-1) + "random" + strings.Repeat(")", d-1)
}

func TestParseText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want *Node
		text string // the canonical form; "" when it is in
	}{
		{name: "random", in: "random", want: leaf(Random)},
		{name: "oldest_first", in: "oldest_first", want: leaf(OldestFirst)},
		{name: "newest_first", in: "newest_first", want: leaf(NewestFirst)},
		{name: "custom_priority", in: " custom_priority\n", want: leaf(CustomPriority), text: "custom_priority"},
		{
			name: "or_else of select_only",
			in:   "or_else(select_only(mode=preview, random), random)",
			want: orElse(selectOnly("mode", StringValue("preview"), leaf(Random)), leaf(Random)),
		},
		{name: "prefer_distinct", in: "prefer_distinct(company_id, 2, oldest_first)", want: preferDistinct("company_id", 2, leaf(OldestFirst))},
		{name: "max_simultaneous", in: "max_simultaneous(company_id, 5, random)", want: maxSimultaneous("company_id", 5, leaf(Random))},
		{name: "rate_limit", in: "rate_limit(company_id, 10/s, 20, random)", want: rateLimit("company_id", 10, 20, leaf(Random))},
		{name: "rate_limit per minute", in: "rate_limit(@tenant, 30/m, 5)", want: rateLimit("@tenant", 0.5, 5, leaf(Random)), text: "rate_limit(@tenant, 0.5/s, 5, random)"},
		{name: "rate_limit per hour", in: "rate_limit(k, 7200 / h, 1, oldest_first)", want: rateLimit("k", 2, 1, leaf(OldestFirst)), text: "rate_limit(k, 2/s, 1, oldest_first)"},
		{name: "rate_limit fraction", in: "rate_limit(k, 2.5/s, 3, or_else(random, random))", want: rateLimit("k", 2.5, 3, orElse(leaf(Random), leaf(Random)))},
		{name: "weighted_fair", in: "weighted_fair(company_id, {acme: 3, globex: 1}, 1, random)", want: weightedFair("company_id", []Weight{{StringValue("acme"), 3}, {StringValue("globex"), 1}}, 1, leaf(Random))},
		{name: "weighted_fair sorted, integers, then left out", in: "weighted_fair(@tenant,{z:1,42:2,\"42\":3},5)", want: weightedFair("@tenant", []Weight{{StringValue("42"), 3}, {StringValue("z"), 1}, {IntValue(42), 2}}, 5, leaf(Random)), text: `weighted_fair(@tenant, {"42": 3, z: 1, 42: 2}, 5, random)`},
		{name: "weighted_fair no weights", in: "weighted_fair(k, {}, 1, oldest_first)", want: weightedFair("k", []Weight{}, 1, leaf(OldestFirst))},
		{name: "integer value", in: "select_only(company_id=42, custom_priority)", want: selectOnly("company_id", IntValue(42), leaf(CustomPriority))},
		{name: "negative integer", in: "select_only(n=-42, random)", want: selectOnly("n", IntValue(-42), leaf(Random))},
		{name: "leading zeros are an integer", in: "select_only(zip=007, random)", want: selectOnly("zip", IntValue(7), leaf(Random)), text: "select_only(zip=7, random)"},
		{name: "quoted digits are a string", in: `select_only(company_id="42", random)`, want: selectOnly("company_id", StringValue("42"), leaf(Random))},
		{name: "quoted word", in: `select_only(mode="preview", random)`, want: selectOnly("mode", StringValue("preview"), leaf(Random)), text: "select_only(mode=preview, random)"},
		{name: "word that is no integer", in: "select_only(v=1.5e3, random)", want: selectOnly("v", StringValue("1.5e3"), leaf(Random))},
		{name: "dashes and dots", in: "select_only(region=eu-west-1.a, random)", want: selectOnly("region", StringValue("eu-west-1.a"), leaf(Random))},
		{name: "value named like a strategy", in: "select_only(s=random, random)", want: selectOnly("s", StringValue("random"), leaf(Random))},
		{name: "JSON escapes", in: `select_only("a b"="\u00e9\t\"", random)`, want: selectOnly("a b", StringValue("é\t\""), leaf(Random)), text: `select_only("a b"="é\t\"", random)`},
		{name: "empty string value", in: `select_only(k="", random)`, want: selectOnly("k", StringValue(""), leaf(Random))},
		{name: "digits as a key", in: "prefer_distinct(42, 1, random)", want: preferDistinct("42", 1, leaf(Random))},
		{name: "the tenant as a key", in: "max_simultaneous(@tenant, 5, select_only(@tenant=acme))", want: maxSimultaneous("@tenant", 5, selectOnly("@tenant", StringValue("acme"), leaf(Random))), text: "max_simultaneous(@tenant, 5, select_only(@tenant=acme, random))"},
		{name: "the tenant quoted", in: `prefer_distinct("@tenant", 1, random)`, want: preferDistinct("@tenant", 1, leaf(Random)), text: "prefer_distinct(@tenant, 1, random)"},
		{name: "then left out", in: "select_only(mode=preview)", want: selectOnly("mode", StringValue("preview"), leaf(Random)), text: "select_only(mode=preview, random)"},
		{name: "then left out of prefer_distinct", in: "prefer_distinct(c,1)", want: preferDistinct("c", 1, leaf(Random)), text: "prefer_distinct(c, 1, random)"},
		{name: "then left out of max_simultaneous", in: "max_simultaneous(c, 1000000)", want: maxSimultaneous("c", 1000000, leaf(Random)), text: "max_simultaneous(c, 1000000, random)"},
		{
			name: "whitespace everywhere",
			in:   "\t or_else (\n  max_simultaneous ( c , 5 , select_only ( m = x ) ) ,\r\n  random )  ",
			want: orElse(maxSimultaneous("c", 5, selectOnly("m", StringValue("x"), leaf(Random))), leaf(Random)),
			text: "or_else(max_simultaneous(c, 5, select_only(m=x, random)), random)",
		},
		{name: "no whitespace", in: "or_else(random,newest_first)", want: orElse(leaf(Random), leaf(NewestFirst)), text: "or_else(random, newest_first)"},
		{name: "depth 8", in: textChain(8), want: chain(8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseText(tc.in)
			if err != nil {
				t.Fatalf("got error %v; want %v", err, tc.want)
			}
			if !got.Equal(*tc.want) {
				t.Fatalf("got %v; want %v", got, tc.want)
			}
			text := tc.text
			if text == "" {
				text = tc.in
			}
			if s := got.String(); s != text {
				t.Fatalf("got String() %q; want %q", s, text)
			}
			if s := tc.want.String(); s != text {
				t.Fatalf("got String() %q of the built tree; want %q", s, text)
			}
		})
	}
}

func TestParseTextErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		path string
		msg  string
	}{
		{name: "empty", in: "", path: "strategy", msg: "at column 1: expected a strategy name, got end of input"},
		{name: "spaces", in: "   ", path: "strategy", msg: "at column 4: expected a strategy name, got end of input"},
		{name: "unknown", in: "fastest", path: "strategy", msg: `at column 1: unknown strategy "fastest"; known: random, oldest_first, newest_first, custom_priority, select_only, prefer_distinct, max_simultaneous, or_else`},
		{name: "not a name", in: "(random)", path: "strategy", msg: `at column 1: expected a strategy name, got "("`},
		{name: "weight zero", in: "weighted_fair(k, {acme: 0}, 1)", path: "strategy.weighted_fair.weights.acme", msg: "between 1 and 1000000"},
		{name: "default weight negative", in: "weighted_fair(k, {}, -1)", path: "strategy.weighted_fair.default_weight", msg: "between 1 and 1000000"},
		{name: "weights repeated", in: "weighted_fair(k, {a: 1, a: 2}, 1)", path: "strategy.weighted_fair.weights.a", msg: "more than once"},
		{name: "weights unclosed", in: "weighted_fair(k, {a: 1 b: 2}, 1)", path: "strategy.weighted_fair.weights", msg: `expected ","`},
		{name: "default weight missing", in: "weighted_fair(k, {a: 1})", path: "strategy.weighted_fair.default_weight", msg: `expected ","`},
		{name: "rate without unit", in: "rate_limit(k, 10, 20)", path: "strategy.rate_limit.per_second", msg: `at column 17: expected "/"`},
		{name: "rate bad unit", in: "rate_limit(k, 10/d, 20)", path: "strategy.rate_limit.per_second", msg: `at column 18: expected the unit s, m or h`},
		{name: "rate zero", in: "rate_limit(k, 0/s, 20)", path: "strategy.rate_limit.per_second", msg: "at column 15: must be a number of chunks per second more than 0"},
		{name: "rate negative", in: "rate_limit(k, -1/s, 20)", path: "strategy.rate_limit.per_second", msg: "at column 15: expected a rate such as 10/s"},
		{name: "rate exponent", in: "rate_limit(k, 1e3/s, 20)", path: "strategy.rate_limit.per_second", msg: "at column 15: must be a number"},
		{name: "rate over 10^6", in: "rate_limit(k, 1000001/s, 20)", path: "strategy.rate_limit.per_second", msg: "at most 1000000"},
		{name: "burst zero", in: "rate_limit(k, 1/s, 0)", path: "strategy.rate_limit.burst", msg: "at column 20: must be an integer between 1 and 1000000"},
		{name: "burst missing", in: "rate_limit(k, 1/s)", path: "strategy.rate_limit.burst", msg: `expected ","`},
		{name: "quoted name", in: `"random"`, path: "strategy", msg: `expected a strategy name, got "\"random\""`},
		{name: "bad character", in: "random;", path: "strategy", msg: "at column 7: unexpected character ';'"},
		{name: "a lone @", in: "prefer_distinct(@, 1)", path: "strategy.prefer_distinct.key", msg: "at column 17: unexpected character '@'"},
		{name: "trailing", in: "random random", path: "strategy", msg: `at column 8: unexpected "random" after the strategy`},
		{name: "trailing parenthesis", in: "or_else(random, random))", path: "strategy", msg: `at column 24: unexpected ")" after the strategy`},
		{name: "leaf with parameters", in: "random()", path: "strategy.random", msg: "at column 7: random takes no parameters: write random"},
		{name: "no parenthesis", in: "select_only", path: "strategy.select_only", msg: `at column 12: expected "(" after select_only, got end of input`},
		{name: "no key", in: "select_only(=1)", path: "strategy.select_only.key", msg: `at column 13: expected a metadata key, got "="`},
		{name: "empty key", in: `prefer_distinct("", 1)`, path: "strategy.prefer_distinct.key", msg: "at column 17: must be a non-empty string"},
		{name: "NUL in key", in: `max_simultaneous("\u0000", 1)`, path: "strategy.max_simultaneous.key", msg: "NUL"},
		{name: "no equals", in: "select_only(mode, random)", path: "strategy.select_only.value", msg: `at column 17: expected "=" after the key, got ","`},
		{name: "no value", in: "select_only(mode=)", path: "strategy.select_only.value", msg: `at column 18: must be an integer or a string, got ")"`},
		{name: "value out of range", in: "select_only(n=9223372036854775808)", path: "strategy.select_only.value", msg: `9223372036854775808 is out of the int64 range; quote it to keep the string "9223372036854775808"`},
		{name: "NUL in value", in: `select_only(k="\u0000")`, path: "strategy.select_only.value", msg: "at column 15: must not contain NUL"},
		{name: "unterminated string", in: `select_only(k="abc)`, path: "strategy.select_only.value", msg: "at column 15: unterminated string"},
		{name: "backslash at the end", in: `select_only(k="abc\`, path: "strategy.select_only.value", msg: "unterminated string"},
		{name: "invalid escape", in: `select_only(k="\x41")`, path: "strategy.select_only.value", msg: "at column 15: invalid string"},
		{name: "raw newline in string", in: "select_only(k=\"a\nb\")", path: "strategy.select_only.value", msg: "invalid string"},
		{name: "non-ASCII bare", in: "select_only(k=é)", path: "strategy.select_only.value", msg: "unexpected character 'é'"},
		{name: "no comma before max", in: "prefer_distinct(c 1)", path: "strategy.prefer_distinct.max", msg: `expected "," after the key, got "1"`},
		{name: "max missing", in: "prefer_distinct(c)", path: "strategy.prefer_distinct.max", msg: `expected "," after the key, got ")"`},
		{name: "max 0", in: "prefer_distinct(c, 0)", path: "strategy.prefer_distinct.max", msg: "at column 20: must be an integer between 1 and 1000000"},
		{name: "max too big", in: "max_simultaneous(c, 1000001)", path: "strategy.max_simultaneous.max", msg: "must be an integer between 1 and 1000000"},
		{name: "max negative", in: "max_simultaneous(c, -1)", path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "max word", in: "max_simultaneous(c, five)", path: "strategy.max_simultaneous.max", msg: `must be an integer between 1 and 1000000, got "five"`},
		{name: "max quoted", in: `max_simultaneous(c, "5")`, path: "strategy.max_simultaneous.max", msg: "between 1 and 1000000"},
		{name: "then without comma", in: "select_only(m=x random)", path: "strategy.select_only.then", msg: `at column 17: expected "," or ")", got "random"`},
		{name: "bad then", in: "select_only(m=x, fastest)", path: "strategy.select_only.then", msg: `unknown strategy "fastest"`},
		{name: "comma then nothing", in: "select_only(m=x,)", path: "strategy.select_only.then", msg: `expected a strategy name, got ")"`},
		{name: "not closed", in: "select_only(m=x, random", path: "strategy.select_only", msg: `at column 24: expected ")" to close select_only, got end of input`},
		{name: "too many arguments", in: "prefer_distinct(c, 1, random, random)", path: "strategy.prefer_distinct", msg: `expected ")" to close prefer_distinct, got ","`},
		{name: "or_else empty", in: "or_else()", path: "strategy.or_else.first", msg: `at column 9: expected a strategy name, got ")"`},
		{name: "or_else without fallback", in: "or_else(random)", path: "strategy.or_else.fallback", msg: "at column 15: required: or_else takes (first, fallback)"},
		{name: "or_else cut short", in: "or_else(random", path: "strategy.or_else.fallback", msg: "required"},
		{name: "or_else without comma", in: "or_else(random random)", path: "strategy.or_else.fallback", msg: `expected "," after the first strategy, got "random"`},
		{name: "or_else comma then nothing", in: "or_else(random,)", path: "strategy.or_else.fallback", msg: `expected a strategy name, got ")"`},
		{name: "or_else three", in: "or_else(random, random, random)", path: "strategy.or_else", msg: `expected ")" to close or_else, got ","`},
		{name: "long token abbreviated", in: `max_simultaneous(c, "` + strings.Repeat("a", 100) + `")`, path: "strategy.max_simultaneous.max", msg: `got "\"` + strings.Repeat("a", 39) + `…"`},
		{name: "long name abbreviated", in: strings.Repeat("b", 100), path: "strategy", msg: `unknown strategy "` + strings.Repeat("b", 40) + `…"; known`},
		{name: "deep error path", in: "or_else(select_only(=x), random)", path: "strategy.or_else.first.select_only.key", msg: "at column 21: expected a metadata key"},
		{name: "depth 9", in: textChain(9), path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at column 137: nested too deep: a strategy may have at most 8 levels, counting every node, the leaf included"},
		{name: "depth 9 by an implied then", in: strings.Repeat("select_only(k=1, ", 7) + "select_only(k=1))" + strings.Repeat(")", 7), path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at most 8 levels"},
		{name: "very deep", in: textChain(100000), path: "strategy" + strings.Repeat(".select_only.then", 8), msg: "at most 8 levels"},
		{name: "depth 9 under or_else", in: "or_else(random, " + textChain(8) + ")", path: "strategy.or_else.fallback" + strings.Repeat(".select_only.then", 7), msg: "at most 8 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseText(tc.in)
			checkError(t, err, tc.path, tc.msg)
			if !got.Equal(Node{}) {
				t.Fatalf("got %v with the error; want the zero Node", got)
			}
		})
	}
}

func TestStringInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		node *Node
		want string
	}{
		{name: "zero", node: &Node{}, want: ""},
		{name: "unknown kind", node: leaf("fastest"), want: "fastest"},
		{name: "nil child", node: orElse(leaf(Random), nil), want: "or_else(random, <nil>)"},
		{name: "key that needs quotes", node: preferDistinct("a=b", 1, nil), want: `prefer_distinct("a=b", 1, <nil>)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.node.String(); got != tc.want {
				t.Fatalf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestParseAny(t *testing.T) {
	t.Parallel()
	tree := orElse(selectOnly("mode", StringValue("preview"), leaf(Random)), leaf(Random))
	for _, tc := range []struct {
		name string
		in   string
		want *Node
		path string // of the error, if any
	}{
		{name: "text leaf", in: "oldest_first", want: leaf(OldestFirst)},
		{name: "JSON leaf", in: `"oldest_first"`, want: leaf(OldestFirst)},
		{name: "text tree", in: "or_else(select_only(mode=preview), random)", want: tree},
		{name: "JSON tree", in: ` {"or_else": {"first": {"select_only": {"key": "mode", "value": "preview"}}, "fallback": "random"}}`, want: tree},
		{name: "bad JSON", in: `{"or_else": {"first": "random"}}`, path: "strategy.or_else.fallback"},
		{name: "bad text", in: `or_else(random)`, path: "strategy.or_else.fallback"},
		{name: "empty", in: ``, path: "strategy"},
		{name: "null is no text strategy", in: `null`, path: "strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAny(tc.in)
			if tc.path != "" {
				checkError(t, err, tc.path, "")
				return
			}
			if err != nil || !got.Equal(*tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestTextMarshaling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		node *Node
		text string
	}{
		{name: "zero", node: &Node{}, text: ""},
		{name: "leaf", node: leaf(CustomPriority), text: "custom_priority"},
		{name: "tree", node: maxSimultaneous("c", 5, leaf(Random)), text: "max_simultaneous(c, 5, random)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := tc.node.MarshalText()
			if err != nil || string(b) != tc.text {
				t.Fatalf("got %q, %v; want %q", b, err, tc.text)
			}
			n := *leaf(NewestFirst) // overwritten
			if err := n.UnmarshalText(b); err != nil || !n.Equal(*tc.node) {
				t.Fatalf("got %v, %v; want %v", n, err, tc.node)
			}
		})
	}
	if _, err := orElse(nil, leaf(Random)).MarshalText(); err == nil {
		t.Fatalf("got no error from MarshalText of an invalid tree; want one")
	}
}

func TestFlagTextVar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want Node
		err  string
	}{
		{name: "absent", args: nil, want: Node{}},
		{name: "text", args: []string{"-strategy", "prefer_distinct(c, 2)"}, want: *preferDistinct("c", 2, leaf(Random))},
		{name: "JSON", args: []string{`-strategy={"select_only": {"key": "m", "value": 1}}`}, want: *selectOnly("m", IntValue(1), leaf(Random))},
		{name: "empty", args: []string{"-strategy="}, want: Node{}},
		{name: "bad", args: []string{"-strategy", "prefer_distinct(c)"}, err: "strategy.prefer_distinct.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var n Node
			fs.TextVar(&n, "strategy", Node{}, "the strategy")
			err := fs.Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v; want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !n.Equal(tc.want) {
				t.Fatalf("got %v, %v; want %v", n, err, tc.want)
			}
		})
	}
}

// FuzzText checks that whatever ParseText accepts is valid and round-trips through both
// forms; go test runs the seeds, go test -fuzz=FuzzText explores.
func FuzzText(f *testing.F) {
	for _, s := range []string{
		"random",
		"or_else(select_only(mode=preview, random), random)",
		"prefer_distinct(company_id, 2, oldest_first)",
		"max_simultaneous(company_id, 5)",
		`select_only(company_id="42", custom_priority)`,
		`select_only("a b"=-007, newest_first)`,
		`select_only(k="\u00e9\n", or_else(random, prefer_distinct(x.y-z, 1000000)))`,
		"select_only(v=1.5, random)",
		textChain(8),
		textChain(9),
		"or_else(random)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseText(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("got error %T %v; want *Error", err, err)
			}
			return
		}
		checkRoundTrips(t, n)
		if got, err := ParseAny(s); err != nil || !got.Equal(n) {
			t.Fatalf("got %v, %v from ParseAny(%q); want %v", got, err, s, n)
		}
	})
}
