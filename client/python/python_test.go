package python

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/api/apikeys"
	"opsq/api/tracing/tracingtest"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Wrap(m).Run()
	if built.Load() {
		if bin, err := opsqBinary(); err == nil {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// built says whether a test asked for the opsq binary (removed at the end).
var built atomic.Bool

// opsqBinary builds opsq once per test binary and returns its path.
var opsqBinary = sync.OnceValues(func() (string, error) {
	built.Store(true)
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "opsq-python-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "opsq")
	if out, err := exec.Command(goTool, "build", "-o", bin, "opsq/cmd/opsq").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building opsq: %v\n%s", err, out)
	}
	return bin, nil
})

// python3 returns the path of python3, failing the test (never skipping it) when there is
// none or it is older than the client supports.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found: the Python client's tests need Python 3.9 or newer on the PATH (Debian: apt-get install python3 python3-venv)")
	}
	out, err := exec.Command(py, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(0 if sys.version_info >= (3, 9) else 1)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s is Python %s: the Python client needs 3.9 or newer (%v)", py, strings.TrimSpace(string(out)), err)
	}
	return py
}

// pythonEnv is this process's environment without OPSQ_ variables (the tests get theirs
// from the cluster), plus extra.
func pythonEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSQ_") && !strings.HasPrefix(kv, "PYTHON") && !strings.HasPrefix(kv, "PIP_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestPythonClient runs the Python client's unittest suite (tests/) against two real
// "opsq serve" processes with API keys required: OPSQ_URL and OPSQ_KEY (an admin key)
// name the first, OPSQ_TEST_URLS both, and OPSQ_TEST_PRODUCER_KEY and
// OPSQ_TEST_CONSUMER_KEY keys of those roles. The instances export their spans to an
// in-process OTLP receiver, which OPSQ_TEST_SPANS_URL lists (tracingtest.Receiver).
func TestPythonClient(t *testing.T) {
	py := python3(t)
	bin, err := opsqBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, clustertest.Binary{Path: bin}, pgtest.NewDB(t))
	keys := c.RequireKeys(t, "python")
	spans := tracingtest.Start(t) // the instances' spans, for tests/test_trace.py
	c.Env = append(c.Env, spans.Env()...)
	insts := c.StartN(2)

	env := pythonEnv(
		"OPSQ_URL="+insts[0].URL,
		"OPSQ_KEY="+keys[apikeys.Admin],
		"OPSQ_TEST_URLS="+strings.Join(clustertest.URLs(insts...), ","),
		"OPSQ_TEST_PRODUCER_KEY="+keys[apikeys.Producer],
		"OPSQ_TEST_CONSUMER_KEY="+keys[apikeys.Consumer],
		"OPSQ_TEST_SPANS_URL="+spans.URL+"/spans",
		"PYTHONPATH="+dir,
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
	)

	// The README's example first, while the instances hold nothing else (its worker
	// takes whatever chunk comes). The repository's README shows it too.
	example := readmeExample(t, filepath.Join(dir, "README.md"))
	if top := readmeExample(t, filepath.Join(dir, "..", "..", "README.md")); top != example {
		t.Errorf("README.md's python example:\n%s\nwant client/python/README.md's, which this test runs:\n%s", top, example)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", example)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // the worker's notes: "opsq worker: stopped: 2 done, ..."
	got, err := cmd.Output()
	if want := "['HELLO', 'WORLD']\n"; err != nil || string(got) != want {
		t.Fatalf("the README's example:\n%s\nprinted %q (%v); want %q; stderr:\n%s", example, got, err, want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "opsq worker: stopped: 2 done, 0 failed, 0 lost") {
		t.Errorf("the README's example said on stderr:\n%s\nwant the worker's last note, opsq worker: stopped: 2 done, 0 failed, 0 lost", stderr.String())
	}

	ctx, cancel = context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd = exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if err != nil {
		t.Fatalf("python3 -m unittest discover -s client/python/tests: %v after %s\n%s", err, time.Since(start).Round(time.Second), out.String())
	}
	// The throughput figures (tests/test_throughput.py), shown with go test -v.
	for _, line := range strings.Split(out.String(), "\n") {
		if i := strings.Index(line, "figure: "); i >= 0 {
			t.Log(line[i:])
		}
	}
	if testing.Verbose() {
		t.Logf("the Python suite passed in %s:\n%s", time.Since(start).Round(time.Second), out.String())
	}
}

// readmeExample returns the first python block of the README, the five-line example.
func readmeExample(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n```python\n")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatalf("%s has no python block", path)
	}
	if n := strings.Count(block, "\n") + 1; n != 5 {
		t.Errorf("the README's example is %d lines; the docs promise five", n)
	}
	return block
}

// TestPipInstall installs the client with "pip install ./client/python" into a fresh
// venv, as the README says, with no package index to reach, and imports it from
// elsewhere.
func TestPipInstall(t *testing.T) {
	t.Parallel()
	py := python3(t)
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(t.TempDir(), "venv")
	run := func(what string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = pythonEnv("PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %s %s: %v\n%s", what, name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("creating a venv (Debian: apt-get install python3-venv)", py, "-m", "venv", venv)
	run("installing the client", filepath.Join(venv, "bin", "pip"), "install", dir)
	got := run("importing the installed client", filepath.Join(venv, "bin", "python"), "-c",
		"import opsq, os, sys; print(opsq.__version__); print(os.path.realpath(opsq.__file__).startswith(os.path.realpath(sys.prefix)))")
	if lines := strings.Fields(got); len(lines) != 2 || lines[1] != "True" {
		t.Errorf("the installed opsq: got %q; want its version and True (imported from the venv)", got)
	}
	for _, leftover := range []string{"build", "opsq.egg-info"} {
		if _, err := os.Stat(filepath.Join(dir, leftover)); err == nil {
			t.Errorf("pip install left %s in the source tree", leftover)
		}
	}
}
