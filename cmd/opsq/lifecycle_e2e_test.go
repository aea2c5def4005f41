package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
)

// End-to-end tests of the lifecycle commands against a real opsq instance, in process
// (startWorkServer). All but the first need the submissions store's operations.

// runCLI runs one client command and returns its stdout, stderr and error.
func runCLI(ctx context.Context, t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) error, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr lockedBuffer
	err := run(ctx, args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestWorkSaysTheSubmissionFailed: a command still running when another chunk fails its
// submission is killed, and the worker says that the submission failed, not that the chunk
// went elsewhere.
func TestWorkSaysTheSubmissionFailed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 0, "fail", "slow")
	dir := t.TempDir()
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--lease", "3s", "--concurrency", "2", "--", "sh", "-c",
		`if [ "$(cat)" = fail ]; then echo broken >&2; exit 3; fi; touch `+filepath.Join(dir, "slow")+`; sleep 60`)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if want := "submission " + id + " failed (chunk 0: exit status 3: broken)"; !strings.Contains(stderr, want) {
		t.Errorf("stderr\n%s\nwant %q", stderr, want)
	}
	if strings.Contains(stderr, "went elsewhere") {
		t.Errorf("stderr\n%s\nsays the chunk went elsewhere; want that the submission failed", stderr)
	}
}

// TestWorkRetryAfterExit: a command that exits with the status given to
// --retry-after-exit fails its chunk with --retry-after, which holds it that long.
func TestWorkRetryAfterExit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 5, "x")
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--retry-after-exit", "75", "--retry-after", "1h",
		"--", "sh", "-c", "echo slow down >&2; exit 75")
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	// One attempt only: the chunk waits an hour before it is handed out again.
	if !strings.Contains(stderr, "0 done, 1 failed") {
		t.Errorf("stderr\n%s\nwant one failed attempt", stderr)
	}
	f, err := c.Failures(ctx, id, client.FailuresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Failures) != 1 || f.Failures[0].State != "retrying" || !strings.Contains(f.Failures[0].Error, "retry after 1h0m0s: exit status 75: slow down") {
		t.Errorf("failures %+v; want chunk 0 retrying after its retry-later exit", f.Failures)
	}
}

