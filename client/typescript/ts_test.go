// Package typescript holds the TypeScript client (package.json, src/) and the Go test that
// runs its tests, so that "make test" (go test ./...) runs them against real instances.
package typescript

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"opsq/api/apikeys"
	"opsq/api/tracing/tracingtest"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(removeBuilt{pgtest.Wrap(m)})
}

// removeBuilt runs the tests, then removes the opsq that opsqBinary built.
type removeBuilt struct{ pgtest.Runner }

func (r removeBuilt) Run() int {
	code := r.Runner.Run()
	if dir := builtDir; dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// builtDir is the directory of the opsq binary opsqBinary built, removed after the tests.
var builtDir string

// opsqBinary builds opsq once per test binary: the client's tests run against real "opsq
// serve" processes.
var opsqBinary = sync.OnceValues(func() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "opsq-ts-test-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "opsq")
	if out, err := exec.Command(goTool, "build", "-o", bin, "opsq/cmd/opsq").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building opsq: %v\n%s", err, out)
	}
	return bin, nil
})

// nodeMajorMin is the oldest Node.js the client supports (package.json's engines).
const nodeMajorMin = 18

// needTool returns the path of a tool, failing the test with what to install if missing.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: the TypeScript client's tests need Node.js >= %d and npm (Debian: apt-get install nodejs npm; or https://nodejs.org)", name, nodeMajorMin)
	}
	return path
}

// run runs a command in dir with env added, for at most timeout, failing the test with
// its output if it fails; it returns the output.
func run(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s %s failed after %s (%v); its output:\n%s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out.String())
	}
	return out.String()
}

// TestTypeScriptClient builds the TypeScript client (its types generated from
// api/openapi.yaml, then tsc --strict) and runs its tests (node --test, test/*.test.ts)
// against two real instances on a fresh database, with API keys required: OPSQ_URL and
// OPSQ_URL2 are the instances, OPSQ_KEY an admin key, OPSQ_PRODUCER_KEY and
// OPSQ_CONSUMER_KEY keys of those roles; the instances export their spans to an in-process
// OTLP receiver, which OPSQ_SPANS_URL lists (tracingtest.Receiver). Then it runs examples/hello.ts, the README's
// example, and the client in headless Chromium (browser_test.go). "npm ci" installs the
// pinned tools first when node_modules is missing or older than package-lock.json (the
// npm registry must then be reachable).
func TestTypeScriptClient(t *testing.T) {
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	version := strings.TrimSpace(run(t, ".", nil, time.Minute, node, "--version"))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if err != nil || major < nodeMajorMin {
		t.Fatalf("node %s: the TypeScript client needs Node.js >= %d (Debian: apt-get install nodejs npm; or https://nodejs.org)", version, nodeMajorMin)
	}

	// Build while the instances start: npm ci, generate and tsc take a while on a busy
	// machine.
	built := make(chan struct{})
	var out strings.Builder // why the build failed; read once built is closed
	t.Cleanup(func() { <-built })
	go func() {
		defer close(built)
		if needInstall() {
			if b, err := runOut(".", 10*time.Minute, npm, "ci", "--no-audit", "--no-fund"); err != nil {
				out.WriteString("npm ci --no-audit --no-fund failed (" + err.Error() + "):\n" + b)
				return
			}
		}
		for _, script := range []string{"build", "build:test"} {
			if b, err := runOut(".", 10*time.Minute, npm, "run", script); err != nil {
				out.WriteString("npm run " + script + " failed (" + err.Error() + "):\n" + b)
				return
			}
		}
	}()

	bin, err := opsqBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, clustertest.Binary{Path: bin}, pgtest.NewDB(t))
	keys := c.RequireKeys(t, "ts")
	spans := tracingtest.Start(t) // the instances' spans, for test/trace.test.ts
	c.Env = append(c.Env, spans.Env()...)
	insts := c.StartN(2)

	<-built
	if out.Len() > 0 {
		t.Fatal(out.String())
	}
	tests, err := filepath.Glob(filepath.Join("dist-test", "test", "*.test.js"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no tests in dist-test/ after the build (%v)", err)
	}
	sort.Strings(tests)
	args := []string{"--test"}
	if pattern := os.Getenv("OPSQ_TS_TEST_NAME"); pattern != "" {
		args = append(args, "--test-name-pattern", pattern) // for a developer: run some tests only
	}
	log := run(t, ".", []string{
		"OPSQ_URL=" + insts[0].URL,
		"OPSQ_URL2=" + insts[1].URL,
		"OPSQ_KEY=" + keys[apikeys.Admin],
		"OPSQ_PRODUCER_KEY=" + keys[apikeys.Producer],
		"OPSQ_CONSUMER_KEY=" + keys[apikeys.Consumer],
		"OPSQ_SPANS_URL=" + spans.URL + "/spans",
	}, 15*time.Minute, node, append(args, tests...)...)
	t.Log(log)
	// The throughput figures (test/throughput.test.ts), at the end where they are seen.
	for _, line := range strings.Split(log, "\n") {
		if i := strings.Index(line, "figure: "); i >= 0 {
			t.Log(line[i:])
		}
	}

	// The README's example, as written, once the tests are done: its worker takes any
	// chunk, so it must not run beside them.
	example := run(t, ".", []string{"OPSQ_URL=" + insts[1].URL, "OPSQ_KEY=" + keys[apikeys.Admin]}, 5*time.Minute,
		node, filepath.Join("dist-test", "examples", "hello.js"))
	for _, want := range []string{"{ chunk_index: 0, output: 'HELLO' }", "{ chunk_index: 1, output: 'WORLD' }"} {
		if !strings.Contains(example, want) {
			t.Errorf("examples/hello.ts printed:\n%s\nwant a line %s", example, want)
		}
	}

	t.Run("browser", func(t *testing.T) { checkInBrowser(t, insts[0].URL, keys[apikeys.Admin]) })
}

// TestReadmeExample checks that the client's README and the repository's show
// examples/hello.ts as it is, the example TestTypeScriptClient runs.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile(filepath.Join("examples", "hello.ts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"README.md", filepath.Join("..", "..", "README.md")} {
		readme, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(readme, append([]byte("```ts\n"), example...)) {
			t.Errorf("%s does not show examples/hello.ts as it is; want it in a ts block:\n%s", path, example)
		}
	}
}

// needInstall says whether node_modules is missing, or older than package-lock.json (npm
// ci has not run since the pinned versions changed).
func needInstall() bool {
	installed, err := os.Stat(filepath.Join("node_modules", ".package-lock.json"))
	if err != nil {
		return true
	}
	lock, err := os.Stat("package-lock.json")
	return err != nil || lock.ModTime().After(installed.ModTime())
}

// runOut runs a command in dir for at most timeout and returns its output and error.
func runOut(dir string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}
