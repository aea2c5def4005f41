package pglocal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"opsq/sql/pglocal"
)

// TestStandbyFailover: a standby made of a running primary receives its rows through the
// synchronous replication the primary waits for, refuses writes (SQLSTATE 25006) until
// promoted; the primary killed, the promoted standby holds every row the primary
// acknowledged and accepts writes.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := &pglocal.Cluster{Dir: t.TempDir(), Settings: map[string]string{
		"synchronous_commit":        "on",
		"synchronous_standby_names": "standby1",
	}}
	if err := primary.Init(ctx); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, primary)
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	standby := &pglocal.Cluster{Dir: t.TempDir()}
	if err := standby.InitStandby(ctx, primary, "standby1"); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, standby)
	if err := standby.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if standby.Port == primary.Port {
		t.Fatalf("the standby listens on the primary's port %d", primary.Port)
	}
	if err := standby.InitStandby(ctx, primary, "standby1"); err == nil {
		t.Error("InitStandby of an existing cluster succeeded; want an error")
	}

	// A commit on the primary returns once the standby has it: a table and a row.
	p := connect(t, primary.URL("postgres"))
	exec(t, p, "CREATE TABLE t (v int)")
	exec(t, p, "INSERT INTO t VALUES (1)")
	var state string
	if err := p.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'").Scan(&state); err != nil {
		t.Fatalf("reading the standby's replication state on the primary: %v", err)
	}
	if state != "sync" {
		t.Errorf("the standby's sync_state = %q; want sync", state)
	}

	s := connect(t, standby.URL("postgres"))
	waitRows(t, s, 1)
	var inRecovery bool
	if err := s.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("pg_is_in_recovery() on the standby = %v, %v; want true", inRecovery, err)
	}
	_, err := s.Exec(ctx, "INSERT INTO t VALUES (2)")
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("a write on the standby answered %v; want SQLSTATE 25006 (read_only_sql_transaction)", err)
	}

	// The last row the primary acknowledged before it was killed.
	exec(t, p, "INSERT INTO t VALUES (3)")
	if err := primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if running, err := primary.Running(ctx); err != nil || running {
		t.Fatalf("the primary's Running() = %v, %v after Kill; want false", running, err)
	}
	if _, err := p.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("a session of the killed primary still answers; want its connection broken")
	}
	if err := primary.Kill(ctx); err != nil {
		t.Errorf("Kill of a killed cluster: %v; want nil", err)
	}

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("pg_is_in_recovery() after Promote = %v, %v; want false", inRecovery, err)
	}
	waitRows(t, s, 2)
	exec(t, s, "INSERT INTO t VALUES (4)")
	var sum int
	if err := s.QueryRow(ctx, "SELECT sum(v) FROM t").Scan(&sum); err != nil || sum != 8 {
		t.Errorf("sum of the promoted standby's rows = %d, %v; want 8 (1, 3 and 4)", sum, err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitRows waits until table t holds n rows: a standby flushes a commit before the
// primary returns it, and replays it a moment later.
func waitRows(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		err := conn.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&got)
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %d rows in t; last: %d, %v", n, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
