package handout

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONStringLen: the length counted is what encoding/json writes, for text with every
// kind of escape.
func TestJSONStringLen(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \`, "line\nfeed\ttab\rreturn", "control \x01\x1f",
		"<html> & more", "é ü 日本 🎉", "sep \u2028 \u2029", "bad \xff utf-8 \xc3",
		strings.Repeat("\x02", 100),
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonStringLen([]byte(s)); got != len(want) {
			t.Errorf("jsonStringLen(%q) = %d; encoding/json writes %d bytes: %s", s, got, len(want), want)
		}
	}
}
