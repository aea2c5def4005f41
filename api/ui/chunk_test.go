package ui

import (
	"fmt"
	"strings"
	"testing"
)

func TestChips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{`{"mode": "preview", "company_id": 42}`, `[{company_id 42} {mode preview}]`},
		{`{"company_id": "42"}`, `[{company_id "42"}]`}, // the string 42 is not the integer 42
		{`{"k": "a <b>"}`, `[{k a <b>}]`},               // escaped by the template, not here
		{`{}`, `[]`},
		{``, `[]`},
		{`not json`, `[{ not json}]`},
	} {
		if got := fmt.Sprint(chips(tc.raw)); got != tc.want {
			t.Errorf("chips(%s) = %s; want %s", tc.raw, got, tc.want)
		}
	}
}

func TestToBlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		b    []byte
		size int64
		want string // text, hex or none
	}{
		{"text", []byte("hello\n\tworld"), 12, "text"},
		{"utf-8", []byte("héllo ✓"), 10, "text"},
		{"nothing kept", nil, -1, "none"},
		{"empty", []byte{}, 0, "text"},
		{"NUL", []byte("a\x00b"), 3, "hex"},
		{"invalid UTF-8", []byte{0xff, 0xfe, 'a'}, 3, "hex"},
		{"a rune cut by the preview", []byte("ab\xe2\x9c"), 100, "text"},
		{"a rune cut in the whole", []byte("ab\xe2\x9c"), 4, "hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := toBlob(tc.b, tc.size)
			got := "none"
			switch {
			case v.Stored && v.Hex != "":
				got = "hex"
			case v.Stored:
				got = "text"
			}
			if got != tc.want {
				t.Errorf("toBlob(%q, %d) shown as %s; want %s", tc.b, tc.size, got, tc.want)
			}
			if got == "hex" && (!strings.Contains(v.Hex, "00000000") || v.Base64 == "") {
				t.Errorf("toBlob(%q) hex %q, base64 %q; want a dump and the base64", tc.b, v.Hex, v.Base64)
			}
		})
	}
	big := make([]byte, 4096)
	if v := toBlob(big, 1<<20); !v.Cut || v.Read != 4096 || strings.Count(v.Hex, "\n") != hexShown/16 {
		t.Errorf("a 1 MiB binary read 4 KiB: cut %v, read %d, %d hex lines; want cut, 4096, %d", v.Cut, v.Read, strings.Count(v.Hex, "\n"), hexShown/16)
	}
}
