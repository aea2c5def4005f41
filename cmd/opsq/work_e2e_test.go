package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/api"
	"opsq/api/wire"
	"opsq/claims"
	"opsq/client"
	"opsq/queuer"
	"opsq/sql/pgtest"
)

// End-to-end tests of "opsq work" against a real opsq instance, in process, on a fresh
// database.

var workInstanceSeq atomic.Int64

// startWorkServer starts an opsq instance on a fresh database and returns its base URL.
// Everything stops when the test ends.
func startWorkServer(t *testing.T) string {
	t.Helper()
	pool := pgtest.NewPool(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	log := slog.New(slog.NewTextHandler(t.Output(), nil)) // shown when the test fails
	q, err := queuer.New(t.Context(), queuer.Config{
		Pool:     pool,
		Logger:   log,
		Instance: claims.Instance{ID: fmt.Sprintf("cmd-test-%d", workInstanceSeq.Add(1)), AdvertiseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	mux.Handle("/", api.New(api.Config{Queuer: q, Logger: log}))
	return srv.URL
}

// lockedBuffer is a strings.Builder safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runWorkTest runs "opsq work" with args until it returns, and returns its stderr and error.
func runWorkTest(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stderr lockedBuffer
	err := runWork(ctx, args, io.Discard, &stderr)
	t.Logf("opsq work %q: %v; stderr:\n%s", args, err, stderr.String())
	return stderr.String(), err
}

func submitChunks(ctx context.Context, t *testing.T, c *client.Client, maxRetries int, chunks ...string) string {
	t.Helper()
	created, err := c.Submit(ctx, wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{MaxRetries: &maxRetries, Metadata: "run 7"},
		Chunks:           chunks,
	})
	if err != nil {
		t.Fatal(err)
	}
	return created.ID
}

func resultsOf(ctx context.Context, t *testing.T, c *client.Client, id string) []string {
	t.Helper()
	var out []string
	if err := c.Results(ctx, id, func(r wire.Result) error {
		if r.ChunkIndex != int64(len(out)) {
			return fmt.Errorf("got chunk %d; want %d", r.ChunkIndex, len(out))
		}
		if r.Output != nil {
			out = append(out, *r.Output)
		}
		return nil
	}); err != nil {
		t.Fatalf("results of %s: %v", id, err)
	}
	return out
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkCompletesChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	chunks := make([]string, 25)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk %d of a-z", i)
	}
	id := submitChunks(ctx, t, c, 0, chunks...)

	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--concurrency", "4", "--strategy", "oldest_first",
		"--", "sh", "-c", `printf '%s|%s|%s|' "$OPSQ_SUBMISSION_ID" "$OPSQ_CHUNK_INDEX" "$OPSQ_METADATA"; tr a-z A-Z`)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	got := resultsOf(ctx, t, c, id)
	if len(got) != len(chunks) {
		t.Fatalf("got %d results; want %d", len(got), len(chunks))
	}
	for i, out := range got {
		want := fmt.Sprintf("%s|%d|run 7|%s", id, i, strings.ToUpper(chunks[i]))
		if out != want {
			t.Errorf("chunk %d: got output %q; want %q", i, out, want)
		}
	}
	if !strings.Contains(stderr, "25 done, 0 failed, 0 lost") {
		t.Errorf("got stderr\n%s\nwant a summary of 25 done", stderr)
	}
}

// TestWorkOnceStopsAboutAWaitAfterTheLastChunk: with --once at --concurrency 16, the
// worker exits about --wait after the last chunk is completed. Before, the reserve begun
// while the last commands ran came back empty after --wait, and another whole --wait
// followed, with every slot free.
func TestWorkOnceStopsAboutAWaitAfterTheLastChunk(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	id := submitChunks(ctx, t, c, 0, chunks...)

	const wait = 5 * time.Second
	completed := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil { // a status wait is at most a minute
			if st, err := c.Status(ctx, id, time.Minute); err == nil && st.State == wire.StateCompleted {
				completed <- time.Now()
				return
			}
		}
	}()
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", wait.String(), "--concurrency", "16", "--", "sh", "-c", "cat")
	exited := time.Now()
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "200 done, 0 failed, 0 lost") {
		t.Errorf("got stderr\n%s\nwant a summary of 200 done", stderr)
	}
	var done time.Time
	select {
	case done = <-completed:
	case <-time.After(30 * time.Second):
		t.Fatal("the submission was not seen completed within 30s of the worker's exit")
	}
	after := exited.Sub(done)
	t.Logf("opsq work --once --concurrency 16 --wait %s exited %s after the last chunk was completed", wait, after.Round(time.Millisecond))
	// About --wait; 2 × --wait before. 3s of slack for a busy machine.
	if limit := wait + 3*time.Second; after > limit {
		t.Errorf("opsq work --once exited %s after the last chunk; want about --wait %s (at most %s)", after, wait, limit)
	}
}

