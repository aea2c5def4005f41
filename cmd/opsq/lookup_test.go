package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

func TestClientFlagsParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		min, max    int
		wantPos     []string
		wantErr     error
		wantVerbose bool
	}{
		{name: "id then flag", args: []string{"123", "--verbose"}, min: 1, max: 1, wantPos: []string{"123"}, wantVerbose: true},
		{name: "flag then id", args: []string{"-verbose", "123"}, min: 1, max: 1, wantPos: []string{"123"}, wantVerbose: true},
		{name: "double dash", args: []string{"--", "--verbose"}, min: 1, max: 1, wantPos: []string{"--verbose"}},
		{name: "missing id", args: []string{"--verbose"}, min: 1, max: 1, wantErr: errUsage},
		{name: "too many", args: []string{"1", "2"}, min: 1, max: 1, wantErr: errUsage},
		{name: "help", args: []string{"--help"}, min: 1, max: 1, wantErr: flag.ErrHelp},
		{name: "bad url", args: []string{"--url", "ftp://x", "1"}, min: 1, max: 1, wantErr: errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			fs := newClientFlags("test", "ID", "Test.", &stderr)
			verbose := fs.Bool("verbose", false, "be verbose")
			pos, err := fs.parse(tt.args, tt.min, tt.max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if strings.Join(pos, " ") != strings.Join(tt.wantPos, " ") || *verbose != tt.wantVerbose {
				t.Errorf("got %q, verbose %v; want %q, verbose %v", pos, *verbose, tt.wantPos, tt.wantVerbose)
			}
		})
	}
}

func TestURLFromEnvironment(t *testing.T) {
	t.Setenv("OPSQ_URL", "http://queue.internal:80")
	fs := newClientFlags("test", "", "Test.", &strings.Builder{})
	if _, err := fs.parse(nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if fs.url != "http://queue.internal:80" {
		t.Errorf("got url %q; want OPSQ_URL's", fs.url)
	}
}

func TestExplainConnectionRefused(t *testing.T) {
	t.Parallel()
	u := "http://" + refusingAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := runCancel(ctx, []string{"--url", u, "1"}, &strings.Builder{}, &strings.Builder{})
	want := "cannot reach opsq at " + u + `: is "opsq serve" (or "make run") running? set --url or OPSQ_URL`
	if err == nil || err.Error() != want {
		t.Errorf("got %v; want %q", err, want)
	}
}

// refusingAddr returns a loopback address where connecting is refused, and stays refused
// while the test runs: a port held by a socket that is bound but never listens. The kernel
// answers a connection to it with a reset (ECONNREFUSED), and neither an ephemeral port
// nor another bind can take it until the test closes the socket, so no other test's server
// can start answering there (closing a listener and reusing its port raced with them).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("making a socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("binding a socket to a loopback port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("reading the socket's port: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

func TestExplainAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      *client.Error
		conflict string
		want     string
	}{
		{"not found", &client.Error{StatusCode: 404, Code: "not_found", Message: "no submission 9"}, "", `opsq list`},
		{"unknown route", &client.Error{StatusCode: 404, Code: "unknown_route", Message: "no route GET /v1/v1/submissions/9: check the URL"}, "", "the server has no such route: is --url (http://x) the address of opsq"},
		{"unknown route of an older server", &client.Error{StatusCode: 404, Code: "not_found", Message: "no route GET /x/v1/submissions/9"}, "", "no such route"},
		{"conflict", &client.Error{StatusCode: 409, Code: "conflict", Message: "in_progress"}, "wait for it", "; wait for it"},
		{"not ready", &client.Error{StatusCode: 503, Code: "not_ready", Message: "db"}, "", "retry in a moment"},
		{"load balancer", &client.Error{StatusCode: 502, Code: "http_502", Message: "<html>"}, "", "found no instance to answer"},
		{"not opsq", &client.Error{StatusCode: 418, Code: "http_418", Message: "<html>"}, "", "is --url (http://x) the address of opsq?"},
		{"too large", &client.Error{StatusCode: 413, Code: "too_large", Message: "chunks[2]"}, "", "OPSQ_MAX_CHUNK_BYTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := explain(tt.err, "http://x", tt.conflict)
			if !strings.Contains(got.Error(), tt.want) || !strings.HasPrefix(got.Error(), tt.err.Error()) {
				t.Errorf("got %q; want the server's error and %q", got, tt.want)
			}
			var e *client.Error
			if !errors.As(got, &e) {
				t.Errorf("got %T; want it to wrap the *client.Error", got)
			}
		})
	}
	if got := explain(context.Canceled, "http://x", ""); got.Error() != "interrupted" {
		t.Errorf("got %q for a cancelled context; want interrupted", got)
	}
}

func TestListArgs(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--state", "done"}, {"--state", "PAUSED"}, {"--state", "waiting"}, {"--meta", "k"}, {"--meta", "=v"}, {"--value", "v"}, {"--limit", "1001"}, {"extra"}} {
		if err := runList(context.Background(), args, &strings.Builder{}, &strings.Builder{}); !errors.Is(err, errUsage) {
			t.Errorf("list %q: got %v; want a usage error", args, err)
		}
	}
}

func TestFormatList(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	now := created.Add(time.Hour)
	ahead, passed := now.Add(30*time.Minute), now.Add(-time.Minute)
	err := formatList(&b, []wire.Status{
		{ID: "123456789", State: wire.StateInProgress, ChunksDone: 1500, ChunksTotal: 10000, CreatedAt: created},
		{ID: "14", State: wire.StateInProgress, Paused: true, NotBefore: &ahead, ChunksTotal: 2, CreatedAt: created},
		{ID: "13", State: wire.StateInProgress, NotBefore: &ahead, ChunksTotal: 2, CreatedAt: created},
		{ID: "15", State: wire.StateInProgress, NotBefore: &passed, ChunksTotal: 2, CreatedAt: created},
		{ID: "12", State: wire.StateCompleted, ChunksDone: 1, ChunksTotal: 1, CreatedAt: created},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID         STATE                                             DONE/TOTAL    CREATED\n" +
		"123456789  in_progress                                       1 500/10 000  2026-01-02T03:04:05Z\n" +
		"14         in_progress (paused)                              0/2           2026-01-02T03:04:05Z\n" +
		"13         in_progress (scheduled for 2026-01-02T04:34:05Z)  0/2           2026-01-02T03:04:05Z\n" +
		"15         in_progress                                       0/2           2026-01-02T03:04:05Z\n" +
		"12         completed                                         1/1           2026-01-02T03:04:05Z\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestFollowProgress: the line never waits for a chunk past the last one.
func TestFollowProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lines, total int64
		want         string
	}{
		{0, 3, "following the results of 7: 0 of 3 lines, waiting for chunk 0"},
		{2, 3, "following the results of 7: 2 of 3 lines, waiting for chunk 2"},
		{3, 3, "following the results of 7: all 3 lines"},
		{5, -1, "following the results of 7: 5 lines, waiting for chunk 5"},
	} {
		if got := followProgress("7", tc.lines, tc.total); got != tc.want {
			t.Errorf("followProgress(%d, %d) = %q; want %q", tc.lines, tc.total, got, tc.want)
		}
	}
}
