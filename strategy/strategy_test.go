package strategy

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		want     Kind
		errPath  string
		hasError bool
	}{
		{in: ``, want: Random},
		{in: `null`, want: Random},
		{in: `"random"`, want: Random},
		{in: `"oldest_first"`, want: OldestFirst},
		{in: `"newest_first"`, want: NewestFirst},
		{in: `"fastest"`, hasError: true, errPath: "strategy"},
		{in: `42`, hasError: true, errPath: "strategy"},
		{in: `{}`, hasError: true, errPath: "strategy"},
		{in: `{"whatever": {}}`, hasError: true, errPath: "strategy.whatever"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, err := Parse(json.RawMessage(tc.in), "strategy")
			if tc.hasError {
				var se *Error
				if !errors.As(err, &se) || se.Path != tc.errPath {
					t.Fatalf("Parse(%s) = %v, %v; want an error at %s", tc.in, n, err, tc.errPath)
				}
				return
			}
			if err != nil || n.Kind != tc.want {
				t.Fatalf("Parse(%s) = %v, %v; want %s", tc.in, n, err, tc.want)
			}
		})
	}
}
