package claims

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pgtest"
)

// TestManagerPoolSession checks the session of the Manager's own connections, as Start
// opens them: the timeouts that keep a paused instance from holding locks, and JIT off
// (sql.ConfigureSession), whatever the request pool's connections have.
func TestManagerPoolSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, err := New(Config{Pool: pgtest.NewPool(t), Instance: Instance{ID: "pool-session"}})
	if err != nil {
		t.Fatal(err)
	}
	own, err := pgxpool.NewWithConfig(ctx, m.poolConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	for _, want := range []struct{ name, value string }{
		{"jit", "off"},
		{"statement_timeout", poolStatementTimeout},
		{"lock_timeout", lockTimeout},
		{"idle_in_transaction_session_timeout", idleInTxTimeout},
	} {
		var got string
		if err := own.QueryRow(ctx, "SELECT current_setting($1)", want.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want.value {
			t.Errorf("%s = %s on the manager's connections; want %s", want.name, got, want.value)
		}
	}
}
