package sql

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citusLists are the lists of tests that make test-citus runs (Makefile), each with the
// directory of the package whose tests it names.
var citusLists = []string{"../queuer", "../cmd/opsq", "../api"}

// testFunc is the declaration of a top-level test function.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w*)\(`)

// declaredTests reads the test functions that dir's _test.go files declare.
func declaredTests(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			declared[string(m[1])] = true
		}
	}
	return declared
}

// listedTests reads a Citus list: one test name a line; blank lines are skipped.
func listedTests(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	return names
}

// TestCitusListsNameRealTests: every name in the three testdata/citus_tests.txt is a test
// its package declares, once. make test-citus runs them by a -run pattern, which a
// renamed or misspelt test would silently match nothing of, and the test would not run on
// Citus any more.
func TestCitusListsNameRealTests(t *testing.T) {
	for _, dir := range citusLists {
		declared := declaredTests(t, dir)
		if len(declared) == 0 {
			t.Fatalf("%s: no test declared; is the path right?", dir)
		}
		list := filepath.Join(dir, "testdata", "citus_tests.txt")
		names := listedTests(t, list)
		if len(names) == 0 {
			t.Errorf("%s: empty", list)
		}
		for i, n := range names {
			if !declared[n] {
				t.Errorf("%s: %q is no func %s( declared in %s", list, n, n, dir)
			}
			if slices.Contains(names[:i], n) {
				t.Errorf("%s: %q listed twice", list, n)
			}
		}
	}
}

// TestCitusListsCheckCanFail: the check finds a name no test declares.
func TestCitusListsCheckCanFail(t *testing.T) {
	declared := declaredTests(t, "../queuer")
	if !declared["TestPauseResume"] {
		t.Fatal("TestPauseResume, declared in queuer, not found")
	}
	for _, n := range []string{"TestPauseResum", "TestNoSuchTest", "Pause"} {
		if declared[n] {
			t.Errorf("%q found declared; want not", n)
		}
	}
}