// TestLifecycleCommands: submit with the lifecycle flags, results --follow, failures,
// retry, pause and resume, as a user runs them.
func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	input := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, input, "a\nbad\nc\n")
	out, errOut, err := runCLI(ctx, t, runSubmit, "--url", u, "--on-failure", "continue", "--max-retries", "0",
		"--backoff-initial", "0s", "--not-before", "0s", input)
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, errOut)
	}
	id := strings.TrimSpace(out)
	st, err := c.Status(ctx, id, 0)
	if err != nil || string(st.OnFailure) != `"continue"` {
		t.Fatalf("status %+v, %v; want on_failure continue", st, err)
	}

	// Follow the results while a worker runs.
	type followed struct {
		out, stderr string
		err         error
	}
	done := make(chan followed, 1)
	go func() {
		out, errOut, err := runCLI(ctx, t, runResults, "--url", u, "--follow", id)
		done <- followed{out, errOut, err}
	}()
	if _, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--", "sh", "-c",
		`if [ "$(cat)" = bad ]; then echo nope >&2; exit 1; fi; echo ok`); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-done:
		if f.err != nil {
			t.Fatalf("results --follow: %v\n%s", f.err, f.stderr)
		}
		want := `{"chunk_index":0,"output":"ok\n"}` + "\n" + `{"chunk_index":1,"state":"failed","error":"exit status 1: nope"}` + "\n" + `{"chunk_index":2,"output":"ok\n"}` + "\n"
		if f.out != want {
			t.Errorf("results --follow printed\n%s\nwant\n%s", f.out, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("results --follow did not end within 30s of the work")
	}

	// failures, as a table and as JSON.
	out, errOut, err = runCLI(ctx, t, runFailures, "--url", u, id)
	if err != nil || !strings.HasPrefix(out, "CHUNK") || !strings.Contains(out, "\n1 ") ||
		!slices.Equal(strings.Fields(strings.Split(out, "\n")[1]), []string{"1", "failed", "0", "exit", "status", "1:", "nope"}) {
		t.Errorf("failures: %v\n%s%s", err, out, errOut)
	}
	out, _, err = runCLI(ctx, t, runFailures, "--url", u, "--json", id)
	var fc wire.FailedChunk
	if err != nil || json.Unmarshal([]byte(out), &fc) != nil || fc.ChunkIndex != 1 || len(fc.Errors) != 1 {
		t.Errorf("failures --json: %v\n%s; want chunk 1 with its error", err, out)
	}

	// retry, then pause and resume. --chunk names the chunks retried: chunk 0 completed,
	// nothing to retry; chunk 1 failed.
	if _, errOut, err = runCLI(ctx, t, runRetry, "--url", u, "--chunk", "0", id); err == nil || !strings.Contains(err.Error()+errOut, "none of the chunks named with --chunk") {
		t.Errorf("retry --chunk 0 (completed): %v %s; want nothing to retry, naming --chunk", err, errOut)
	}
	out, errOut, err = runCLI(ctx, t, runRetry, "--url", u, "--max-retries", "2", "--chunk", "1", id)
	if err != nil || !strings.Contains(out, "retrying "+id+": in_progress") {
		t.Errorf("retry: %v\n%s%s", err, out, errOut)
	}
	if _, errOut, err = runCLI(ctx, t, runRetry, "--url", u, "--max-retries", "2", "12345"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("retry of an unknown id: %v %s; want a 404", err, errOut)
	}
	out, _, err = runCLI(ctx, t, runPause, "--url", u, id)
	if err != nil || !strings.HasPrefix(out, "paused "+id) {
		t.Errorf("pause: %v %q; want paused", err, out)
	}
	out, _, err = runCLI(ctx, t, runResume, "--url", u, id)
	if err != nil || !strings.HasPrefix(out, "running "+id) {
		t.Errorf("resume: %v %q; want running", err, out)
	}
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, _, err = runCLI(ctx, t, runPause, "--url", u, id); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Errorf("pause of a cancelled submission: %v; want the 409 explained", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRetryAll: "opsq retry --all --meta k=v" retries every failed submission with that
// strategic metadata, and no other; usage mistakes name the flag.
func TestRetryAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	none := 0
	submitFailed := func(company int64) string {
		t.Helper()
		created, err := c.Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{MaxRetries: &none,
			StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(company)}}, Chunks: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		return created.ID
	}
	mine := []string{submitFailed(7), submitFailed(7)}
	other := submitFailed(8)
	for { // every chunk of the three, failed: each submission fails
		chunks, err := c.Reserve(ctx, wire.ReserveRequest{Max: 10, Wait: "1s"})
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) == 0 {
			break
		}
		for _, ch := range chunks {
			no := false
			if _, err := c.Fail(ctx, wire.ChunkFailure{Token: ch.Token, Error: "boom", Retry: &no}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stdout, stderr, err := runCLI(ctx, t, runRetry, "--url", u, "--all", "--meta", "company_id=7")
	if err != nil {
		t.Fatalf("retry --all: %v\n%s", err, stderr)
	}
	got := strings.Fields(stdout)
	slices.Sort(got)
	want := slices.Sorted(slices.Values(mine))
	if !slices.Equal(got, want) || !strings.Contains(stderr, "retried 2 submissions") {
		t.Fatalf("retry --all printed %q (stderr %q); want %q and \"retried 2 submissions\"", got, stderr, want)
	}
	for _, id := range append(mine, other) {
		st, err := c.Status(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantState := wire.StateInProgress
		if id == other {
			wantState = wire.StateFailed
		}
		if st.State != wantState {
			t.Errorf("submission %s is %s after the retry; want %s", id, st.State, wantState)
		}
	}
	for _, args := range [][]string{
		{"--all", mine[0]},
		{"--meta", "company_id=7", mine[0]},
		{"--all", "--wait"},
		{"--all", "--chunk", "1"},
		{"--chunk", "x", mine[0]},
		{"--chunk", "1", "--unfinished", mine[0]},
		{},
	} {
		if _, stderr, err := runCLI(ctx, t, runRetry, append([]string{"--url", u}, args...)...); err == nil || !strings.Contains(stderr, "usage:") {
			t.Errorf("retry %q: %v, stderr %q; want a usage error", args, err, stderr)
		}
	}
}

// TestWorkThrottleOnExit: a command that exits with the status given to
// --throttle-on-exit throttles its chunk's value of --throttle-key, cluster-wide: the other
// chunks of that value are not handed out while it lasts, those of other values are.
func TestWorkThrottleOnExit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	submit := func(company int64, chunks ...string) string { return submitForCompany(ctx, t, c, company, chunks...) }
	throttled := submit(1, "refused", "refused", "refused")
	other := submit(2, "b", "c")
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s",
		"--throttle-on-exit", "75", "--throttle-key", "company_id", "--throttle-for", "1h",
		"--", "sh", "-c", `if [ "$(cat)" = refused ]; then echo 429 >&2; exit 75; fi; echo ok`)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	// The first chunk of company 1 is refused and throttles it; its other two are not
	// handed out, the two of company 2 are done. Random order: company 1's may come first
	// or after company 2's.
	if !strings.Contains(stderr, "2 done, 1 failed") || !strings.Contains(stderr, "company_id = 1 throttled until") {
		t.Errorf("stderr\n%s\nwant one failed attempt that throttled company_id 1, and company 2's two chunks done", stderr)
	}
	if got := resultsOf(ctx, t, c, other); len(got) != 2 {
		t.Errorf("results of company 2: %q; want both chunks", got)
	}
	st, err := c.Status(ctx, throttled, 0)
	if err != nil || st.State != wire.StateInProgress {
		t.Errorf("status of company 1: %+v, %v; want in progress, its chunks held back", st, err)
	}
}

// TestWorkThrottleOnStderr: a command that writes a line matching --throttle-on-stderr
// throttles its chunk's value of --throttle-key, cluster-wide, and its chunk fails though
// the command exits 0: the value's other chunks are not handed out while the throttle
// lasts, by this worker or any reserve. A line that does not match does nothing: the
// chunks of the other value are all done.
func TestWorkThrottleOnStderr(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	submit := func(company int64, chunks ...string) string { return submitForCompany(ctx, t, c, company, chunks...) }
	throttled := submit(1, "refused", "refused", "refused")
	other := submit(2, "b", "c", "d")
	// Both write to stderr and exit 0; only the refused ones write the line that matches.
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s",
		"--throttle-on-stderr", `^HTTP 429\b`, "--throttle-key", "company_id", "--throttle-for", "1h",
		"--", "sh", "-c", `if [ "$(cat)" = refused ]; then echo 'calling the API' >&2; echo 'HTTP 429 Too Many Requests' >&2; echo partial; exit 0; fi; echo 'HTTP 200 OK, 429 ms' >&2; echo ok`)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "3 done, 1 failed") || !strings.Contains(stderr, "company_id = 1 throttled until") {
		t.Errorf("stderr\n%s\nwant one failed attempt that throttled company_id 1, and company 2's three chunks done", stderr)
	}
	if strings.Contains(stderr, "company_id = 2 throttled") {
		t.Errorf("stderr\n%s\nwant company 2 not throttled: its line does not match", stderr)
	}
	if got := resultsOf(ctx, t, c, other); len(got) != 3 {
		t.Errorf("results of company 2: %q; want its three chunks", got)
	}
	st, err := c.Status(ctx, throttled, 0)
	if err != nil || st.State != wire.StateInProgress || st.ChunksDone != 0 {
		t.Errorf("status of company 1: %+v, %v; want in progress, nothing done, its chunks held back", st, err)
	}
	failures, err := c.Failures(ctx, throttled, client.FailuresOptions{})
	if err != nil || len(failures.Failures) != 1 || !strings.Contains(failures.Failures[0].Error, "matched --throttle-on-stderr: HTTP 429 Too Many Requests") {
		t.Errorf("failures of company 1: %+v, %v; want one attempt failed by the stderr line", failures, err)
	}
	// The throttle holds for every reserve, past the retried chunk's backoff (1 s).
	for range 3 {
		got, err := c.Reserve(ctx, wire.ReserveRequest{Max: 3, Wait: "1s", Strategy: []byte(`{"select_only": {"key": "company_id", "value": 1}}`)})
		if err != nil || len(got) != 0 {
			t.Fatalf("reserving company 1 while it is throttled: %v, %d chunks; want none", err, len(got))
		}
	}
}

