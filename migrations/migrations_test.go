package migrations_test

import (
	"testing"

	"opsq/migrations"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCompletedBatchesKeepEveryOutput: 00006 moves the completed chunks of the per-chunk
// table into rows of a thousand, and back on the way down, losing none and changing none.
func TestCompletedBatchesKeepEveryOutput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	if err := m.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// Two submissions of 2 500 and 3 chunks in the per-chunk table, outputs of every
	// length from 0, one of them holding every byte value.
	if _, err := conn.Exec(ctx, `
INSERT INTO opsq.chunks_completed (submission_id, chunk_index, output)
SELECT 1, i, convert_to(repeat('o', i % 50), 'UTF8') FROM generate_series(0, 2499) i
UNION ALL SELECT 2, 0, '\x00ff0a'::bytea
UNION ALL SELECT 2, 1, ''::bytea
UNION ALL SELECT 2, 2, (SELECT string_agg(set_byte('\x00'::bytea, 0, b), ''::bytea) FROM generate_series(0, 255) b)`); err != nil {
		t.Fatal(err)
	}
	const fingerprint = `SELECT count(*), coalesce(md5(string_agg(submission_id || ':' || chunk_index || ':' || encode(output, 'hex'), ',' ORDER BY submission_id, chunk_index)), '')
FROM opsq.chunks_completed`
	read := func() (n int64, sum string) {
		t.Helper()
		if err := conn.QueryRow(ctx, fingerprint).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		return n, sum
	}
	n0, sum0 := read()
	if n0 != 2503 {
		t.Fatalf("%d rows before migrating up; want 2503", n0)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if n, sum := read(); n != n0 || sum != sum0 {
		t.Errorf("after 00006: %d chunks (fingerprint %s); want %d (%s)", n, sum, n0, sum0)
	}
	var rows int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM opsq.completed_batches").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 4 { // submission 1: 0–999, 1000–1999, 2000–2499; submission 2: one row
		t.Errorf("%d rows in completed_batches; want 4, a thousand chunks to a row", rows)
	}
	if err := m.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if n, sum := read(); n != n0 || sum != sum0 {
		t.Errorf("after migrating down again: %d chunks (fingerprint %s); want %d (%s)", n, sum, n0, sum0)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := migrations.CheckCurrent(ctx, conn); err != nil {
		t.Error(err)
	}
}

// TestTenantsMigration: 00009 gives every existing submission, in each of the four tables,
// the tenant "default" (in its row and as its "@tenant" strategic metadata), and every key
// too; idempotency keys become per tenant; and the way down keeps one submission per
// idempotency key.
func TestTenantsMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	if err := m.DownTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO opsq.submissions (id, chunks_total, max_retries) VALUES (1, 3, 1);
INSERT INTO opsq.submissions_completed (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata, created_at)
    VALUES (2, 1, 1, 0, 1, '', '{}', now());
INSERT INTO opsq.submissions_failed (id, chunks_total, chunks_done, chunks_failed, priority, max_retries, metadata, strategic_metadata, created_at, failed_chunk_index, error)
    VALUES (3, 1, 0, 1, 0, 1, '', '{}', now(), 0, 'boom');
INSERT INTO opsq.submissions_cancelled (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata, created_at)
    VALUES (4, 1, 0, 0, 1, '', '{}', now());
INSERT INTO opsq.strategic_metadata (key, value, submission_id) VALUES ('mode', '"x"', 1), ('@tenant', '"forged"', 1);
INSERT INTO opsq.idempotency_keys (key, submission_id) VALUES ('run-7', 1);
INSERT INTO opsq.api_keys (name, role, sha256) VALUES ('p', 'producer', decode(repeat('ab', 32), 'hex'))`); err != nil {
		t.Fatal(err)
	}
	// On Citus, up to the last migration before the layout, which converts only an empty
	// database (TestCitusDownAndUp).
	if err := m.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	count := func(query string) int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	for query, want := range map[string]int64{
		"SELECT count(*) FROM opsq.submission_status WHERE tenant = 'default'":                       4,
		`SELECT count(*) FROM opsq.strategic_metadata WHERE key = '@tenant' AND value = '"default"'`: 4,
		"SELECT count(*) FROM opsq.strategic_metadata WHERE key = '@tenant'":                         4,
		"SELECT count(*) FROM opsq.strategic_metadata WHERE key = 'mode'":                            1,
		"SELECT count(*) FROM opsq.idempotency_keys WHERE tenant = 'default' AND key = 'run-7'":      1,
		"SELECT count(*) FROM opsq.api_keys WHERE tenant = 'default' AND tenants IS NULL":            1,
	} {
		if n := count(query); n != want {
			t.Errorf("after 00009, %s: %d; want %d", query, n, want)
		}
	}
	// The same key text in another tenant is another key.
	if _, err := conn.Exec(ctx, "INSERT INTO opsq.submissions (id, chunks_total, max_retries, tenant) VALUES (5, 1, 1, 'acme'); INSERT INTO opsq.idempotency_keys (tenant, key, submission_id) VALUES ('acme', 'run-7', 5)"); err != nil {
		t.Fatalf("acme's run-7 beside default's: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO opsq.idempotency_keys (tenant, key, submission_id) VALUES ('acme', 'run-7', 6)"); err == nil {
		t.Error("a second run-7 in acme: no error; want the primary key to refuse it")
	}
	if _, err := conn.Exec(ctx, "UPDATE opsq.api_keys SET tenants = ARRAY['Not A Tenant']"); err == nil {
		t.Error("a key limited to an invalid tenant name: no error; want the check to refuse it")
	}
	if err := m.DownTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT count(*) FROM opsq.idempotency_keys WHERE key = 'run-7'"); n != 1 {
		t.Errorf("after migrating down, %d run-7 keys; want 1", n)
	}
	if n := count("SELECT count(*) FROM opsq.strategic_metadata WHERE key = '@tenant'"); n != 0 {
		t.Errorf("after migrating down, %d @tenant rows; want none", n)
	}
	if err := m.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
}
