package wire

// HeaderTraceparent is the W3C Trace Context header a producer may send with a
// submission (POST /v1/submissions, JSON and NDJSON alike): it is stored with the
// submission and handed out with each of its chunks (ReservedChunk.Traceparent).
const HeaderTraceparent = "traceparent"

// TraceparentLen is the length of a traceparent of version 00, the only one opsq stores.
const TraceparentLen = 55

// ValidTraceparent reports whether s is a W3C traceparent opsq stores: exactly
// "vv-<32 hex trace id>-<16 hex parent id>-<2 hex flags>", lower-case hex, the version
// not "ff", neither id all zeros. The server ignores any other value, as the W3C
// recommendation tells a receiver to (the submission then has no traceparent).
func ValidTraceparent(s string) bool {
	if len(s) != TraceparentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s[:2] != "ff" && !allZeros(s[3:35]) && !allZeros(s[36:52])
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