// TestWorkThrottleOnStderrWhileRunning: the throttle is set as soon as the line is
// written, while the command still runs.
func TestWorkThrottleOnStderrWhileRunning(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	u := startWorkServer(t)
	c := client.New(u)
	if _, err := c.Submit(ctx, wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(1)}},
		Chunks:           []string{"x"},
	}); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(t.TempDir(), "release")
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runWork(ctx, []string{"--url", u, "--throttle-on-stderr", "429", "--throttle-key", "company_id", "--throttle-for", "1h",
			"--", "sh", "-c", `echo 'HTTP 429' >&2; while [ ! -e "$1" ]; do sleep 0.05; done; echo ok`, "sh", release}, io.Discard, &stderr)
	}()
	says := func(s string) func() string {
		return func() string {
			if got := stderr.String(); !strings.Contains(got, s) {
				return "stderr:\n" + got
			}
			return ""
		}
	}
	clustertest.PollUntil(t, 30*time.Second, "the throttle, while the command runs", says("company_id = 1 throttled until"))
	if strings.Contains(stderr.String(), "failed") {
		t.Errorf("stderr\n%s\nwant the throttle set before the command ended", stderr.String())
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clustertest.PollUntil(t, 30*time.Second, "the chunk to fail once the command ends", says("failed (retrying): a line of stderr matched"))
	cancel()
	if err := <-done; err != nil {
		t.Errorf("work: %v", err)
	}
	if n := strings.Count(stderr.String(), "throttled until"); n != 1 {
		t.Errorf("stderr\n%s\nwant one throttle, not %d", stderr.String(), n)
	}
}

