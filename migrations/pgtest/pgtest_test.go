package pgtest_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/migrations"
	"opsq/migrations/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dbURL, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// partitions counts the partitions of opsq.chunks.
func partitions(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	err := conn.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_inherits WHERE inhparent = 'opsq.chunks'::regclass").Scan(&n)
	if err != nil {
		t.Fatalf("counting partitions of opsq.chunks: %v", err)
	}
	return n
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func TestNewDBIndependentAndMigrated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	urlA, urlB := pgtest.NewDB(t), pgtest.NewDB(t)
	if dbName(t, urlA) == dbName(t, urlB) {
		t.Fatalf("two NewDB calls gave the same database %s", dbName(t, urlA))
	}
	a, b := connect(t, urlA), connect(t, urlB)
	for _, conn := range []*pgx.Conn{a, b} {
		if got := partitions(t, conn); got != migrations.ShardCountDefault {
			t.Errorf("opsq.chunks has %d partitions; want %d", got, migrations.ShardCountDefault)
		}
	}
	m, err := migrations.New(ctx, urlA, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if current, err := m.Current(ctx); err != nil || !current {
		t.Errorf("Current() = %v, %v; want every migration applied", current, err)
	}

	if _, err := a.Exec(ctx, "UPDATE opsq.settings SET value = '5s' WHERE key = 'claim_renew_interval'"); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := b.QueryRow(ctx, "SELECT value FROM opsq.settings WHERE key = 'claim_renew_interval'").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "2s" {
		t.Errorf("claim_renew_interval in the second database = %s after changing the first; want 2s", got)
	}
}

func TestNewDBDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var inner string
	t.Run("inner", func(t *testing.T) {
		inner = dbName(t, pgtest.NewDB(t))
	})
	conn := connect(t, pgtest.NewDB(t))
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", inner).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended; want it dropped", inner)
	}
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool = pgtest.NewPool(t)
	var shards string
	if err := pool.QueryRow(t.Context(), "SELECT value FROM opsq.settings WHERE key = 'shard_count'").Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if shards != "64" {
		t.Errorf("shard_count = %s; want 64", shards)
	}
}

func TestNewDBWithShards(t *testing.T) {
	t.Parallel()
	conn := connect(t, pgtest.NewDBWithShards(t, 4))
	if got := partitions(t, conn); got != 4 {
		t.Errorf("opsq.chunks has %d partitions; want 4", got)
	}
}

// Many tests at once each get their own database.
func TestNewDBParallel(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(strings.Repeat("p", i+1), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.NewDB(t))
			if _, err := conn.Exec(t.Context(), "CREATE TABLE mine (x int)"); err != nil {
				t.Errorf("creating a table in a fresh database: %v", err)
			}
		})
	}
}
