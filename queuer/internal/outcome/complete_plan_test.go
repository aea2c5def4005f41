package outcome

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestCompletePlannedOncePerConnection checks that the completer's transaction runs the
// complete statement on its generic plan, planned once per connection. Over a chunk table
// of some thousands of rows (here 20 000 chunks over 64 shards, analyzed), PostgreSQL's
// plan cache otherwise picks a custom plan for every batch, and planning the statement
// over every chunk partition (before migration 00026 made the chunks one table) cost a
// third of PostgreSQL's CPU in a burn-down (perf, docs/capacity.md). The plain connection shows that the data sets that trap; the one that
// runs plan_by_key.sql first, as the completer does, must not fall into it.
func TestCompletePlannedOncePerConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDB(t)
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	setup := connect()
	const chunks, shards = 20_000, 64
	if _, err := setup.Exec(ctx, `INSERT INTO opsq.submissions (id, chunks_total, max_retries) VALUES (1, $1, 10)`, chunks); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, `INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, input)
		SELECT 1, i, i % $2, (random() * 2e9)::int, 'x' FROM generate_series(0, $1 - 1) i`, chunks, shards); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, "ANALYZE opsq.chunks"); err != nil {
		t.Fatal(err)
	}

	// plans completes batches of 500 random chunks on conn, each in a transaction rolled
	// back (the chunks stay), and returns how the statement was planned on conn.
	plans := func(conn *pgx.Conn, planByKey bool) (generic, custom int64) {
		t.Helper()
		for range 8 {
			p := opsqsql.ChunksCompleteParams{Locked: []int64{1}}
			for _, i := range rand.Perm(chunks)[:500] {
				p.SubmissionIDs = append(p.SubmissionIDs, 1)
				p.ChunkIndexes = append(p.ChunkIndexes, int32(i))
				p.Shards = append(p.Shards, int32(i%shards))
				p.Outputs = append(p.Outputs, []byte("ok"))
				p.Tokens = append(p.Tokens, "token")
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			db := opsqsql.New(tx)
			if planByKey {
				if err := db.PlanByKey(ctx); err != nil {
					t.Fatal(err)
				}
			}
			done, err := db.ChunksComplete(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != 500 {
				t.Fatalf("a batch of 500 pending chunks completed %d", len(done))
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '%INSERT INTO opsq.completed_batches%'`).Scan(&generic, &custom); err != nil {
			t.Fatalf("reading the complete statement's plans: %v", err)
		}
		return generic, custom
	}
	if _, custom := plans(connect(), false); custom == 0 {
		t.Fatal("a plain connection used the generic plan for every batch: this data no longer tempts the plan cache into custom plans, so the test shows nothing; load more chunks")
	}
	if generic, custom := plans(connect(), true); custom != 0 {
		t.Errorf("the completer's transaction planned the complete statement %d times for 8 batches (%d generic); want once, generic", custom, generic)
	}
}
