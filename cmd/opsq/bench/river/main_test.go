package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// envURL names the server the tests run against, as in opsq's own tests.
const envURL = "OPSQ_TEST_DATABASE_URL"

// binary is the command under test, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "opsq-river-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "river")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the command: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// setup returns the URL of a fresh database on the server at OPSQ_TEST_DATABASE_URL,
// dropped when the test ends.
func setup(t *testing.T) string {
	t.Helper()
	serverURL := os.Getenv(envURL)
	if serverURL == "" {
		t.Fatalf("%s is not set: point it at a PostgreSQL server where the tests may CREATE DATABASE, "+
			"e.g. %s=postgres://postgres@127.0.0.1:5432/postgres go test ./...", envURL, envURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", envURL, err)
	}
	defer conn.Close(ctx)

	name := fmt.Sprintf("opsq_river_bench_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			t.Errorf("connecting to drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})

	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", envURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// started is a running command with its streams.
type started struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr *strings.Builder
}

func start(t *testing.T, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	return &started{cmd: cmd, stdin: stdin, stdout: bufio.NewScanner(stdout), stderr: stderr}
}

// line returns the next line on stdout, failing the test if there is none.
func (s *started) line(t *testing.T, want string) string {
	t.Helper()
	if !s.stdout.Scan() {
		_ = s.cmd.Wait()
		t.Fatalf("stdout ended before %s; stderr:\n%s", want, s.stderr)
	}
	return s.stdout.Text()
}

func TestBurnDown(t *testing.T) {
	t.Parallel()
	dbURL := setup(t)
	const jobs = 2000

	// Twice on the same database: the second run migrates nothing and must not count
	// the first run's jobs.
	for run := 1; run <= 2; run++ {
		s := start(t, "-database-url", dbURL, "-jobs", fmt.Sprint(jobs), "-workers", "2000")
		if got := s.line(t, "ready"); got != "ready" {
			t.Fatalf("run %d: first line %q; want ready", run, got)
		}
		if _, err := io.WriteString(s.stdin, "start\n"); err != nil {
			t.Fatalf("run %d: writing the start line: %v", run, err)
		}
		got := s.line(t, "the result")

		var res result
		dec := json.NewDecoder(strings.NewReader(got))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("run %d: result %q is not the JSON line wanted: %v", run, got, err)
		}
		if res.Jobs != jobs {
			t.Errorf("run %d: jobs %d; want %d", run, res.Jobs, jobs)
		}
		if res.Seconds <= 0 || res.JobsPerSecond <= 0 {
			t.Errorf("run %d: seconds %v, jobs_per_second %v; want both positive", run, res.Seconds, res.JobsPerSecond)
		}
		if want := float64(jobs) / res.Seconds; math.Abs(res.JobsPerSecond-want) > want*0.01 {
			t.Errorf("run %d: jobs_per_second %v; want jobs/seconds = %.1f", run, res.JobsPerSecond, want)
		}
		if !strings.HasPrefix(res.RiverVersion, "v0.") && !strings.HasPrefix(res.RiverVersion, "v1.") {
			t.Errorf("run %d: river_version %q; want a module version such as v0.51.1", run, res.RiverVersion)
		}
		if s.stdout.Scan() {
			t.Errorf("run %d: unexpected line after the result: %q", run, s.stdout.Text())
		}
		if err := s.cmd.Wait(); err != nil {
			t.Fatalf("run %d: exit: %v; stderr:\n%s", run, err, s.stderr)
		}
		if !strings.Contains(s.stderr.String(), fmt.Sprintf("inserted %d/%d jobs", jobs, jobs)) {
			t.Errorf("run %d: stderr shows no insert progress:\n%s", run, s.stderr)
		}

		// What the database holds, independently of the command's own check.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		var completed, total int
		err = conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM river_job").Scan(&completed, &total)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if completed != jobs || total != jobs {
			t.Errorf("run %d: river_job holds %d jobs, %d completed; want %d, all completed", run, total, completed, jobs)
		}
	}
}

func TestStdinClosedBeforeStart(t *testing.T) {
	t.Parallel()
	dbURL := setup(t)

	s := start(t, "-database-url", dbURL, "-jobs", "10")
	if got := s.line(t, "ready"); got != "ready" {
		t.Fatalf("first line %q; want ready", got)
	}
	s.stdin.Close()
	err := s.cmd.Wait()
	if err == nil {
		t.Fatalf("exit 0 with stdin closed before the start line; want an error")
	}
	if want := "standard input closed before the start line"; !strings.Contains(s.stderr.String(), want) {
		t.Errorf("stderr %q; want it to say %q", s.stderr, want)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no database", []string{"-jobs", "10"}, "-database-url is required"},
		{"no jobs", []string{"-database-url", "postgres://x@127.0.0.1:1/x"}, "-jobs is 0"},
		{"too many workers", []string{"-database-url", "postgres://x@127.0.0.1:1/x", "-jobs", "1", "-workers", "10001"}, "-workers is 10001"},
		// Port 1 on loopback: nothing listens there.
		{"unreachable", []string{"-database-url", "postgres://x@127.0.0.1:1/x", "-jobs", "1"}, "cannot reach PostgreSQL at 127.0.0.1:1/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			cmd := exec.Command(binary, tt.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("exit 0; want an error saying %q", tt.want)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q; want it to say %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q; want nothing", stdout.String())
			}
		})
	}
}
