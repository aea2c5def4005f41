package strategy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The text form, for the CLI and the docs:
//
//	strategy = leaf
//	         | "select_only" "(" key "=" value [ "," strategy ] ")"
//	         | "prefer_distinct" "(" key "," max [ "," strategy ] ")"
//	         | "max_simultaneous" "(" key "," max [ "," strategy ] ")"
//	         | "or_else" "(" strategy "," strategy ")"
//	         | "rate_limit" "(" key "," rate "," burst [ "," strategy ] ")"
//	         | "weighted_fair" "(" key "," weights "," weight [ "," strategy ] ")" .
//	leaf     = "random" | "oldest_first" | "newest_first" | "custom_priority" .
//	key      = word | string .
//	value    = word | string .   a word that is an integer is an int64, any other a string
//	max      = integer .         1..1000000
//	rate     = number "/" ( "s" | "m" | "h" ) .  per second, minute or hour; written back per second
//	number   = digit { digit } [ "." digit { digit } ] .
//	burst    = integer .         1..1000000
//	weights  = "{" [ value ":" weight { "," value ":" weight } ] "}" .  at most 1000 values
//	weight   = integer .         1..1000000; after the weights, the default weight
//	word     = [ "@" ] wchar { wchar } . wchar: A-Z a-z 0-9 _ - .   (@tenant: the tenant)
//	integer  = [ "-" ] digit { digit } .
//	string   = a JSON string literal, such as "42" or "eu west" .
//
// Whitespace (space, tab, newline, carriage return) may separate any two tokens. A left
// out strategy after a key is random. So select_only(company_id=42, custom_priority)
// keeps the integer 42 and select_only(company_id="42") the string "42", then random.
// String writes the canonical text: every strategy written out, ", " between arguments,
// and a key or a value quoted only when it must be.

// ParseText reads the text form. Errors are *Error; their paths are rooted at "strategy",
// and their messages start with the 1-based column of the offending token.
func ParseText(s string) (Node, error) {
	p := &textParser{s: s}
	n, err := p.strategy("strategy", 1)
	if err != nil {
		return Node{}, err
	}
	if tok, err := p.next("strategy"); err != nil {
		return Node{}, err
	} else if tok.kind != tokEOF {
		return Node{}, p.errorf("strategy", tok, "unexpected %s after the strategy", tok)
	}
	return n, nil
}

// ParseAny reads the JSON form if s starts with " or { (after spaces), else the text form:
// what a command-line flag accepts.
func ParseAny(s string) (Node, error) {
	t := strings.TrimSpace(s)
	if t != "" && (t[0] == '"' || t[0] == '{') {
		return Parse(json.RawMessage(t), "strategy")
	}
	return ParseText(s)
}

