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

// TestChunksFlatKeepsEveryRow: on one PostgreSQL, 00026 makes opsq.chunks one table with
// the shard leading its ordered indexes, and the way down puts the LIST partitions back;
// both keep every row and every column of it.
func TestChunksFlatKeepsEveryRow(t *testing.T) {
	if pgtest.Citus() {
		t.Skip("00026 does nothing on Citus, where 00017 made chunks one table")
	}
	t.Parallel()
	ctx := t.Context()
	m, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	if err := m.DownTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	// 5 000 chunks of 3 submissions on every shard, retried, inputs NULL and of every byte.
	if _, err := conn.Exec(ctx, `
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
SELECT 1 + i % 3, i, (i * 7) % 64, (i * 2654435761::bigint % 4294967296 - 2147483648)::int, i % 4,
       CASE WHEN i % 5 = 0 THEN NULL ELSE set_byte('\x00'::bytea, 0, i % 256) END, i % 3
FROM generate_series(0, 4999) i`); err != nil {
		t.Fatal(err)
	}
	const fingerprint = `SELECT count(*), md5(string_agg(concat_ws(':', submission_id, chunk_index, shard, random_order, retries, encode(input, 'hex'), attempt_base), ',' ORDER BY submission_id, chunk_index))
FROM opsq.chunks`
	read := func() (n int64, sum string) {
		t.Helper()
		if err := conn.QueryRow(ctx, fingerprint).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		return n, sum
	}
	layout := func() (kind string, partitions int64, indexes string) {
		t.Helper()
		if err := conn.QueryRow(ctx, `
SELECT c.relkind::text,
       (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid),
       (SELECT string_agg(pg_get_indexdef(indexrelid), '; ' ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = c.oid)
FROM pg_class c WHERE c.oid = 'opsq.chunks'::regclass`).Scan(&kind, &partitions, &indexes); err != nil {
			t.Fatal(err)
		}
		return kind, partitions, indexes
	}
	n0, sum0 := read()
	if n0 != 5000 {
		t.Fatalf("%d chunks before migrating up; want 5000", n0)
	}
	if err := m.UpTo(ctx, 26); err != nil {
		t.Fatal(err)
	}
	if n, sum := read(); n != n0 || sum != sum0 {
		t.Errorf("after 00026: %d chunks (fingerprint %s); want %d (%s)", n, sum, n0, sum0)
	}
	wantIndexes := "CREATE UNIQUE INDEX chunks_pkey ON opsq.chunks USING btree (submission_id, chunk_index, shard); " +
		"CREATE INDEX chunks_random_order ON opsq.chunks USING btree (shard, random_order, submission_id, chunk_index); " +
		"CREATE INDEX chunks_shard_submission ON opsq.chunks USING btree (shard, submission_id, chunk_index)"
	if kind, parts, indexes := layout(); kind != "r" || parts != 0 || indexes != wantIndexes {
		t.Errorf("after 00026: relkind %s, %d partitions, indexes %s; want r, 0, %s", kind, parts, indexes, wantIndexes)
	}
	// The defaults stay.
	if _, err := conn.Exec(ctx, "INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order) VALUES (9, 0, 3, 0)"); err != nil {
		t.Fatal(err)
	}
	var retries, base int32
	if err := conn.QueryRow(ctx, "DELETE FROM opsq.chunks WHERE submission_id = 9 RETURNING retries, attempt_base").Scan(&retries, &base); err != nil || retries != 0 || base != 0 {
		t.Errorf("a chunk inserted without retries and attempt_base: %d, %d (%v); want 0, 0", retries, base, err)
	}
	if err := m.DownTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	if n, sum := read(); n != n0 || sum != sum0 {
		t.Errorf("after migrating down again: %d chunks (fingerprint %s); want %d (%s)", n, sum, n0, sum0)
	}
	if kind, parts, _ := layout(); kind != "p" || parts != 64 {
		t.Errorf("after migrating down: relkind %s, %d partitions; want p, 64", kind, parts)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := migrations.CheckCurrent(ctx, conn); err != nil {
		t.Error(err)
	}
}
