package pgtest_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/migrations"
	"opsq/sql/pgtest"
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

// shards counts the shards a database was made with: the rows of opsq.shard_claims (one
// per shard) on one PostgreSQL, where opsq.chunks is one table (migration 00026), and the
// Citus shards of opsq.chunks on Citus (migration 00017).
func shards(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	query := "SELECT count(*) FROM opsq.shard_claims"
	if pgtest.Citus() {
		query = "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'opsq.chunks'::regclass"
	}
	var n int
	if err := conn.QueryRow(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("counting the parts of opsq.chunks: %v", err)
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
		if got := shards(t, conn); got != migrations.ShardCountDefault {
			t.Errorf("the database has %d shards; want %d", got, migrations.ShardCountDefault)
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
	if got := shards(t, conn); got != 4 {
		t.Errorf("the database has %d shards; want 4", got)
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

func TestSetTimingsWritesOnlyTheFieldsGiven(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	read := func() map[string]string {
		rows, err := pool.Query(t.Context(), "SELECT key, value FROM opsq.settings")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			got[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := read()
	pgtest.SetTimings(t, pool, pgtest.Timings{Renew: 100 * time.Millisecond, Soft: time.Second, Hard: 3 * time.Second})
	after := read()
	for key, want := range map[string]string{
		"claim_renew_interval":       "100ms",
		"claim_soft_expiry":          "1s",
		"claim_hard_expiry":          "3s",
		"instance_heartbeat_timeout": before["instance_heartbeat_timeout"],
		"drain_timeout":              before["drain_timeout"],
	} {
		if after[key] != want {
			t.Errorf("%s = %q after SetTimings; want %q", key, after[key], want)
		}
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	start := time.Now()
	took := pgtest.WaitFor(t, 10*time.Second, "a tenth of a second passes", func() string {
		if d := time.Since(start); d < 100*time.Millisecond {
			return fmt.Sprintf("only %s passed", d)
		}
		return ""
	})
	// WaitFor times from its own start, a little after start: what it reports is at most
	// the time since start, and most of it.
	if elapsed := time.Since(start); took > elapsed || took < elapsed/2 || took > 5*time.Second {
		t.Errorf("WaitFor reported %s after %s had passed; want about 100ms, no more than that", took, elapsed)
	}
	calls := 0
	pgtest.Eventually(t, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("Eventually asked %d times; want it to stop at the first true (3)", calls)
	}
}
