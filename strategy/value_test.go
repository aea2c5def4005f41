package strategy

import (
	"testing"
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
			if got := string(tc.v.JSON()); got != tc.json {
				t.Fatalf("got JSON %s; want %s", got, tc.json)
			}
			if got, err := tc.v.MarshalJSON(); err != nil || string(got) != tc.json {
				t.Fatalf("got MarshalJSON %s, %v; want %s", got, err, tc.json)
			}
			if got := tc.v.String(); got != tc.text {
				t.Fatalf("got text %s; want %s", got, tc.text)
			}
			back, err := parseJSONValue(tc.v.JSON(), "v")
			if err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from %s; want %#v", back, err, tc.v.JSON(), tc.v)
			}
			back, err = (&textParser{s: tc.text}).value("v")
			if err != nil || back != tc.v {
				t.Fatalf("got %#v, %v from %s; want %#v", back, err, tc.text, tc.v)
			}
		})
	}
}
