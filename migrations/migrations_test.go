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
