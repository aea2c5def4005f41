package api

import "encoding/json"

// A complete's body is the body the API reads most: every chunk done is in one.
// encoding/json spent about a tenth of an instance's CPU in a burn-down decoding it
// (perf, issue 29), by reflection, and allocated most of what the collector then had to
// scan. completeFast reads the usual shape, {"completions": [{"token": "…", "output": "…"},
// …]}, directly; anything else (another key, a key in another case, a duplicate, null, a
// token with an escape, a syntax error) makes it give up, and the body is decoded by
// decodeJSON as before, with its errors. So it accepts nothing decodeJSON would refuse and
// gives what decodeJSON gives (FuzzCompleteFast holds it to that).

// decodeFast fills b from raw and reports true, or reports false and leaves b as it was.
func (b *completeBody) decodeFast(raw []byte) bool {
	p := fastJSON{b: raw}
	if !p.literal('{') || !p.key("completions") || !p.literal('[') {
		return false
	}
	items := []completionIn{}
	if !p.literal(']') {
		for {
			it, ok := p.completion()
			if !ok {
				return false
			}
			items = append(items, it)
			if p.literal(']') {
				break
			}
			if !p.literal(',') {
				return false
			}
		}
	}
	if !p.literal('}') || p.skipSpace() != len(raw) {
		return false
	}
	b.Completions = items
	return true
}

// fastJSON reads a JSON text of a known shape from b, position i.
type fastJSON struct {
	b []byte
	i int
}

// skipSpace skips JSON whitespace and returns the position after it.
func (p *fastJSON) skipSpace() int {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
	return p.i
}

// literal reads the byte c, after whitespace, if it comes next.
func (p *fastJSON) literal(c byte) bool {
	if p.skipSpace() < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// key reads "name" and the colon after it.
func (p *fastJSON) key(name string) bool {
	s, ok := p.plainString()
	return ok && s == name && p.literal(':')
}

// plainString reads a string without escapes, of valid UTF-8 and no control character:
// one whose bytes are its value.
func (p *fastJSON) plainString() (string, bool) {
	raw, ok := p.stringToken()
	if !ok {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	return string(in), plainText(in)
}

// stringToken reads a whole JSON string, quotes included, and checks it is one.
func (p *fastJSON) stringToken() ([]byte, bool) {
	if !p.literal('"') {
		return nil, false
	}
	start, escaped := p.i-1, false
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			raw := p.b[start:p.i]
			return raw, !escaped || json.Valid(raw)
		case c == '\\':
			escaped = true
			p.i++ // the escaped byte: json.Valid checks the escape
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// completion reads {"token": "…", "output": "…"}, the two keys in either order, each once.
func (p *fastJSON) completion() (completionIn, bool) {
	var it completionIn
	if !p.literal('{') {
		return it, false
	}
	for n := 0; ; n++ {
		if n == 0 && p.literal('}') {
			return it, true
		}
		name, ok := p.plainString()
		if !ok || !p.literal(':') {
			return it, false
		}
		switch {
		case name == "token" && it.Token == nil:
			tok, ok := p.plainString()
			if !ok {
				return it, false
			}
			it.Token = &tok
		case name == "output" && it.Output == nil:
			raw, ok := p.stringToken()
			if !ok {
				return it, false
			}
			it.Output = raw
		default:
			return it, false
		}
		if p.literal('}') {
			return it, true
		}
		if !p.literal(',') {
			return it, false
		}
	}
}
