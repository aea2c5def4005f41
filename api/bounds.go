package api

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"opsq/queuer"
	"opsq/queuer/opsqtype"
)

// Bounds of what a client sends (DESIGN.md §3 "Bounded by design"). A request past any of
// them is a 400 that names the field, and creates nothing.
const (
	// MaxMetadataBytes bounds a submission's metadata, in bytes.
	MaxMetadataBytes = 64 << 10
	// MaxStrategicKeys bounds the number of keys of a submission's strategic metadata.
	MaxStrategicKeys = 32
	// MaxStrategicKeyBytes bounds a strategic metadata key, in bytes (at least 1).
	MaxStrategicKeyBytes = 128
	// MaxStrategicValueBytes bounds a strategic metadata string value, in bytes.
	MaxStrategicValueBytes = 1 << 10
	// MaxSubmissionChunksDefault is the default of Config.MaxSubmissionChunks
	// (OPSQ_MAX_SUBMISSION_CHUNKS): the most chunks one submission may have, whether
	// given as chunk_count or as the chunks of a JSON or NDJSON body.
	MaxSubmissionChunksDefault = 100_000_000
	// MaxErrorBytes is how much of a fail's error is kept, in bytes; a longer error is
	// cut at a character boundary and the cut is marked (see cutError).
	MaxErrorBytes = queuer.ErrorMax
	// MaxConsumerBytes bounds the consumer name of a reserve, in bytes.
	MaxConsumerBytes = 256
	// MaxReserveBytesDefault is the default of Config.MaxReserveBytes
	// (OPSQ_MAX_RESERVE_BYTES), and its most: a reserve answer stops adding chunks once it
	// is this many bytes of JSON; it always holds at least one chunk. It is the most an
	// instance reads of an answer to a reserve it forwarded, so it is not raised.
	MaxReserveBytesDefault = 16 << 20
	// MaxListPageBytes bounds a page of GET /v1/submissions: it stops adding submissions
	// once it holds about this many bytes (at least one), and its next_after points on.
	MaxListPageBytes = 4 << 20
	// listPageFactor is what a page is counted as in the budget, per byte of it: the rows
	// read, and the answer's values made of them.
	listPageFactor = 3
	// MaxFailuresPageBytes bounds a page of GET /v1/submissions/{id}/failures as
	// MaxListPageBytes bounds a list's, counting each string as JSON escapes it; a page is
	// counted as listPageFactor times it in the budget while it is read and written.
	MaxFailuresPageBytes = queuer.FailuresPageBytesMax
	// MaxPrefixBytes bounds the prefix of an object-storage submission, in bytes: every
	// reserve answer carries it with each chunk.
	MaxPrefixBytes = 1 << 10
	// MaxLoginFormBytes bounds the dashboard's login form (a key and where to go next).
	MaxLoginFormBytes = 4 << 10
	// MaxHeaderBytesDefault is the default of OPSQ_MAX_HEADER_BYTES: the most bytes of a
	// request's line and headers (net/http answers 431 past it).
	MaxHeaderBytesDefault = 32 << 10
)

// maxChunkIndexCount is the most chunks a submission can have whatever the configuration:
// chunk indexes are int32.
const maxChunkIndexCount = math.MaxInt32

// checkText checks a decoded text field (metadata, a strategic key or value, a fail's
// error, a consumer): valid UTF-8, no NUL, at most max bytes (max 0: no bound here).
// raw is the field's JSON text, checked for what decoding would have hidden.
func checkText(field string, raw []byte, s string, max int) error {
	if p := textProblem(raw); p != "" {
		return badRequest("%s: %s", field, p)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return badRequest("%s: must not contain NUL characters (\\u0000)", field)
	}
	if max > 0 && len(s) > max {
		return badRequest("%s: %d bytes is over the %d-byte limit", field, len(s), max)
	}
	return nil
}

// textProblem describes what is wrong with the strings of a piece of well-formed JSON that
// encoding/json would silently replace with U+FFFD: bytes that are not UTF-8, or a \u
// escape of half a UTF-16 surrogate pair. It returns "" when there is nothing wrong.
func textProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		for i := 0; i < len(raw); {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return fmt.Sprintf("not valid UTF-8 (byte 0x%02x at offset %d); send text as UTF-8, and binary content as base64 or in object storage", raw[i], i)
			}
			i += size
		}
	}
	// In well-formed JSON a backslash appears only in strings, as an escape.
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a one-letter escape, such as \\ or \"
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			i++
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Sprintf("not valid UTF-8 (a lone low surrogate \\u%04x at offset %d)", r, i)
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := rune(0), false
			if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				low, ok = hex4(raw, i+8)
			}
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return fmt.Sprintf("not valid UTF-8 (a lone high surrogate \\u%04x at offset %d)", r, i)
			}
			i += 11 // the pair
		default:
			i += 5
		}
	}
	return ""
}

// hex4 reads the 4 hexadecimal digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// cutError keeps at most MaxErrorBytes of a fail's error: a longer one is cut at a
// character boundary and ends with a mark saying how many bytes were cut.
func cutError(s string) string { return opsqtype.CutError(s) }
