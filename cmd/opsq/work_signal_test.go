package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// startWorker starts "opsq work" with args as a process of its own process group, as a
// shell starts a job in a terminal, so that a signal to the group is what Ctrl-C sends.
func startWorker(t *testing.T, args ...string) (cmd *exec.Cmd, stderr *lockedBuffer, exited chan error) {
	t.Helper()
	stderr = &lockedBuffer{}
	cmd = exec.Command(opsqBinary.Path, append([]string{"work"}, args...)...)
	cmd.Env = append(os.Environ(), opsqBinary.Env...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Logf("opsq work %q; stderr:\n%s", args, stderr.String())
	})
	return cmd, stderr, exited
}

// interrupt sends SIGINT to the worker's process group, as Ctrl-C at a terminal does.
func interrupt(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("sending SIGINT to the worker's process group: %v", err)
	}
}

// waitForText waits until the worker's stderr says text.
func waitForText(t *testing.T, stderr *lockedBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not say %q within 30s", text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkSecondInterruptStopsAtOnce: Ctrl-C once, and the worker says how long it waits
// for the running command and how to skip that; Ctrl-C again, and it kills the command at
// once (not after --stop-grace, which defaults to the 5-minute lease) and fails its chunk,
// which is handed out again.
func TestWorkSecondInterruptStopsAtOnce(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(t.Context(), t, c, 3, "abc")
	started := filepath.Join(t.TempDir(), "started")

	cmd, stderr, exited := startWorker(t, "--url", u, "--wait", "1s", "--", "sh", "-c", "touch "+started+"; sleep 600")
	waitForFile(t, started)
	interrupt(t, cmd)
	waitForText(t, stderr, "for up to 5m0s (--stop-grace)")
	if !strings.Contains(stderr.String(), "Press Ctrl-C again to stop them now") {
		t.Errorf("got stderr\n%s\nwant it to say that a second Ctrl-C stops at once", stderr.String())
	}
	select {
	case err := <-exited:
		t.Fatalf("the worker exited (%v) after one SIGINT while its command ran; want it to wait for the command", err)
	case <-time.After(500 * time.Millisecond):
	}
	interrupt(t, cmd)
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("work after a second SIGINT: %v; want exit status 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker still runs 60s after a second SIGINT; want it to stop at once")
	}
	if !strings.Contains(stderr.String(), "stopping now: killing 1 running command(s)") {
		t.Errorf("got stderr\n%s\nwant it to say that it kills the running command", stderr.String())
	}
	page, err := c.Failures(t.Context(), id, client.FailuresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failures := page.Failures
	if len(failures) != 1 || failures[0].State != "retrying" || len(failures[0].Errors) != 1 ||
		!strings.HasPrefix(failures[0].Errors[0].Error, "worker stopped at once") {
		t.Errorf("got failures %+v; want chunk 0 retrying after one attempt failed with \"worker stopped at once\"", failures)
	}
	if s, err := c.Status(t.Context(), id, 0); err != nil || s.State != wire.StateInProgress {
		t.Errorf("got %+v, %v; want the submission in progress, its chunk to be handed out again", s, err)
	}
}

// TestWorkStopGraceBoundsTheWait: after one SIGINT the worker waits for the running
// command for --stop-grace, not for the lease, then kills it and fails its chunk.
func TestWorkStopGraceBoundsTheWait(t *testing.T) {
	t.Parallel()
	u := startWorkServer(t)
	c := client.New(u)
	id := submitChunks(t.Context(), t, c, 3, "abc")
	started := filepath.Join(t.TempDir(), "started")

	cmd, stderr, exited := startWorker(t, "--url", u, "--wait", "1s", "--stop-grace", "1s", "--", "sh", "-c", "touch "+started+"; sleep 600")
	waitForFile(t, started)
	interrupt(t, cmd)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("work after SIGINT: %v; want exit status 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker still runs 60s after SIGINT with --stop-grace 1s; want the command killed after 1s")
	}
	if !strings.Contains(stderr.String(), "for up to 1s (--stop-grace)") {
		t.Errorf("got stderr\n%s\nwant it to say it waits up to 1s", stderr.String())
	}
	page, err := c.Failures(t.Context(), id, client.FailuresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failures := page.Failures
	if len(failures) != 1 || len(failures[0].Errors) != 1 ||
		!strings.Contains(failures[0].Errors[0].Error, "did not finish within --stop-grace 1s") {
		t.Errorf("got failures %+v; want chunk 0's attempt failed as not finished within --stop-grace 1s", failures)
	}
}

// TestWorkStopGraceBounds: --stop-grace must lie between 0s and --lease.
func TestWorkStopGraceBounds(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--stop-grace", "-1s"}, {"--lease", "10s", "--stop-grace", "11s"}} {
		var stderr lockedBuffer
		err := runWork(context.Background(), append(append([]string{"--url", "http://127.0.0.1:1"}, args...), "--", "true"), nil, &stderr)
		if err == nil || !strings.Contains(stderr.String(), "--stop-grace") {
			t.Errorf("opsq work %q: got %v, stderr %q; want a usage error naming --stop-grace", args, err, stderr.String())
		}
	}
}
