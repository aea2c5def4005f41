package strategy

import (
	"encoding/json"
	"testing"

	"opsq/client"
)

func TestValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		v        client.MetadataValue
		isString bool
		i        int64
		s        string
		json     string
		text     string
	}{
		{name: "zero", v: client.MetadataValue{}, json: `0`, text: `0`},
		{name: "int", v: client.Int(42), i: 42, json: `42`, text: `42`},
		{name: "negative int", v: client.Int(-7), i: -7, json: `-7`, text: `-7`},
		{name: "string", v: client.String("preview"), isString: true, s: "preview", json: `"preview"`, text: `preview`},
		{name: "string of digits", v: client.String("42"), isString: true, s: "42", json: `"42"`, text: `"42"`},
		{name: "string of a negative integer", v: client.String("-1"), isString: true, s: "-1", json: `"-1"`, text: `"-1"`},
		{name: "word that is no integer", v: client.String("1.5"), isString: true, s: "1.5", json: `"1.5"`, text: `1.5`},
		{name: "empty string", v: client.String(""), isString: true, json: `""`, text: `""`},
		{name: "spaces and HTML", v: client.String("a <b> & c"), isString: true, s: "a <b> & c", json: `"a <b> & c"`, text: `"a <b> & c"`},
		{name: "quote and newline", v: client.String("\"\n"), isString: true, s: "\"\n", json: `"\"\n"`, text: `"\"\n"`},
		{name: "unicode", v: client.String("é"), isString: true, s: "é", json: `"é"`, text: `"é"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.v.IsString() != tc.isString || tc.v.Int64() != tc.i || tc.v.Str() != tc.s {
				t.Fatalf("got (%v, %d, %q); want (%v, %d, %q)", tc.v.IsString(), tc.v.Int64(), tc.v.Str(), tc.isString, tc.i, tc.s)
			}
			if got := string(valueJSON(tc.v)); got != tc.json {
				t.Fatalf("got JSON %s; want %s", got, tc.json)
			}
			// The wire's encoding of the value reads back as the same value from either
			// form, so a strategy names exactly the values submissions carry.
			wire, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if back, err := parseJSONValue(wire, "v"); err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from the wire's %s; want %#v", back, err, wire, tc.v)
			}
			var fromCanonical client.MetadataValue
			if err := json.Unmarshal(valueJSON(tc.v), &fromCanonical); err != nil || fromCanonical != tc.v {
				t.Fatalf("the wire read %#v, %v from %s; want %#v", fromCanonical, err, valueJSON(tc.v), tc.v)
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