func TestWorkFailingCommandFailsTheSubmission(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 0, "x")

	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--", "sh", "-c", "echo oops >&2; exit 3")
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	s, err := c.Status(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != wire.StateFailed || s.Failure == nil || !strings.Contains(s.Failure.Error, "oops") {
		t.Fatalf("got %+v (failure %+v); want failed with an error containing oops", s, s.Failure)
	}
	if want := "exit status 3: oops"; s.Failure.Error != want {
		t.Errorf("got error %q; want %q", s.Failure.Error, want)
	}
	if !strings.Contains(stderr, "0 done, 1 failed") {
		t.Errorf("got stderr\n%s\nwant a summary of 1 failed", stderr)
	}
}

func TestWorkRetriesAFailedAttempt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 1, "abc")

	// The first attempt fails, the second (OPSQ_RETRIES=1) succeeds, once the retried chunk
	// has waited out its backoff (1 s by default, ±20 %): --once waits for it.
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "10s", "--", "sh", "-c",
		`if [ "$OPSQ_RETRIES" = 0 ]; then echo first >&2; exit 1; fi; tr a-z A-Z`)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if got := resultsOf(ctx, t, c, id); len(got) != 1 || got[0] != "ABC" {
		t.Errorf("got results %q; want [ABC]", got)
	}
}

func TestWorkOutputOverTheLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 0, "x")

	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--max-output", "100", "--", "sh", "-c", "yes")
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	s, err := c.Status(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Failure == nil || !strings.Contains(s.Failure.Error, "--max-output (100 bytes)") {
		t.Errorf("got %+v; want a failure naming --max-output", s.Failure)
	}
}

func TestWorkKillsTheCommandOfACancelledSubmission(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 0, "x")
	started := filepath.Join(t.TempDir(), "started")

	type ended struct {
		err    error
		stderr string
	}
	done := make(chan ended, 1)
	begin := time.Now()
	go func() {
		stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--wait", "1s", "--lease", "3s", "--", "sh", "-c", "touch "+started+"; sleep 60")
		done <- ended{err, stderr}
	}()
	waitForFile(t, started)
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-done:
		if e.err != nil {
			t.Fatalf("work: %v\n%s", e.err, e.stderr)
		}
		if !strings.Contains(e.stderr, "the command was killed") || !strings.Contains(e.stderr, "0 done, 0 failed, 1 lost") {
			t.Errorf("got stderr\n%s\nwant the command killed and the chunk counted lost", e.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("work still runs %s after the submission was cancelled; want the command killed at the next extend", time.Since(begin))
	}
}

func TestWorkStopLetsRunningCommandsFinish(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(t.Context(), t, c, 0, "abc")
	started := filepath.Join(t.TempDir(), "started")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runWorkTest(ctx, t, "--url", u, "--wait", "1s", "--", "sh", "-c", "touch "+started+"; sleep 1; tr a-z A-Z")
		done <- err
	}()
	waitForFile(t, started)
	cancel() // as SIGTERM does
	if err := <-done; err != nil {
		t.Fatalf("work: got %v; want nil after a stop", err)
	}
	if got := resultsOf(t.Context(), t, c, id); len(got) != 1 || got[0] != "ABC" {
		t.Errorf("got results %q; want [ABC] from the command that finished after the stop", got)
	}
}

func TestWorkStopKillsCommandsAfterTheLease(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(t.Context(), t, c, 0, "abc")
	started := filepath.Join(t.TempDir(), "started")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runWorkTest(ctx, t, "--url", u, "--wait", "1s", "--lease", "1s", "--", "sh", "-c", "touch "+started+"; sleep 60")
		done <- err
	}()
	waitForFile(t, started)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("work: got %v; want nil after a stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("work still runs 30s after the stop; want the command killed after --lease 1s")
	}
	s, err := c.Status(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != wire.StateFailed || s.Failure == nil || !strings.HasPrefix(s.Failure.Error, "worker stopped") {
		t.Errorf("got %+v (failure %+v); want failed with worker stopped", s, s.Failure)
	}
}

// TestWorkSurvivesServerErrors runs the worker through a proxy that fails some requests
// with 502, as a load balancer does while an instance restarts.
func TestWorkSurvivesServerErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(ctx, t, c, 0, "abc")

	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var reserves, completes atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/reserve" && reserves.Add(1) <= 2,
			r.URL.Path == "/v1/complete" && completes.Add(1) <= 1:
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)

	stderr, err := runWorkTest(ctx, t, "--url", flaky.URL, "--once", "--wait", "1s", "--", "sh", "-c", "tr a-z A-Z")
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if got := resultsOf(ctx, t, c, id); len(got) != 1 || got[0] != "ABC" {
		t.Errorf("got results %q; want [ABC]", got)
	}
	if !strings.Contains(stderr, "reserve failed") || !strings.Contains(stderr, "reporting it failed") {
		t.Errorf("got stderr\n%s\nwant the failed reserve and complete reported", stderr)
	}
}

func TestWorkUnreachableServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	stderr, err := runWorkTest(ctx, t, "--url", u, "--once", "--", "cat")
	if err != nil {
		t.Errorf("work: got %v; want nil: a worker keeps trying until stopped", err)
	}
	if !strings.Contains(stderr, "cannot reach opsq at "+u) {
		t.Errorf("got stderr\n%s\nwant the unreachable server reported", stderr)
	}
}

func TestWorkBadStrategyIsAnError(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	// Checked before any chunk is reserved: a usage error naming the strategy.
	stderr, err := runWorkTest(t.Context(), t, "--url", u, "--once", "--strategy", "no_such_strategy", "--", "cat")
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, `unknown strategy "no_such_strategy"`) {
		t.Errorf("got %v; want a usage error naming the strategy\n%s", err, stderr)
	}
}

func TestClaimsCommand(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	var out, stderr lockedBuffer
	if err := runClaims(t.Context(), []string{"--url", u}, &out, &stderr); err != nil {
		t.Fatalf("claims: %v\n%s", err, stderr.String())
	}
	t.Logf("opsq claims:\n%s", out.String())
	if got := out.String(); !strings.Contains(got, "cmd-test-") || !strings.Contains(got, "unclaimed: ") {
		t.Errorf("got\n%s\nwant a line for the instance and the unclaimed shards", got)
	}
	out = lockedBuffer{}
	if err := runClaims(t.Context(), []string{"--url", u, "--json"}, &out, &stderr); err != nil {
		t.Fatalf("claims --json: %v", err)
	}
	if got := out.String(); !strings.Contains(got, `"shard_count"`) {
		t.Errorf("got\n%s\nwant the JSON answer", got)
	}
}

// TestWorkSendsTheChunksTraceparent: the worker sends the traceparent its chunk carries with
// the chunk's extends and its complete or fail, so that the instance's spans of those calls
// join the producer's trace; a chunk without one sends none.
func TestWorkSendsTheChunksTraceparent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, err := c.Submit(ctx, wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{OnFailure: wire.OnFailureContinue, MaxRetries: new(0)},
		Chunks:           []string{"slow", "bad"},
	}, client.WithTraceparent(tp))
	if err != nil {
		t.Fatal(err)
	}
	untraced := submitChunks(ctx, t, c, 0, "plain")

	// A proxy that records the traceparent of each complete, fail and extend, and marks
	// the first extend with a file that the slow chunk's command waits for.
	extended := filepath.Join(t.TempDir(), "extended")
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // path -> traceparents sent
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/complete", "/v1/fail", "/v1/extend":
			mu.Lock()
			if seen[r.URL.Path] == nil {
				seen[r.URL.Path] = map[string]bool{}
			}
			seen[r.URL.Path][r.Header.Get(wire.HeaderTraceparent)] = true
			mu.Unlock()
			if r.URL.Path == "/v1/extend" {
				_ = os.WriteFile(extended, nil, 0o600)
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)

	script := `in=$(cat); if [ "$in" = bad ]; then exit 1; fi; if [ "$in" = slow ]; then while [ ! -e "` + extended + `" ]; do sleep 0.05; done; fi; echo "$in"`
	stderr, err := runWorkTest(ctx, t, "--url", rec.URL, "--once", "--wait", "1s", "--lease", "1500ms", "--", "sh", "-c", script)
	if err != nil {
		t.Fatalf("work: %v\n%s", err, stderr)
	}
	if got := resultsOf(ctx, t, c, traced.ID); len(got) != 1 || got[0] != "slow\n" {
		t.Errorf("results of the traced submission: %q; want the slow chunk's", got)
	}
	if got := resultsOf(ctx, t, c, untraced); len(got) != 1 {
		t.Errorf("results of the untraced submission: %q; want its chunk's", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string]map[string]bool{
		"/v1/complete": {tp: true, "": true}, // the slow chunk's, and the untraced chunk's
		"/v1/fail":     {tp: true},
	} {
		if fmt.Sprint(seen[path]) != fmt.Sprint(want) {
			t.Errorf("%s was sent with traceparents %v; want %v", path, seen[path], want)
		}
	}
	// The slow chunk's extends carry its traceparent; the untraced chunk's, if its command
	// ran long enough to be extended, none.
	delete(seen["/v1/extend"], "")
	if want := map[string]bool{tp: true}; fmt.Sprint(seen["/v1/extend"]) != fmt.Sprint(want) {
		t.Errorf("/v1/extend was sent with traceparents %v besides none; want %v", seen["/v1/extend"], want)
	}
}
