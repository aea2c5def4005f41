package opsqtype

import "unicode/utf8"

// JSONStringLen returns the length of s written as a JSON string, quotes included, the way
// encoding/json writes it (with HTML escaping, the longer form): what an answer's byte
// bound counts of a string, whatever its characters (a reserve's answer, a failures page).
func JSONStringLen[T ~string | ~[]byte](s T) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
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
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
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
