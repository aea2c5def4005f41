package strategy

import (
	"encoding/json"
	"testing"

	"opsq/api/wire"
)

func TestValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		v        Value
		isString bool
		i        int64
		s        string
		json     string
		text     string
	}{
		{name: "zero", v: Value{}, json: `0`, text: `0`},
		{name: "int", v: IntValue(42), i: 42, json: `42`, text: `42`},
		{name: "negative int", v: IntValue(-7), i: -7, json: `-7`, text: `-7`},
		{name: "string", v: StringValue("preview"), isString: true, s: "preview", json: `"preview"`, text: `preview`},
		{name: "string of digits", v: StringValue("42"), isString: true, s: "42", json: `"42"`, text: `"42"`},
		{name: "string of a negative integer", v: StringValue("-1"), isString: true, s: "-1", json: `"-1"`, text: `"-1"`},
		{name: "word that is no integer", v: StringValue("1.5"), isString: true, s: "1.5", json: `"1.5"`, text: `1.5`},
		{name: "empty string", v: StringValue(""), isString: true, json: `""`, text: `""`},
		{name: "spaces and HTML", v: StringValue("a <b> & c"), isString: true, s: "a <b> & c", json: `"a <b> & c"`, text: `"a <b> & c"`},
		{name: "quote and newline", v: StringValue("\"\n"), isString: true, s: "\"\n", json: `"\"\n"`, text: `"\"\n"`},
		{name: "unicode", v: StringValue("é"), isString: true, s: "é", json: `"é"`, text: `"é"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.v.IsString() != tc.isString || tc.v.Int64() != tc.i || tc.v.Str() != tc.s {
				t.Fatalf("got (%v, %d, %q); want (%v, %d, %q)", tc.v.IsString(), tc.v.Int64(), tc.v.Str(), tc.isString, tc.i, tc.s)
			}
			if got := string(valueJSON(tc.v)); got != tc.json {
				t.Fatalf("got JSON %s; want %s", got, tc.json)
			}
			// The wire's encoding of the same value (api/wire.MetadataValue, what submissions
			// carry) reads back as this value, and the canonical form reads back on the wire
			// as that value: a strategy names exactly the values submissions carry.
			wv := wire.Int(tc.i)
			if tc.isString {
				wv = wire.String(tc.s)
			}
			onWire, err := json.Marshal(wv)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if back, err := parseJSONValue(onWire, "v"); err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from the wire's %s; want %#v", back, err, onWire, tc.v)
			}
			var fromCanonical wire.MetadataValue
			if err := json.Unmarshal(valueJSON(tc.v), &fromCanonical); err != nil || fromCanonical != wv {
				t.Fatalf("the wire read %#v, %v from %s; want %#v", fromCanonical, err, valueJSON(tc.v), wv)
			}
			if got := valueText(tc.v); got != tc.text {
				t.Fatalf("got text %s; want %s", got, tc.text)
			}
			back, err := parseJSONValue(valueJSON(tc.v), "v")
			if err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from %s; want %#v", back, err, valueJSON(tc.v), tc.v)
			}
			back, err = (&textParser{s: tc.text}).value("v")
			if err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from %s; want %#v", back, err, tc.text, tc.v)
			}
		})
	}
}
