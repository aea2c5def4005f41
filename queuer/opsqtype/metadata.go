package opsqtype

import (
	"encoding/json"
	"fmt"
)

// MetadataValue is a strategic metadata value: an int64 or a string, where 42 and "42"
// are different values; the zero value is the integer 0. It is opsq's one type for such a
// value: submissions and reserved chunks carry it, and a strategy's select_only keeps one.
type MetadataValue struct {
	isString bool
	i        int64
	s        string
}

// Int returns an integer metadata value.
func Int(i int64) MetadataValue { return MetadataValue{i: i} }

// String returns a string metadata value.
func String(s string) MetadataValue { return MetadataValue{isString: true, s: s} }

// IsString reports whether the value is a string.
func (v MetadataValue) IsString() bool { return v.isString }

// Int64 returns the integer value (0 for a string).
func (v MetadataValue) Int64() int64 { return v.i }

// Str returns the string value ("" for an integer).
func (v MetadataValue) Str() string { return v.s }

// String formats the value as it is written in JSON.
func (v MetadataValue) String() string {
	b, _ := v.MarshalJSON()
	return string(b)
}

// MarshalJSON writes a JSON number or string.
func (v MetadataValue) MarshalJSON() ([]byte, error) {
	if v.isString {
		return json.Marshal(v.s)
	}
	return json.Marshal(v.i)
}

// UnmarshalJSON accepts a JSON integer that fits in an int64, or a JSON string.
func (v *MetadataValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = String(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("must be an integer or a string")
	}
	i, err := n.Int64()
	if err != nil {
		return fmt.Errorf("must be an integer or a string, not %s", b)
	}
	*v = Int(i)
	return nil
}
