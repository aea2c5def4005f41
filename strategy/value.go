package strategy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is the value select_only keeps: an int64 or a string, as in strategic metadata,
// where 42 and "42" are different values (the zero value is the integer 0). It is
// strategy's own: the wire's MetadataValue (api/wire) has the same two cases, and the
// engine compares a filter with a submission's metadata by their canonical JSON text
// (valueJSON), never by type. What is written here: the canonical JSON text a filter binds,
// the text form, and the check of a string value.
type Value struct {
	isString bool
	i        int64
	s        string
}

// IntValue returns an integer value.
func IntValue(i int64) Value { return Value{i: i} }

// StringValue returns a string value.
func StringValue(s string) Value { return Value{isString: true, s: s} }

// IsString reports whether the value is a string.
func (v Value) IsString() bool { return v.isString }

// Int64 returns the integer value (0 for a string).
func (v Value) Int64() int64 { return v.i }

// Str returns the string value ("" for an integer).
func (v Value) Str() string { return v.s }

// String is the value's canonical JSON text, such as 42 or "preview".
func (v Value) String() string { return string(valueJSON(v)) }

// valueJSON is v's canonical JSON text, such as 42 or "preview", with <, > and & left as
// they are: what a submission's strategic_metadata holds for it.
func valueJSON(v Value) []byte {
	if v.IsString() {
		return jsonString(v.Str())
	}
	return strconv.AppendInt(nil, v.Int64(), 10)
}

// valueText is v in the text form: 42, preview, or "42" (a string that would otherwise
// read as an integer, or that has characters other than a word's).
func valueText(v Value) string {
	switch {
	case !v.IsString():
		return strconv.FormatInt(v.Int64(), 10)
	case isWord(v.Str()) && !isInteger(v.Str()):
		return v.Str()
	}
	return string(jsonString(v.Str()))
}

// checkValue checks a string value as the submissions API checks strategic metadata.
func checkValue(v Value, path string) error {
	switch {
	case !v.IsString():
		return nil
	case strings.ContainsRune(v.Str(), 0):
		return errorf(path, "must not contain NUL characters (\\u0000)")
	case !utf8.ValidString(v.Str()):
		return errorf(path, "must be valid UTF-8")
	}
	return nil
}

// valueMessage is the error message of a bad value, in both forms.
const valueMessage = "must be an integer or a string"

// parseJSONValue reads a value's JSON form. Its errors are a strategy's: they
// name the node's path, say why an integer is refused (out of the int64 range), and check
// a string value as the submissions API does (see checkValue).
func parseJSONValue(raw json.RawMessage, path string) (Value, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Value{}, errorf(path, "%s", valueMessage)
		}
		v := StringValue(s)
		return v, checkValue(v, path)
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil {
		return Value{}, errorf(path, "%s, not %s", valueMessage, abbreviate(raw))
	}
	i, err := strconv.ParseInt(string(num), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return Value{}, errorf(path, "%s; %s is out of the int64 range", valueMessage, abbreviate(raw))
	case err != nil:
		return Value{}, errorf(path, "%s, not %s", valueMessage, abbreviate(raw))
	}
	return IntValue(i), nil
}

// jsonString is s as a JSON string, with <, > and & left as they are.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // cannot fail for a string
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// quote quotes at most 40 bytes of s for an error message.
func quote(s string) string { return strconv.Quote(abbreviate([]byte(s))) }

// abbreviate keeps at most 40 bytes of raw input for an error message.
func abbreviate(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}