// MarshalText writes the text form, so that a Node can be a flag.TextVar; the zero Node
// is empty. An invalid tree is an error (see Validate).
func (n Node) MarshalText() ([]byte, error) {
	if n.Equal(Node{}) {
		return nil, nil
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return []byte(n.String()), nil
}

// UnmarshalText reads either form, as ParseAny does; empty text is the zero Node.
func (n *Node) UnmarshalText(b []byte) error {
	if strings.TrimSpace(string(b)) == "" {
		*n = Node{}
		return nil
	}
	m, err := ParseAny(string(b))
	if err != nil {
		return err
	}
	*n = m
	return nil
}

// String is the canonical text form of the tree. ParseText reads it back to an equal tree
// when the tree is valid; in an invalid one, a missing child is written <nil>.
func (n Node) String() string {
	var b strings.Builder
	n.writeText(&b)
	return b.String()
}

func (n Node) writeText(b *strings.Builder) {
	b.WriteString(string(n.Kind))
	if n.Kind.Leaf() || !n.Kind.known() {
		return
	}
	b.WriteByte('(')
	switch n.Kind {
	case SelectOnly:
		b.WriteString(textKey(n.Key))
		b.WriteByte('=')
		b.WriteString(valueText(n.Value))
	case PreferDistinct, MaxSimultaneous:
		b.WriteString(textKey(n.Key))
		b.WriteString(", ")
		b.WriteString(strconv.Itoa(n.Max))
	case RateLimit:
		b.WriteString(textKey(n.Key))
		b.WriteString(", ")
		b.WriteString(formatRate(n.PerSecond))
		b.WriteString("/s, ")
		b.WriteString(strconv.Itoa(n.Burst))
	case WeightedFair:
		b.WriteString(textKey(n.Key))
		b.WriteString(", {")
		for i, w := range n.Weights {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(valueText(w.Value))
			b.WriteString(": ")
			b.WriteString(strconv.Itoa(w.Weight))
		}
		b.WriteString("}, ")
		b.WriteString(strconv.Itoa(n.DefaultWeight))
	}
	for i, c := range n.children() {
		if i > 0 || n.Kind != OrElse {
			b.WriteString(", ")
		}
		if c.node == nil {
			b.WriteString("<nil>")
		} else {
			c.node.writeText(b)
		}
	}
	b.WriteByte(')')
}

// textKey is a key in the text form: bare if it is a word, else quoted.
func textKey(k string) string {
	if isWord(k) {
		return k
	}
	return string(jsonString(k))
}

// isWordByte reports whether c may be part of a bare word.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// isWord reports whether s may be written bare: word bytes, after an optional '@' (the
// key @tenant).
func isWord(s string) bool {
	s = strings.TrimPrefix(s, "@")
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

// isInteger reports whether the word s reads as an integer: [-]digits.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

type tokKind int

const (
	tokEOF    tokKind = iota
	tokWord           // text is the word
	tokString         // text is the decoded string
	tokPunct          // text is one of ( ) , = / { } :
)

type token struct {
	kind tokKind
	text string
	raw  string // as written
	pos  int    // byte offset in the input
}

// String describes the token in an error message.
func (t token) String() string {
	if t.kind == tokEOF {
		return "end of input"
	}
	return quote(t.raw)
}

// textParser is a recursive descent parser over a lazily scanned input.
type textParser struct {
	s   string
	pos int // offset of the next byte to scan
}

func (p *textParser) errorf(path string, at token, format string, args ...any) *Error {
	return errorf(path, "at column %d: %s", at.pos+1, fmt.Sprintf(format, args...))
}

// located prefixes the message of a validation error with the token's column.
func (p *textParser) located(err error, at token) error {
	var e *Error
	if errors.As(err, &e) {
		return p.errorf(e.Path, at, "%s", e.Message)
	}
	return err
}

// scan reads the token at the current offset; next also consumes it.
func (p *textParser) scan(path string) (token, int, error) {
	i := p.pos
	for i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[i]) >= 0 {
		i++
	}
	if i == len(p.s) {
		return token{kind: tokEOF, pos: i}, i, nil
	}
	switch c := p.s[i]; {
	case strings.IndexByte("(),=/{}:", c) >= 0:
		return token{kind: tokPunct, text: p.s[i : i+1], raw: p.s[i : i+1], pos: i}, i + 1, nil
	case isWordByte(c) || c == '@' && i+1 < len(p.s) && isWordByte(p.s[i+1]):
		j := i + 1
		for j < len(p.s) && isWordByte(p.s[j]) {
			j++
		}
		return token{kind: tokWord, text: p.s[i:j], raw: p.s[i:j], pos: i}, j, nil
	case c == '"':
		j := i + 1
		for j < len(p.s) && p.s[j] != '"' {
			if p.s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(p.s) {
			return token{}, 0, p.errorf(path, token{pos: i}, "unterminated string")
		}
		j++
		var text string
		if err := json.Unmarshal([]byte(p.s[i:j]), &text); err != nil {
			return token{}, 0, p.errorf(path, token{pos: i}, "invalid string %s: want a JSON string", quote(p.s[i:j]))
		}
		return token{kind: tokString, text: text, raw: p.s[i:j], pos: i}, j, nil
	default:
		r, _ := utf8.DecodeRuneInString(p.s[i:])
		return token{}, 0, p.errorf(path, token{pos: i}, "unexpected character %q", r)
	}
}

func (p *textParser) peek(path string) (token, error) {
	tok, _, err := p.scan(path)
	return tok, err
}

func (p *textParser) next(path string) (token, error) {
	tok, end, err := p.scan(path)
	if err == nil {
		p.pos = end
	}
	return tok, err
}

// expect consumes the punctuation punct, or fails with what was expected.
func (p *textParser) expect(path, punct, what string) error {
	tok, err := p.next(path)
	if err != nil {
		return err
	}
	if tok.kind != tokPunct || tok.text != punct {
		return p.errorf(path, tok, "expected %q %s, got %s", punct, what, tok)
	}
	return nil
}

// strategy reads the node at path, depth nodes from the root.
func (p *textParser) strategy(path string, depth int) (Node, error) {
	tok, err := p.next(path)
	if err != nil {
		return Node{}, err
	}
	if err := checkDepth(path, depth); err != nil {
		return Node{}, p.located(err, tok)
	}
	k := Kind(tok.text)
	switch {
	case tok.kind != tokWord:
		return Node{}, p.errorf(path, tok, "expected a strategy name, got %s", tok)
	case !k.known():
		return Node{}, p.errorf(path, tok, "unknown strategy %s; known: %s", quote(tok.text), knownKinds)
	case k.Leaf():
		if after, err := p.peek(path); err == nil && after.kind == tokPunct && after.text == "(" {
			return Node{}, p.errorf(path+"."+string(k), after, "%s takes no parameters: write %s", k, k)
		}
		return Node{Kind: k}, nil
	}
	n := Node{Kind: k}
	at := func(field string) string { return n.childPath(path, field) }
	if err := p.expect(path+"."+string(k), "(", "after "+string(k)); err != nil {
		return Node{}, err
	}
	switch k {
	case SelectOnly:
		if n.Key, err = p.key(at("key")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("value"), "=", "after the key"); err != nil {
			return Node{}, err
		}
		if n.Value, err = p.value(at("value")); err != nil {
			return Node{}, err
		}
		n.Then, err = p.then(at("then"), depth)
	case PreferDistinct, MaxSimultaneous:
		if n.Key, err = p.key(at("key")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("max"), ",", "after the key"); err != nil {
			return Node{}, err
		}
		if n.Max, err = p.max(at("max")); err != nil {
			return Node{}, err
		}
		n.Then, err = p.then(at("then"), depth)
	case RateLimit:
		if n.Key, err = p.key(at("key")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("per_second"), ",", "after the key"); err != nil {
			return Node{}, err
		}
		if n.PerSecond, err = p.rate(at("per_second")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("burst"), ",", "after the rate"); err != nil {
			return Node{}, err
		}
		if n.Burst, err = p.burst(at("burst")); err != nil {
			return Node{}, err
		}
		n.Then, err = p.then(at("then"), depth)
	case WeightedFair:
		if n.Key, err = p.key(at("key")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("weights"), ",", "after the key"); err != nil {
			return Node{}, err
		}
		if n.Weights, err = p.weights(at("weights")); err != nil {
			return Node{}, err
		}
		if err := p.expect(at("default_weight"), ",", "after the weights"); err != nil {
			return Node{}, err
		}
		if n.DefaultWeight, err = p.weight(at("default_weight")); err != nil {
			return Node{}, err
		}
		n.Then, err = p.then(at("then"), depth)
	case OrElse:
		var first, fallback Node
		if first, err = p.strategy(at("first"), depth+1); err != nil {
			return Node{}, err
		}
		if tok, err := p.peek(at("fallback")); err == nil && (tok.kind == tokEOF || tok.kind == tokPunct && tok.text == ")") {
			return Node{}, p.errorf(at("fallback"), tok, "required: or_else takes (first, fallback)")
		}
		if err := p.expect(at("fallback"), ",", "after the first strategy"); err != nil {
			return Node{}, err
		}
		if fallback, err = p.strategy(at("fallback"), depth+1); err != nil {
			return Node{}, err
		}
		n.First, n.Fallback = &first, &fallback
	}
	if err != nil {
		return Node{}, err
	}
	if err := p.expect(path+"."+string(k), ")", "to close "+string(k)); err != nil {
		return Node{}, err
	}
	return n, nil
}

// then reads the optional ", strategy" that ends select_only, prefer_distinct and
// max_simultaneous; without it the strategy is random.
func (p *textParser) then(path string, parentDepth int) (*Node, error) {
	tok, err := p.peek(path)
	if err != nil {
		return nil, err
	}
	if tok.kind == tokPunct && tok.text == ")" {
		if err := checkDepth(path, parentDepth+1); err != nil {
			return nil, p.located(err, tok)
		}
		then := Default
		return &then, nil
	}
	if err := p.expect(path, ",", "or \")\""); err != nil {
		return nil, err
	}
	then, err := p.strategy(path, parentDepth+1)
	if err != nil {
		return nil, err
	}
	return &then, nil
}

func (p *textParser) key(path string) (string, error) {
	tok, err := p.next(path)
	if err != nil {
		return "", err
	}
	if tok.kind != tokWord && tok.kind != tokString {
		return "", p.errorf(path, tok, "expected a metadata key, got %s", tok)
	}
	return tok.text, p.located(checkKey(path, tok.text), tok)
}

func (p *textParser) value(path string) (Value, error) {
	tok, err := p.next(path)
	if err != nil {
		return Value{}, err
	}
	switch {
	case tok.kind == tokString:
		v := StringValue(tok.text)
		return v, p.located(checkValue(v, path), tok)
	case tok.kind == tokWord && isInteger(tok.text):
		i, err := strconv.ParseInt(tok.text, 10, 64)
		if err != nil {
			return Value{}, p.errorf(path, tok, "%s is out of the int64 range; quote it to keep the string %s", abbreviate([]byte(tok.text)), quote(tok.text))
		}
		return IntValue(i), nil
	case tok.kind == tokWord:
		return StringValue(tok.text), nil
	}
	return Value{}, p.errorf(path, tok, "%s, got %s", valueMessage, tok)
}

func (p *textParser) max(path string) (int, error) {
	tok, err := p.next(path)
	if err != nil {
		return 0, err
	}
	if tok.kind != tokWord || !isInteger(tok.text) {
		return 0, p.errorf(path, tok, "%s, got %s", maxMessage, tok)
	}
	m, err := parseMax(tok.text, path)
	return m, p.located(err, tok)
}

// rate reads rate_limit's rate: a decimal number, "/", and s, m or h.
func (p *textParser) rate(path string) (float64, error) {
	tok, err := p.next(path)
	if err != nil {
		return 0, err
	}
	if tok.kind != tokWord || tok.text[0] < '0' || tok.text[0] > '9' {
		return 0, p.errorf(path, tok, "expected a rate such as 10/s, 30/m or 100/h, got %s", tok)
	}
	r, perr := strconv.ParseFloat(tok.text, 64)
	if perr != nil || strings.ContainsAny(tok.text, "xXpPnNiI_eE-") { // decimals only
		return 0, p.errorf(path, tok, "%s, such as 10/s, not %s", rateMessage, tok)
	}
	if err := p.expect(path, "/", "and a unit after the rate's number, such as 10/s"); err != nil {
		return 0, err
	}
	unit, err := p.next(path)
	if err != nil {
		return 0, err
	}
	per := map[string]float64{"s": 1, "m": 60, "h": 3600}[unit.text]
	if unit.kind != tokWord || per == 0 {
		return 0, p.errorf(path, unit, "expected the unit s, m or h after %s, got %s", quote(tok.text+"/"), unit)
	}
	r /= per
	return r, p.located(checkRate(path, r), tok)
}

func (p *textParser) burst(path string) (int, error) {
	tok, err := p.next(path)
	if err != nil {
		return 0, err
	}
	if tok.kind != tokWord || !isInteger(tok.text) {
		return 0, p.errorf(path, tok, "%s, got %s", burstMessage, tok)
	}
	b, err := parseBurst(tok.text, path)
	return b, p.located(err, tok)
}

// weights reads weighted_fair's weights: {value: weight, …}.
func (p *textParser) weights(path string) ([]Weight, error) {
	if err := p.expect(path, "{", "to open the weights, such as {acme: 3, globex: 1}"); err != nil {
		return nil, err
	}
	ws := []Weight{}
	for {
		tok, err := p.peek(path)
		if err != nil {
			return nil, err
		}
		if tok.kind == tokPunct && tok.text == "}" {
			_, _ = p.next(path)
			break
		}
		if len(ws) > 0 {
			if err := p.expect(path, ",", "or \"}\" between the weights"); err != nil {
				return nil, err
			}
		}
		if len(ws) == MaxWeights {
			return nil, p.errorf(path, tok, "names more than %d values", MaxWeights)
		}
		v, err := p.value(path)
		if err != nil {
			return nil, err
		}
		at := path + "." + valueText(v)
		if err := p.expect(at, ":", "after the value"); err != nil {
			return nil, err
		}
		w, err := p.weight(at)
		if err != nil {
			return nil, err
		}
		ws = append(ws, Weight{Value: v, Weight: w})
	}
	if dup, ok := sortWeights(ws); !ok {
		return nil, errorf(path+"."+valueText(dup), "names the value %s more than once", dup)
	}
	return ws, nil
}

func (p *textParser) weight(path string) (int, error) {
	tok, err := p.next(path)
	if err != nil {
		return 0, err
	}
	if tok.kind != tokWord || !isInteger(tok.text) {
		return 0, p.errorf(path, tok, "%s, got %s", weightMessage, tok)
	}
	w, err := parseWeight(tok.text, path)
	return w, p.located(err, tok)
}
