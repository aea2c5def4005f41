package api

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"opsq/api/wire"
)

// A reserve's answer is the body the API writes most: every chunk handed out is in one.
// encoding/json spent a tenth of an instance's CPU in a burn-down on it (perf, issue 29),
// walking wire.ReservedChunk by reflection, sorting each chunk's strategic metadata keys
// through reflect and compacting what it wrote. appendReserved writes the same bytes
// directly: exactly what json.NewEncoder(w).Encode(r) writes, HTML escaping and the final
// newline included (TestReservedJSONAsEncodingJSON and FuzzReservedJSON hold it to that),
// so clients see no difference.

// appendReserved appends r as encoding/json's Encoder writes it, newline included.
func appendReserved(b []byte, r wire.Reserved) []byte {
	if r.Chunks == nil {
		return append(b, `{"chunks":null}`+"\n"...)
	}
	b = slices.Grow(b, reservedSize(r))
	b = append(b, `{"chunks":[`...)
	for i := range r.Chunks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendReservedChunk(b, &r.Chunks[i])
	}
	return append(b, "]}\n"...)
}

// reservedSize is about the length of r's JSON, so that it is written into one buffer:
// the strings (a sixth more, for escapes) and each field's name and punctuation.
func reservedSize(r wire.Reserved) int {
	n := 16
	for i := range r.Chunks {
		c := &r.Chunks[i]
		m := len(c.Token) + len(c.SubmissionID) + len(c.Metadata) + len(c.Traceparent)
		if c.Input != nil {
			m += len(*c.Input)
		}
		if c.Prefix != nil {
			m += len(*c.Prefix)
		}
		for k, v := range c.StrategicMetadata {
			m += len(k) + len(v.Str()) + 24
		}
		n += m + m/6 + 200
	}
	return n
}

// appendReservedChunk appends one chunk, its fields in wire.ReservedChunk's order.
func appendReservedChunk(b []byte, c *wire.ReservedChunk) []byte {
	b = append(b, `{"token":`...)
	b = appendJSONString(b, c.Token)
	b = append(b, `,"submission_id":`...)
	b = appendJSONString(b, c.SubmissionID)
	b = append(b, `,"chunk_index":`...)
	b = strconv.AppendInt(b, c.ChunkIndex, 10)
	if c.Input != nil {
		b = append(b, `,"input":`...)
		b = appendJSONString(b, *c.Input)
	}
	if c.Prefix != nil {
		b = append(b, `,"prefix":`...)
		b = appendJSONString(b, *c.Prefix)
	}
	b = append(b, `,"metadata":`...)
	b = appendJSONString(b, c.Metadata)
	b = append(b, `,"strategic_metadata":`...)
	b = appendMetadataValues(b, c.StrategicMetadata)
	b = append(b, `,"retries":`...)
	b = strconv.AppendInt(b, c.Retries, 10)
	b = append(b, `,"expires_at":"`...)
	b = appendJSONTime(b, c.ExpiresAt)
	b = append(b, '"')
	if c.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendJSONString(b, c.Traceparent)
	}
	return append(b, '}')
}

// appendMetadataValues appends a chunk's strategic metadata, its keys sorted as
// encoding/json sorts a map's.
func appendMetadataValues(b []byte, m map[string]wire.MetadataValue) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		if v := m[k]; v.IsString() {
			b = appendJSONString(b, v.Str())
		} else {
			b = strconv.AppendInt(b, v.Int64(), 10)
		}
	}
	return append(b, '}')
}

// appendJSONTime appends t as time.Time's MarshalJSON does, without the quotes: RFC 3339
// with as many fractional digits as it needs. (Years outside 0–9999 are an error there and
// cannot be a lease's end here.)
func appendJSONTime(b []byte, t time.Time) []byte {
	return t.AppendFormat(b, time.RFC3339Nano)
}

// appendJSONString appends s as a JSON string as encoding/json writes it with HTML
// escaping on (its default): <, > and & as \u003c, \u003e and \u0026, the control
// characters as \b, \f, \n, \r, \t or \u00XX, U+2028 and U+2029 escaped, and each byte
// of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTokenResults appends r as encoding/json's Encoder writes it, newline included: the
// answer to every complete and fail (3–4 % of an instance's CPU through encoding/json in a
// burn-down, perf). TestTokenResultsJSONAsEncodingJSON and FuzzTokenResultsJSON hold it to
// encoding/json's bytes.
func appendTokenResults(b []byte, r wire.TokenResults) []byte {
	if r.Results == nil {
		return append(b, `{"results":null}`+"\n"...)
	}
	n := 16
	for i := range r.Results {
		n += len(r.Results[i].Token) + len(r.Results[i].Status) + 32
	}
	b = slices.Grow(b, n)
	b = append(b, `{"results":[`...)
	for i := range r.Results {
		t := &r.Results[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"token":`...)
		b = appendJSONString(b, t.Token)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(t.Status))
		if t.ExpiresAt != nil {
			b = append(b, `,"expires_at":"`...)
			b = appendJSONTime(b, *t.ExpiresAt)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}
