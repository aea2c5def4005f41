package strategy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "write the candidate queries' golden files in testdata/candidates")

// goldenCases are the candidate queries of every leaf, with no filter, one, two and a
// filter of several values, over one shard and three.
func goldenCases() map[string]func() (string, map[string]any) {
	filters := map[string][]Filter{
		"nofilter": nil,
		"filter":   {{Key: "mode", Value: []byte(`"preview"`)}},
		"filters":  {{Key: "mode", Value: []byte(`"preview"`)}, TenantFilter([]string{"acme", "globex"})},
	}
	shards := map[string][]int32{"1shard": {5}, "3shards": {0, 7, 63}}
	cases := map[string]func() (string, map[string]any){}
	for fn, f := range filters {
		for sn, s := range shards {
			for _, leaf := range []Kind{Random, OldestFirst, NewestFirst, CustomPriority} {
				cases[fmt.Sprintf("%s_%s_%s", leaf, fn, sn)] = func() (string, map[string]any) { return CandidateQuery(leaf, f, s) }
			}
			cases[fmt.Sprintf("submission_%s_%s", fn, sn)] = func() (string, map[string]any) { return SubmissionQuery(f, s) }
		}
	}
	return cases
}

// golden is a query and its arguments as the golden files hold them.
func golden(q string, args map[string]any) string {
	var b strings.Builder
	b.WriteString(q + "\n")
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "-- @%s = %v\n", k, args[k])
	}
	return b.String()
}

// TestCandidateQueriesGolden: the text of every candidate query, and its arguments, is
// what testdata/candidates holds: the plans the EXPLAIN tests check are of exactly these
// texts, and a change to a skeleton in sql must be seen in a review (go test
// -update-golden writes them anew).
func TestCandidateQueriesGolden(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "candidates")
	for name, fn := range goldenCases() {
		got := golden(fn())
		path := filepath.Join(dir, name+".sql")
		if *updateGolden {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./strategy -run CandidateQueriesGolden -update-golden writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
		}
	}
}
