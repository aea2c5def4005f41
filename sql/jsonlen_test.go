package sql

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONStringLen: jsonStringLen is the length encoding/json writes, escapes included.
func TestJSONStringLen(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]string{
		"empty":        "",
		"plain":        "connection refused",
		"html":         strings.Repeat("<>&", 100),
		"quotes":       `"a\b"`,
		"controls":     "a\nb\rc\td\x00e\x1f",
		"multibyte":    "déjà vu ☃ 𝄞",
		"separators":   "a\u2028b\u2029c",
		"invalid utf8": "a\xffb\xc3(c",
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonStringLen(s); got != len(b) {
				t.Errorf("jsonStringLen(%q) = %d; want %d (%s)", s, got, len(b), b)
			}
		})
	}
}
