package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(removeBuilt{pgtest.Wrap(m)})
}

// removeBuilt runs the tests, then removes the opsq that opsqBinary built.
type removeBuilt struct{ pgtest.Runner }

func (r removeBuilt) Run() int {
	code := r.Runner.Run()
	if builtOnce.Load() {
		if bin, err := opsqBinary(); err == nil {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	return code
}

// builtOnce says whether a test asked for the opsq binary.
var builtOnce atomic.Bool

// opsqBinary builds opsq once per test binary and returns its path: "opsq bench" starts
// its instances from its own binary with a clean environment, so the end-to-end tests run
// a real opsq rather than this test binary.
var opsqBinary = sync.OnceValues(func() (string, error) {
	builtOnce.Store(true)
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "opsq-bench-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "opsq")
	if out, err := exec.Command(goTool, "build", "-o", bin, "opsq/cmd/opsq").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building opsq: %v\n%s", err, out)
	}
	return bin, nil
})

// buildOpsq returns the path of an opsq binary, failing the test if it cannot be built.
func buildOpsq(t *testing.T) string {
	t.Helper()
	bin, err := opsqBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// benchOutput is what runBench saw of a bench: its standard output (the JSON report), its
// standard error, and its process id (its scratch databases are named after it).
type benchOutput struct {
	stdout, stderr *bytes.Buffer
	pid            int
}

// runBench runs "opsq bench --database-url <a new test database> --json args..." from a
// built binary, for at most timeout.
func runBench(t *testing.T, timeout time.Duration, args ...string) (benchOutput, error) {
	t.Helper()
	bin := buildOpsq(t)
	dbURL := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--database-url", dbURL, "--json"}, args...)...)
	out := benchOutput{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = out.stdout, out.stderr
	err := cmd.Run()
	if cmd.Process != nil {
		out.pid = cmd.Process.Pid
	}
	return out, err
}

// report decodes the bench's JSON report, failing the test if it is not one.
func (o benchOutput) report(t *testing.T) benchReport {
	t.Helper()
	var r benchReport
	if err := json.Unmarshal(o.stdout.Bytes(), &r); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s\nstderr:\n%s", err, o.stdout.String(), o.stderr.String())
	}
	return r
}