// submitForCompany submits chunks with the strategic metadata company_id = company and
// returns the submission's id.
func submitForCompany(ctx context.Context, t *testing.T, c *client.Client, company int64, chunks ...string) string {
	t.Helper()
	created, err := c.Submit(ctx, wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(company)}},
		Chunks:           chunks,
	})
	if err != nil {
		t.Fatal(err)
	}
	return created.ID
}

// TestListPaused: opsq list --state paused, scheduled and running against a real instance
// list each phase of the in-progress submissions apart, and the table says which.
func TestListPaused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	running := submitChunks(ctx, t, c, 0, "a")
	paused := submitChunks(ctx, t, c, 0, "a")
	if _, err := c.Pause(ctx, paused); err != nil {
		t.Fatal(err)
	}
	created, err := c.Submit(ctx, wire.Submission{Chunks: []string{"a"}, SubmissionHeader: wire.SubmissionHeader{NotBefore: "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := created.ID
	for _, tc := range []struct {
		state string
		want  []string // the ids, newest first
		says  string   // what each row's state says
	}{
		{"paused", []string{paused}, "in_progress (paused)"},
		{"scheduled", []string{scheduled}, "in_progress (scheduled for "},
		{"running", []string{running}, "in_progress "},
		{"in_progress", []string{scheduled, paused, running}, "in_progress"},
	} {
		out, stderr, err := runCLI(ctx, t, runList, "--url", u, "--state", tc.state)
		if err != nil {
			t.Fatalf("opsq list --state %s: %v\n%s", tc.state, err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var ids []string
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			ids = append(ids, f[0])
			if rest := strings.TrimSpace(strings.TrimPrefix(l, f[0])); !strings.HasPrefix(rest, tc.says) {
				t.Errorf("opsq list --state %s: row %q; want its state to read %q", tc.state, l, tc.says)
			}
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("opsq list --state %s: ids %q; want %q\n%s", tc.state, ids, tc.want, out)
		}
	}
}
