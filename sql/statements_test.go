package sql

import (
	"testing"
)

// TestSource: Source returns a statement's text as its method sends it, and panics on a
// file that does not exist.
func TestSource(t *testing.T) {
	t.Parallel()
	if got := Source("holds_take.sql"); got != holdsTake {
		t.Errorf("Source(holds_take.sql) = %q; want the text HoldsTake sends, %q", got, holdsTake)
	}
	for _, name := range []string{"nothing.sql", "admin/drain_instance.sql", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Source(%q) did not panic; want a panic", name)
				}
			}()
			Source(name)
		}()
	}
}
