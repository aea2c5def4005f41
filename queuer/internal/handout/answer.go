package handout

import "unicode/utf8"

// A reserve's byte bound (Request.MaxBytes) counts a chunk as the answer writes
// it: JSON, where a string can take up to six times its bytes (\u escapes), plus the
// fields every chunk carries. So the bound holds for the answer as sent, and a forwarded
// answer fits the read limit of the instance that forwarded it (peerMaxAnswerBytes).

// answerChunkOverhead is what one chunk of an answer takes besides its input, prefix,
// metadata and strategic metadata: the field names, the token, the ids, the retries, the
// expiry and the punctuation (about 260 bytes; rounded up).
const answerChunkOverhead = 320

// jsonStringLen returns the length of b written as a JSON string, quotes included, the way
// encoding/json writes it (with HTML escaping, the longer form).
func jsonStringLen(b []byte) int {
	n := 2
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // written as \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
