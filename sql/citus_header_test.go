package sql

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// citusHeaderPrefix begins the line of a statement's contract header that says what the
// statement is on Citus (docs/citus.md): router on one node (and by what), multi-shard,
// the coordinator's own tables, or that it has a Citus form (layout.go).
const citusHeaderPrefix = "-- Citus: "

// citusHeaderExempt are the statements that do not say it yet. A file leaves this list
// when its header gets the line; none is left.
var citusHeaderExempt = []string{}

// citusHeader returns the "Citus:" line of a statement's contract header (the comment
// lines it begins with), and whether it has one.
func citusHeader(text string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "--") || l == "-- next statement" {
			return "", false
		}
		if strings.HasPrefix(l, citusHeaderPrefix) && len(strings.TrimSpace(strings.TrimPrefix(l, citusHeaderPrefix))) > 0 {
			return l, true
		}
	}
	return "", false
}

// TestEveryStatementSaysWhatItIsOnCitus: every statement file's contract header has a
// "Citus:" line, but the exempt ones', which must not have one (then they leave the list).
func TestEveryStatementSaysWhatItIsOnCitus(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(sources, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("%d statement files; want sql/*.sql (over 100)", len(files))
	}
	for _, name := range citusHeaderExempt {
		if !slices.Contains(files, name) {
			t.Errorf("%s is exempt but is not a statement file: take it off citusHeaderExempt", name)
		}
	}
	for _, name := range files {
		_, has := citusHeader(Source(name))
		switch exempt := slices.Contains(citusHeaderExempt, name); {
		case exempt && has:
			t.Errorf("%s's header says what it is on Citus: take it off citusHeaderExempt", name)
		case !exempt && !has:
			t.Errorf("%s: no %q line in its contract header (the comment lines it begins with): say what it is on Citus (docs/citus.md)", name, strings.TrimSpace(citusHeaderPrefix))
		}
	}
}

func TestCitusHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"-- Reads a thing.\n-- Citus: router (U, by @id).\nSELECT 1", true},
		{"-- Citus: the coordinator's own tables.\nSELECT 1", true},
		{"-- Reads a thing.\nSELECT 1\n-- Citus: router (U, by @id).", false}, // not in the header
		{"SELECT 1", false},
		{"-- Citus:\nSELECT 1", false}, // says nothing
		{"-- Reads.\n-- next statement\n-- Citus: router.\nSELECT 1", false},
	} {
		if _, got := citusHeader(tc.text); got != tc.want {
			t.Errorf("citusHeader(%q) found one: %t; want %t", tc.text, got, tc.want)
		}
	}
}
