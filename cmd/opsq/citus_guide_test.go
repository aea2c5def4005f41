package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/sql/pglocal"
	"opsq/sql/pgtest"
)

// docs/operations.md's "Running on Citus" runs as a test, as the README's walkthrough does
// (readme_test.go, whose rules it follows): every ```sh block of the section, in order, in
// one bash, against the test kit's coordinator and 2 workers (OPSQ_TEST_CITUS=1). Two
// things are not as written: the block that names the nodes (its first line is
// citusGuideNodesMarker) gets the test cluster's addresses, and citusGuideAddr a free port.

const (
	operationsPath        = "../../docs/operations.md"
	citusGuideHeading     = "## Running on Citus"
	citusGuideNodesMarker = "# the nodes' addresses"
	citusGuideAddr        = "127.0.0.1:4001"
	citusGuideDeadline    = 4 * time.Minute // about 20 s here; this holds on a busy machine
)

var citusGuide = readmeSection{heading: citusGuideHeading, subsections: []string{
	"### The nodes", "### The database, the extension, the workers", "### Migrate, at the coordinator",
	"### Serve", "### A first burn-down, and where its rows are", "### What to watch",
}}

// citusGuideSteps reads the section's steps and finds the one that names the nodes.
func citusGuideSteps(t *testing.T) (steps []readmeStep, nodes int) {
	t.Helper()
	raw, err := os.ReadFile(operationsPath)
	if err != nil {
		t.Fatal(err)
	}
	steps, err = sectionSteps(string(raw), citusGuide)
	if err != nil {
		t.Fatalf("docs/operations.md: %v", err) // its line numbers are operations.md's
	}
	nodes = -1
	checks := 0
	for i, s := range steps {
		if strings.HasPrefix(s.script, citusGuideNodesMarker) {
			nodes = i
		}
		for _, w := range s.want {
			if len(expectedWords(w)) == 0 {
				t.Fatalf("docs/operations.md:%d: %q%s shows no word to check", s.line, expectationPrefix, w)
			}
			checks++
		}
	}
	if nodes < 0 {
		t.Fatalf("docs/operations.md's %q has no block beginning %q", citusGuideHeading, citusGuideNodesMarker)
	}
	if checks < 6 {
		t.Fatalf("docs/operations.md's %q shows %d outputs; want at least 6", citusGuideHeading, checks)
	}
	return steps, nodes
}

func TestOperationsRunningOnCitus(t *testing.T) {
	steps, nodesStep := citusGuideSteps(t)
	if !pgtest.Citus() {
		t.Skipf("the guide's %d steps run on Citus only: %s=1 (make test-citus)", len(steps), pgtest.EnvCitus)
	}

	// The test kit's nodes: the coordinator of a fresh database, and its workers.
	dbURL := pgtest.NewDB(t)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	coordinator := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	var workers []string
	workerURLs := pgtest.CitusWorkerURLs(t, dbURL)
	for _, u := range workerURLs {
		w, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, fmt.Sprintf("%s:%d", w.Host, w.Port))
	}
	if len(workers) != pgtest.CitusWorkers {
		t.Fatalf("workers %v; want %d", workers, pgtest.CitusWorkers)
	}
	nodesBlock := fmt.Sprintf("export PGUSER=%s\nCOORDINATOR=%s\nWORKERS=%q\n", cfg.User, coordinator, strings.Join(workers, " "))
	// The guide's database, "opsq", made by its steps on every node and dropped after.
	guideURLs := []string{strings.Replace(dbURL, "/"+cfg.Database+"?", "/postgres?", 1)}
	for _, u := range workerURLs {
		guideURLs = append(guideURLs, strings.Replace(u, "/"+cfg.Database+"?", "/postgres?", 1))
	}
	t.Cleanup(func() {
		for i := len(guideURLs) - 1; i >= 0; i-- { // the workers first
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			conn, err := pgx.Connect(ctx, guideURLs[i])
			if err == nil {
				_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS opsq WITH (FORCE)")
				conn.Close(ctx)
			}
			cancel()
			if err != nil { // it goes with the test cluster
				t.Logf("dropping the guide's database on node %d: %v", i, err)
			}
		}
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	// The reader's machine: opsq (this test binary, TestMain) and psql on the PATH.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "bin", "opsq")); err != nil {
		t.Fatal(err)
	}
	pgBin, err := pglocal.BinDir()
	if err != nil {
		t.Fatal(err)
	}

	outDir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -eu\n")
	for i, s := range steps {
		body := s.script
		if i == nodesStep {
			body = nodesBlock
		}
		body = strings.ReplaceAll(body, citusGuideAddr, addr)
		fmt.Fprintf(&script, "{\n%s} > %q 2>&1\n: > %q\n", body,
			filepath.Join(outDir, fmt.Sprint(i)), filepath.Join(outDir, fmt.Sprint(i)+".ok"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), citusGuideDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSQ_") && !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Join(dir, "bin")+":"+pgBin+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, opsqBinary.Env...)
	// Its own process group, so that an instance the steps left running (a step that
	// failed before the last block's kill) is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runOut, runErr := cmd.CombinedOutput()
	stopGroup(t, cmd.Process.Pid)
	t.Logf("docs/operations.md's %d Citus steps ran in %s", len(steps), time.Since(start).Round(time.Millisecond))

	for i, s := range steps {
		out, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprint(i)))
		if testing.Verbose() {
			t.Logf("docs/operations.md:%d printed:\n%s", s.line, out)
		}
		if _, err := os.Stat(filepath.Join(outDir, fmt.Sprint(i)+".ok")); err != nil {
			t.Fatalf("docs/operations.md:%d: the guide stopped here (%v; %s):\n%s\nprinted:\n%s",
				s.line, runErr, strings.TrimSpace(string(runOut)), s.script, out)
		}
		for _, w := range s.want {
			if !printedLine(string(out), expectedWords(w)) {
				t.Errorf("docs/operations.md:%d: after\n%swant a line with the words of %q (%s); printed:\n%s",
					s.line, s.script, w, strings.Join(expectedWords(w), " "), out)
			}
		}
	}
	if runErr != nil {
		t.Fatalf("the guide's bash: %v\n%s", runErr, runOut)
	}

	// What the guide promises, checked apart from what it prints: the chunks' tables are
	// on the workers, none of their shards on the coordinator, and the burn-down finished.
	conn, err := pgx.Connect(t.Context(), strings.Replace(guideURLs[0], "/postgres?", "/opsq?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var onCoordinator, nodes, done int
	if err := conn.QueryRow(t.Context(), `
SELECT count(*) FILTER (WHERE nodeport = inet_server_port()), count(DISTINCT nodeport)
FROM citus_shards WHERE table_name = 'opsq.chunks'::regclass`).Scan(&onCoordinator, &nodes); err != nil {
		t.Fatal(err)
	}
	if onCoordinator != 0 || nodes != pgtest.CitusWorkers {
		t.Errorf("opsq.chunks: %d shards on the coordinator, shards on %d nodes; want 0, and %d workers", onCoordinator, nodes, pgtest.CitusWorkers)
	}
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM opsq.submissions_completed").Scan(&done); err != nil || done != 1 {
		t.Errorf("%d completed submissions (%v); want the guide's 1", done, err)
	}
}

// stopGroup ends what is left of process group pgid (an instance started in the
// background) and waits until it is gone.
func stopGroup(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	t.Errorf("processes of the guide's steps outlived it by 15 s; killed")
}
