//go:build citus

// The layout of migration 00017 on a Citus coordinator and 2 workers: `make test-citus`
// (OPSQ_TEST_CITUS=1, -tags citus) runs these beside the package's other tests.

package migrations_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"opsq/migrations"
	"opsq/sql/pgtest"
)

func requireCitus(t *testing.T) {
	t.Helper()
	if !pgtest.Citus() {
		t.Fatalf("built with -tags citus but %s is not 1: run make test-citus", pgtest.EnvCitus)
	}
}

// layout returns each opsq table Citus knows: "distributed by COLUMN, group N",
// "reference", or absent for the coordinator's own tables.
func layout(t *testing.T, conn *pgx.Conn) map[string]string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `
SELECT p.logicalrelid::regclass::text,
       CASE WHEN p.partmethod = 'n' THEN 'reference'
            ELSE 'distributed by ' || column_to_column_name(p.logicalrelid, p.partkey) || ', group ' || p.colocationid END
FROM pg_dist_partition p
JOIN pg_class c ON c.oid = p.logicalrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'opsq'`)
	if err != nil {
		t.Fatalf("reading pg_dist_partition: %v", err)
	}
	got := map[string]string{}
	for rows.Next() {
		var table, how string
		if err := rows.Scan(&table, &how); err != nil {
			t.Fatal(err)
		}
		got[table] = how
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCitusLayout(t *testing.T) {
	requireCitus(t)
	t.Parallel()
	ctx := t.Context()
	_, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	got := layout(t, conn)
	group := func(table string) string {
		how := got[table]
		if !strings.HasPrefix(how, "distributed by ") {
			t.Errorf("%s: %q; want distributed", table, how)
			return ""
		}
		_, g, _ := strings.Cut(how, ", ")
		return g
	}
	byShard := group("opsq.chunks")
	if got["opsq.chunks"] != "distributed by shard, "+byShard || got["opsq.chunks_waiting"] != "distributed by shard, "+byShard {
		t.Errorf("chunks: %q, chunks_waiting: %q; want both distributed by shard in one group",
			got["opsq.chunks"], got["opsq.chunks_waiting"])
	}
	bySubmission := group("opsq.submissions")
	if bySubmission == byShard {
		t.Errorf("submissions share the chunks' group %s; want a group of their own", byShard)
	}
	for table, col := range map[string]string{
		"opsq.submissions": "id", "opsq.submissions_completed": "id", "opsq.submissions_failed": "id",
		"opsq.submissions_cancelled": "id", "opsq.submission_lifecycle": "id", "opsq.submission_traces": "id",
		"opsq.completed_batches": "submission_id", "opsq.chunks_failed": "submission_id", "opsq.chunk_errors": "submission_id",
	} {
		if want := "distributed by " + col + ", " + bySubmission; got[table] != want {
			t.Errorf("%s: %q; want %q", table, got[table], want)
		}
	}
	if got["opsq.strategic_metadata"] != "reference" {
		t.Errorf("strategic_metadata: %q; want reference", got["opsq.strategic_metadata"])
	}
	for _, local := range []string{"opsq.shard_claims", "opsq.settings", "opsq.instances", "opsq.tenants",
		"opsq.throttles", "opsq.idempotency_keys", "opsq.api_keys", "opsq.goose_db_version", "opsq.schedules", "opsq.schedule_runs"} {
		if how, ok := got[local]; ok {
			t.Errorf("%s: %q; want an ordinary table of the coordinator", local, how)
		}
	}

	// The chunks' rows are on the workers, none on the coordinator.
	if _, err := conn.Exec(ctx, `
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order)
SELECT 1, i, i % 64, i FROM generate_series(0, 999) i`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `
SELECT s.nodeport, sum(r.result::bigint)
FROM run_command_on_shards('opsq.chunks', 'SELECT count(*) FROM %s') r
JOIN citus_shards s ON s.shardid = r.shardid
GROUP BY s.nodeport`)
	if err != nil {
		t.Fatalf("counting rows per node: %v", err)
	}
	perNode, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
		var n [2]int64
		return n, r.Scan(&n[0], &n[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	var coordinatorPort int64
	if err := conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&coordinatorPort); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range perNode {
		if n[0] == coordinatorPort && n[1] > 0 {
			t.Errorf("%d chunk rows on the coordinator; want none", n[1])
		}
		total += n[1]
	}
	if len(perNode) != pgtest.CitusWorkers || total != 1000 {
		t.Errorf("chunk rows per node (port, rows) = %v; want 1000 rows over %d workers", perNode, pgtest.CitusWorkers)
	}
}

func TestCitusRefusesAWorker(t *testing.T) {
	requireCitus(t)
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDB(t)
	workers := pgtest.CitusWorkerURLs(t, dbURL)
	if len(workers) == 0 {
		t.Fatal("no Citus worker URLs")
	}
	conn, err := pgx.Connect(ctx, workers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := schemaFingerprint(t, conn)
	_, err = migrations.New(ctx, workers[0], migrations.Options{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "Citus worker") || !strings.Contains(err.Error(), "coordinator") {
		t.Fatalf("migrations.New on a worker: %v; want a refusal that names the coordinator", err)
	}
	if after := schemaFingerprint(t, conn); after != before {
		t.Errorf("the worker's schema changed after the refusal:\nbefore %s\nafter  %s", before, after)
	}
}

// schemaFingerprint names every relation of the database, to see that nothing changed.
func schemaFingerprint(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	err := conn.QueryRow(context.Background(),
		"SELECT count(*) || ':' || coalesce(md5(string_agg(oid::regclass::text, ',' ORDER BY oid)), '') FROM pg_class").Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Down undoes the layout, rows and all, and Up lays an empty database out again; Up
// refuses a database that holds chunks, and changes nothing.
func TestCitusDownAndUp(t *testing.T) {
	requireCitus(t)
	t.Parallel()
	ctx := t.Context()
	m, conn := pgtest.Migrator(t, pgtest.NewDB(t))
	if _, err := conn.Exec(ctx, `
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order)
SELECT 7, i, i % 64, i FROM generate_series(0, 99) i`); err != nil {
		t.Fatal(err)
	}
	if err := m.DownTo(ctx, 16); err != nil {
		t.Fatalf("down from the Citus layout: %v", err)
	}
	if got := layout(t, conn); len(got) != 0 {
		t.Errorf("after down, Citus still knows %v; want no opsq table", got)
	}
	var partitions, rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'opsq.chunks'::regclass").Scan(&partitions); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM opsq.chunks_7").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if partitions != migrations.ShardCountDefault || rows != 2 {
		t.Errorf("after down: %d partitions, %d rows in shard 7's; want %d and 2", partitions, rows, migrations.ShardCountDefault)
	}

	err := m.Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "already holds submissions") {
		t.Fatalf("up over 100 chunks: %v; want a refusal", err)
	}
	if got := layout(t, conn); len(got) != 0 {
		t.Errorf("after the refused up, Citus knows %v; want no opsq table", got)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM opsq.chunks"); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("up over an empty database: %v", err)
	}
	if got := layout(t, conn)["opsq.chunks"]; !strings.HasPrefix(got, "distributed by shard") {
		t.Errorf("after up: chunks %q; want distributed by shard", got)
	}
}
