package sql_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestReadOnlyHostIsLost: a host that refuses writes (SQLSTATE 25006: a demoted primary,
// a standby, a server set read-only) counts as the database being unavailable, not as
// an error of the request, and the pool drops the connection to it, so that the next
// statement connects anew, to whichever host accepts writes (DESIGN.md §4, "Failover of
// PostgreSQL").
func TestReadOnlyHostIsLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	opsqsql.ConfigureSession(cfg.ConnConfig)
	cfg.MaxConns = 1 // every statement runs on the one connection, unless it is dropped
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// The session turns read-only, as every session of a demoted primary is.
	var readOnlyPID uint32
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&readOnlyPID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	const write = "UPDATE opsq.settings SET value = value WHERE key = 'retention'"
	_, err = pool.Exec(ctx, write)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("a write on the read-only session answered %v; want SQLSTATE 25006", err)
	}
	if !opsqsql.IsUnavailable(err) {
		t.Errorf("IsUnavailable(%v) = false; want true: a host that refuses writes is lost to the instance", err)
	}

	// The next write runs on a new connection, which is read-write.
	var pid uint32
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == readOnlyPID {
		t.Errorf("the pool still uses the session (pid %d) that answered 25006; want it dropped", pid)
	}
	if _, err := pool.Exec(ctx, write); err != nil {
		t.Errorf("the write after the read-only session was dropped: %v; want it to succeed", err)
	}
}
