package strategy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Fuzz targets of the two forms of a strategy (make fuzz runs each for a minute; go test
// runs their seeds). Invariants: no input panics; an error is an *Error whose path is
// rooted at "strategy"; a tree that parses is valid and reads back equal from both of its
// canonical forms.

var textSeeds = []string{
	"random", "oldest_first", "newest_first", " custom_priority\n",
	"or_else(select_only(mode=preview, random), random)",
	"prefer_distinct(company_id, 2, oldest_first)",
	"max_simultaneous(company_id, 5, random)",
	"select_only(company_id=42, custom_priority)",
	"select_only(n=-42, random)",
	"select_only(zip=007, random)",
	`select_only(company_id="42", random)`,
	"select_only(v=1.5e3, random)",
	"select_only(region=eu-west-1.a, random)",
	`select_only("a b"="\u00e9\t\"", random)`,
	`select_only(k="", random)`,
	"prefer_distinct(c,1)",
	"max_simultaneous(c, 1000000)",
	"\t or_else (\n  max_simultaneous ( c , 5 , select_only ( m = x ) ) ,\r\n  random )  ",
	textChain(8),
	// Bad inputs, one of each kind of error.
	"", "   ", "fastest", "(random)", `"random"`, "random;", "random random",
	"or_else(random, random))", "random()", "select_only", "select_only(=1)",
	`prefer_distinct("", 1)`, `max_simultaneous("\u0000", 1)`, "select_only(mode, random)",
	"select_only(mode=)", "select_only(n=9223372036854775808)", `select_only(k="\u0000")`,
	`select_only(k="abc)`, `select_only(k="abc\`, `select_only(k="\x41")`,
	"prefer_distinct(k, 0)", "max_simultaneous(k, 1000001)", "prefer_distinct(k, -1)",
	"select_only(k=\xff)", `select_only(k="\ud800")`, "or_else(random)", textChain(9),
}

var jsonSeeds = []string{
	`"random"`, `"oldest_first"`, `null`, ` `,
	`{"select_only": {"key": "mode", "value": "preview", "then": "oldest_first"}}`,
	`{"select_only": {"key": "company_id", "value": 42, "then": "custom_priority"}}`,
	`{"select_only": {"key": "company_id", "value": "42", "then": "random"}}`,
	`{"select_only": {"key": "n", "value": -9223372036854775808, "then": "random"}}`,
	`{"select_only": {"value": "preview", "key": "mode"}}`,
	`{"prefer_distinct": {"key": "c", "max": 1, "then": null}}`,
	`{"max_simultaneous": {"key": "company_id", "max": 1000000, "then": "random"}}`,
	`{"or_else": {"first": {"select_only": {"key": "mode", "value": "preview", "then": "random"}}, "fallback": "random"}}`,
	`{"max_simultaneous": {"key": "société id", "max": 5}}`,
	jsonChain(8),
	// Bad inputs.
	`{"random"`, `{}`, `{"select_only": {}, "or_else": {}}`, `{"or_else": {}, "or_else": {}}`,
	`{"whatever": {}}`, `{"random": {}}`, `{"prefer_distinct": ["k", 1]}`, `{"or_else": null}`,
	`{"select_only": {"key": "k", "value": 1, "when": 2}}`, `{"select_only": {"key": "a", "key": "b", "value": 1}}`,
	`{"max_simultaneous": {"key": 7, "max": 1}}`, `{"select_only": {"key": "a\u0000", "value": 1}}`,
	`{"select_only": {"key": "k", "value": 4.5}}`, `{"select_only": {"key": "k", "value": 9223372036854775808}}`,
	`{"select_only": {"key": "k", "value": {}}}`, `{"prefer_distinct": {"key": "k", "max": 0}}`,
	`{"max_simultaneous": {"key": "k", "max": 99999999999999999999999}}`, `{"max_simultaneous": {"key": "k", "max": "5"}}`,
	`{"or_else": {"first": "random"}}`, `"fastest"`, `42`, `[]`, `{"select_only": {"key": "k\ud800", "value": 1}}`,
	"{\"select_only\": {\"key\": \"k\xff\", \"value\": 1}}", jsonChain(9),
}

// checkParsed checks the invariants of one parse of the text or JSON form.
func checkParsed(t *testing.T, in string, n Node, err error) {
	t.Helper()
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: error %T %v; want an *Error", in, err, err)
		}
		if e.Path != "strategy" && !strings.HasPrefix(e.Path, "strategy.") || e.Message == "" {
			t.Fatalf("%q: error path %q message %q; want a path rooted at \"strategy\" and a message", in, e.Path, e.Message)
		}
		return
	}
	if err := n.Validate(); err != nil {
		t.Fatalf("%q parsed to an invalid tree: %v", in, err)
	}
	text := n.String()
	back, err := ParseText(text)
	if err != nil || !back.Equal(n) {
		t.Fatalf("%q: its text form %q reads back as %v, %v; want the same tree", in, text, back, err)
	}
	if again := back.String(); again != text {
		t.Fatalf("%q: text form %q, then %q; want it stable", in, text, again)
	}
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatalf("%q: MarshalJSON: %v", in, err)
	}
	back, err = Parse(raw, "strategy")
	if err != nil || !back.Equal(n) {
		t.Fatalf("%q: its JSON form %s reads back as %v, %v; want the same tree", in, raw, back, err)
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range textSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseText(s)
		checkParsed(t, s, n, err)
	})
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Parse(b, "strategy")
		checkParsed(t, string(b), n, err)
	})
}
