package opsqtype

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONStringLen: JSONStringLen is the length encoding/json writes, escapes included.
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
		"truncated":    "bad \xff utf-8 \xc3",
		"many":         strings.Repeat("\x02", 100),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := JSONStringLen(s); got != len(b) {
				t.Errorf("JSONStringLen(%q) = %d; want %d (%s)", s, got, len(b), b)
			}
			if got := JSONStringLen([]byte(s)); got != len(b) {
				t.Errorf("JSONStringLen([]byte(%q)) = %d; want %d", s, got, len(b))
			}
		})
	}
}

// TestJSONStringLenAllocatesNothing: the reserve path measures every candidate's input.
func TestJSONStringLenAllocatesNothing(t *testing.T) {
	b := []byte(strings.Repeat("déjà vu ☃ 𝄞 <", 100))
	if n := testing.AllocsPerRun(100, func() { JSONStringLen(b) }); n != 0 {
		t.Errorf("JSONStringLen of bytes allocates %.0f times; want 0", n)
	}
}
