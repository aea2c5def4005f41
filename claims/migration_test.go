package claims

import (
	"testing"

	"opsq/migrations"
	"opsq/sql/pgtest"
)

// The claims migration (00002, and what follows it) goes down and up again cleanly.
func TestMigrationDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	has := func(sql string) bool {
		t.Helper()
		var ok bool
		if err := conn.QueryRow(ctx, sql).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	const column = "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'opsq' AND table_name = 'shard_claims' AND column_name = 'draining')"
	const view = "SELECT to_regclass('opsq.claims_overview') IS NOT NULL"
	if !has(column) || !has(view) {
		t.Fatal("after migrating up: want shard_claims.draining and opsq.claims_overview")
	}
	if err := m.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if has(column) || has(view) {
		t.Error("after migrating down: shard_claims.draining or opsq.claims_overview still there")
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if !has(column) || !has(view) {
		t.Error("after migrating up again: want shard_claims.draining and opsq.claims_overview")
	}
	if err := migrations.CheckCurrent(ctx, conn); err != nil {
		t.Error(err)
	}
}
