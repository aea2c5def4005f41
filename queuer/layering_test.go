package queuer_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The layering of the module, as a table: each package may import, of the module's own
// packages, only those its rule lists. The engine's parts live under queuer/internal, so
// Go already keeps everything outside queuer from reaching them; this table holds the rest
// of what docs/engine.md says: the engine imports neither the wire nor the clients, the
// vocabulary and the shared leaves import nothing of the module, the parts never import
// their façade, and the API, the dashboard, the CLI and the bench reach the engine through
// package queuer alone.
//
// A pattern ending in "/..." is the package and every package below it. Rules are tried in
// order; the first whose package matches applies, and every package of the module must
// match one (a new package is placed here on purpose, not by accident).

// leaves are the packages that every layer may use: the vocabulary and the shapes that
// are not the engine.
var leaves = []string{"opsq/queuer/opsqtype", "opsq/queuer/identity", "opsq/queuer/panics", "opsq/queuer/startstop"}

// below is what the engine stands on.
var below = []string{"opsq/claims", "opsq/reserver", "opsq/sql", "opsq/strategy"}

var layering = []struct {
	pkg string   // the package (or packages, "/...") the rule is about
	may []string // the module's packages it may import
}{
	// The vocabulary and the shared shapes: leaves.
	{"opsq/queuer/opsqtype", nil},
	{"opsq/queuer/identity", nil},
	{"opsq/queuer/panics", nil},
	{"opsq/queuer/startstop", nil},
	// What the engine stands on.
	{"opsq/reserver", nil},
	{"opsq/migrations", nil},
	{"opsq/sql/pglocal", nil},
	{"opsq/sql/pgtest", []string{"opsq/migrations", "opsq/reserver", "opsq/sql/pglocal"}},
	{"opsq/sql", []string{"opsq/queuer/opsqtype"}},
	{"opsq/strategy", []string{"opsq/sql", "opsq/queuer/opsqtype"}},
	{"opsq/claims", []string{"opsq/sql", "opsq/queuer/opsqtype"}},
	// The engine: the parts never import the façade, the wire or the clients.
	{"opsq/queuer/internal/...", concat(leaves, below, []string{"opsq/queuer/internal/..."})},
	{"opsq/queuer/queuertest", concat(leaves, below, []string{"opsq/queuer", "opsq/queuer/internal/...", "opsq/sql/pgtest"})},
	{"opsq/queuer", concat(leaves, below, []string{"opsq/queuer/internal/..."})},
	// The wire and the clients: the vocabulary, never the engine.
	{"opsq/api/wire", []string{"opsq/queuer/opsqtype"}},
	{"opsq/client", []string{"opsq/api/wire", "opsq/queuer/opsqtype"}},
	{"opsq/client/...", nil}, // the Python and TypeScript clients' Go tests
	{"opsq/deploy", nil},     // the deployment files' Go tests
	{"opsq/docs", nil},       // the docs' Go tests
	// The API and the dashboard: the engine through its façade alone.
	{"opsq/api/tracing/...", nil},
	{"opsq/api/apikeys", concat(leaves, []string{"opsq/queuer", "opsq/sql"})},
	{"opsq/api/ui", concat(leaves, []string{"opsq/api/apikeys", "opsq/api/wire", "opsq/queuer", "opsq/strategy"})},
	{"opsq/api", concat(leaves, []string{"opsq/api/...", "opsq/queuer", "opsq/strategy"})},
	// The CLI and the bench: the façade, the API, the client; the CLI also migrates and
	// reads the settings and keys as an operator's tool; the bench starts local PostgreSQL
	// and Citus clusters of its own (its citus workload), through pglocal.
	{"opsq/cmd/opsq/progress", []string{"opsq/api/wire"}},
	{"opsq/cmd/opsq/clustertest", concat(leaves, []string{"opsq/api/...", "opsq/client", "opsq/queuer"})},
	{"opsq/cmd/opsq/bench", concat(leaves, []string{"opsq/api/...", "opsq/client", "opsq/cmd/opsq/clustertest", "opsq/cmd/opsq/progress", "opsq/queuer", "opsq/sql/pglocal", "opsq/strategy"})},
	{"opsq/cmd/opsq", concat(leaves, []string{"opsq/api/...", "opsq/claims", "opsq/client", "opsq/cmd/opsq/...", "opsq/migrations", "opsq/queuer", "opsq/sql/...", "opsq/strategy"})},
}

func concat(lists ...[]string) []string { return slices.Concat(lists...) }

// goList runs "go list" with args over the module.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	tool, err := exec.LookPath("go")
	if err != nil {
		tool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(tool, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v (the test needs the go tool, on the PATH or in GOROOT)", strings.Join(args, " "), err)
	}
	return out
}

// matches reports whether pkg is pattern, or below it for a pattern ending in "/...".
func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// TestLayering checks every package's imports of the module's own packages (not its
// tests': a test may reach further, and Go keeps even tests out of queuer/internal from
// outside queuer) against the table.
func TestLayering(t *testing.T) {
	t.Parallel()
	out := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "opsq/...")
	pkgs := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, imports := fields[0], fields[1:]
		pkgs++
		rule := -1
		for i, r := range layering {
			if matches(r.pkg, pkg) {
				rule = i
				break
			}
		}
		if rule < 0 {
			t.Errorf("%s matches no rule of the layering table: add one (queuer/layering_test.go)", pkg)
			continue
		}
		for _, imp := range imports {
			if imp != "opsq" && !strings.HasPrefix(imp, "opsq/") {
				continue
			}
			if !slices.ContainsFunc(layering[rule].may, func(p string) bool { return matches(p, imp) }) {
				t.Errorf("%s imports %s, which its rule (%q) does not allow", pkg, imp, layering[rule].pkg)
			}
		}
	}
	if pkgs < 20 {
		t.Fatalf("go list listed %d packages of the module; want them all", pkgs)
	}
}

// TestLayeringRulesMatter: a rule that no package matches is stale.
func TestLayeringRulesMatter(t *testing.T) {
	t.Parallel()
	pkgs := strings.Fields(string(goList(t, "opsq/...")))
	for _, r := range layering {
		if !slices.ContainsFunc(pkgs, func(p string) bool { return matches(r.pkg, p) }) {
			t.Errorf("no package matches the rule %q: remove it", r.pkg)
		}
	}
}
