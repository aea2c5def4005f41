package queuer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	// A real failed connection attempt: nothing listens on a port just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, connectErr := pgconn.Connect(ctx, fmt.Sprintf("postgres://opsq@127.0.0.1:%d/opsq?connect_timeout=5", addr.Port))
	if connectErr == nil {
		t.Fatal("connecting to a closed port succeeded")
	}

	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	wrap := func(err error) error { return fmt.Errorf("reading results of 1: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"sentinel", ErrUnavailable, true},
		{"wrapped sentinel", wrap(ErrUnavailable), true},
		{"connect refused", connectErr, true},
		{"wrapped connect refused", wrap(connectErr), true},
		{"08006 connection failure", wrap(pg("08006")), true},
		{"08003 connection does not exist", pg("08003"), true},
		{"57P01 admin shutdown", wrap(pg("57P01")), true},
		{"57P02 crash shutdown", pg("57P02"), true},
		{"57P03 cannot connect now", pg("57P03"), true},
		{"25006 read-only host", wrap(&pgconn.PgError{Severity: "ERROR", Code: "25006", Message: "cannot execute UPDATE in a read-only transaction"}), true},
		{"Citus: a worker lost inside a transaction", wrap(&pgconn.PgError{Severity: "ERROR", Code: "XX000", Message: "failure on connection marked as essential: 127.0.0.1:36479"}), true},
		{"Citus: no placement reachable for a COPY", &pgconn.PgError{Severity: "ERROR", Code: "XX000", Message: "could not connect to any active placements"}, true},
		{"XX000 another internal error", &pgconn.PgError{Severity: "ERROR", Code: "XX000", Message: "cache lookup failed for relation 1"}, false},
		{"57014 query canceled", pg("57014"), false},
		{"40001 serialization failure", pg("40001"), false},
		{"23505 unique violation", pg("23505"), false},
		{"28P01 wrong password", pg("28P01"), false},
		{"conn closed", wrap(pgconn.ErrConnClosed), true},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"broken pipe", wrap(syscall.EPIPE), true},
		{"context canceled", wrap(context.Canceled), false},
		{"deadline exceeded", wrap(context.DeadlineExceeded), false},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"not found", ErrNotFound, false},
		{"plain", errors.New("something else"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsUnavailable(c.err); got != c.want {
				t.Errorf("IsUnavailable(%v) = %v; want %v", c.err, got, c.want)
			}
		})
	}
}

// TestSubmitWithLapsedNodeIsUnavailable: an instance cut from the database for longer than
// its node id is confirmed (half of claims.NodeReuseAfter: a failover manager can take that
// long) mints no id, and says so as the database being unavailable — a 503 the producer
// retries — not as an error of the request (a 500).
func TestSubmitWithLapsedNodeIsUnavailable(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	var err error
	for range 10 { // again if a heartbeat of the claims loop confirmed the node meanwhile
		q.ids.SetNode(1, time.Now().Add(-time.Second)) // the last heartbeat was too long ago
		if _, err = q.Submit(t.Context(), NewSubmission{}, &genChunks{n: 1, failAt: -1}); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("Submit with a lapsed node id succeeded; want an error")
	}
	if !IsUnavailable(err) {
		t.Errorf("Submit with a lapsed node id: %v; IsUnavailable = false, want true", err)
	}
}
