package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// completeSeeds are complete bodies, usual and not: each is read by decodeFast or left to
// decodeJSON, never read differently.
var completeSeeds = []string{
	`{"completions":[{"token":"t1","output":"done"},{"output":"x","token":"t2"}]}`,
	` { "completions" : [ ] } ` + "\n",
	`{"completions":[{"token":"t1","output":"say \"hi\" \u00e9 \ud83d\ude00 <&>"}]}`,
	`{"completions":[{"token":"t1"},{}]}`,
	`{"completions":[{"token":"t1","output":null}]}`,
	`{"completions":[{"token":"t1","output":"a\qb"}]}`,
	`{"completions":[{"token":"t1","output":"a` + "\xff" + `b"}]}`,
	`{"completions":[{"token":"t\u0031","output":"x"}]}`,
	`{"completions":[{"Token":"t1","output":"x"}]}`,
	`{"completions":[{"token":"t1","token":"t2"}]}`,
	`{"completions":[{"token":"t1","output":"x","extra":1}]}`,
	`{"completions":[{"token":"t1","output":"x"},]}`,
	`{"completions":[{"token":"t1","output":7}]}`,
	`{"completions":null}`,
	`{"completions":[]}{}`,
	`{"completions":[{"token":"t1","output":"x"}],"completions":[]}`,
	``,
	`[]`,
}

func TestCompleteFastUsualBody(t *testing.T) {
	t.Parallel()
	var b completeBody
	if !b.decodeFast([]byte(completeSeeds[0])) || len(b.Completions) != 2 || *b.Completions[1].Token != "t2" ||
		string(b.Completions[1].Output) != `"x"` {
		t.Fatalf("the usual body was not read by decodeFast: %+v", b)
	}
	for _, s := range []string{completeSeeds[2], completeSeeds[3]} {
		if !new(completeBody).decodeFast([]byte(s)) {
			t.Errorf("decodeFast gave up on %s", s)
		}
	}
}

func FuzzCompleteFast(f *testing.F) {
	for _, s := range completeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast completeBody
		if !fast.decodeFast(raw) {
			if !reflect.DeepEqual(fast, completeBody{}) {
				t.Fatalf("decodeFast gave up but changed the body: %+v", fast)
			}
			return
		}
		var slow completeBody
		if err := decodeJSON(raw, &slow); err != nil {
			t.Fatalf("decodeFast read %q, which decodeJSON refuses: %v", raw, err)
		}
		if len(fast.Completions) != len(slow.Completions) {
			t.Fatalf("%q: %d completions, decodeJSON %d", raw, len(fast.Completions), len(slow.Completions))
		}
		for i, a := range fast.Completions {
			b := slow.Completions[i]
			if (a.Token == nil) != (b.Token == nil) || a.Token != nil && *a.Token != *b.Token || !bytes.Equal(a.Output, b.Output) {
				t.Fatalf("%q: completion %d read as %+v, decodeJSON %+v", raw, i, a, b)
			}
			ao, aerr := decodeContent("output", a.Output)
			bo, berr := decodeContent("output", b.Output)
			if ao != bo || (aerr == nil) != (berr == nil) {
				t.Fatalf("%q: output %d %q (%v), decodeJSON's %q (%v)", raw, i, ao, aerr, bo, berr)
			}
		}
	})
}

// decodeContent's shortcut gives what json.Unmarshal gives.
func FuzzDecodeContent(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b"`, `"é"`, `"\u00e9"`, "\"\xff\"", `null`, `""`, `7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if n := len(raw); n < 2 || raw[0] != '"' || raw[n-1] != '"' || !plainText(raw[1:n-1]) {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("%q: plain text that json.Unmarshal refuses: %v", raw, err)
		}
		if got, err := decodeContent("output", raw); err != nil || got != want {
			t.Fatalf("decodeContent(%q) = %q, %v; json.Unmarshal gives %q", raw, got, err, want)
		}
	})
}

// BenchmarkCompleteBody: a complete of 50 chunks with short outputs, read by decodeFast and
// by decodeJSON, each output then decoded as the handler does.
func BenchmarkCompleteBody(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"completions":[`)
	for i := range 50 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"token":"%s","output":"resized img-%06d.png to 2 sizes"}`, strings.Repeat("t", 96), i)
	}
	sb.WriteString(`]}`)
	raw := []byte(sb.String())
	outputs := func(b *testing.B, body completeBody) {
		for _, it := range body.Completions {
			if _, err := decodeContent("output", it.Output); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("decodeFast", func(b *testing.B) {
		for b.Loop() {
			var body completeBody
			if !body.decodeFast(raw) {
				b.Fatal("not read")
			}
			outputs(b, body)
		}
	})
	b.Run("decodeJSON", func(b *testing.B) {
		for b.Loop() {
			var body completeBody
			if err := decodeJSON(raw, &body); err != nil {
				b.Fatal(err)
			}
			outputs(b, body)
		}
	})
}
