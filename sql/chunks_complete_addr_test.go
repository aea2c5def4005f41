package sql_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestChunksCompleteByRowAddress: a chunk given with its row's address is deleted by that
// address, without a descent of the primary key; one whose address is wrong (another
// chunk's row stands there, its row moved, it is finished) is completed by key or left
// alone as finished, never another chunk in its place; one without an address by key.
// completedIn is what completeIn did.
type completedIn struct {
	chunks   []int32 // completed, in order
	finished bool    // the submission
	descents int64   // of the chunks' indexes
}

// completeIn completes chunks idxs of submission 1 (shard i % 4), chunk idxs[k] given the
// address rows[k], in one transaction as the completer does.
func completeIn(t *testing.T, pool *pgxpool.Pool, idxs []int32, rows []opsqsql.RowAddr) completedIn {
	t.Helper()
	ctx := t.Context()
	p := opsqsql.ChunksCompleteParams{Locked: []int64{1}, Tokens: []string{}, ChunkIndexes: idxs, Rows: rows}
	for _, i := range idxs {
		p.SubmissionIDs = append(p.SubmissionIDs, 1)
		p.Shards = append(p.Shards, i%4)
		p.Outputs = append(p.Outputs, []byte(fmt.Sprint("out ", i)))
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	q := opsqsql.New(tx)
	if err := q.PlanByKey(ctx); err != nil {
		t.Fatal(err)
	}
	// The backend's scans of the chunks' indexes not yet reported (its transaction's and
	// those of transactions before it): _bt_first counts each descent.
	scans := func() int64 {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT sum(pg_stat_get_xact_numscans(indexrelid))::bigint FROM pg_index WHERE indrelid = 'opsq.chunks'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	scansBefore := scans()
	got, err := q.ChunksComplete(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var out completedIn
	for _, r := range got {
		out.chunks = append(out.chunks, r.ChunkIndex)
		out.finished = out.finished || r.SubmissionFinished
	}
	slices.Sort(out.chunks)
	out.descents = scans() - scansBefore
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChunksCompleteByRowAddress(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	db := opsqsql.New(pool)
	const n = 8 // chunks of submission 1
	if err := db.SubmissionInsert(ctx, opsqsql.SubmissionInsertParams{ID: 1, ChunksTotal: n, StrategicMetadata: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, input)
		SELECT 1, i, i % 4, i, 'x' FROM generate_series(0, $1 - 1) i`, n); err != nil {
		t.Fatal(err)
	}
	addrs := func() []opsqsql.RowAddr {
		t.Helper()
		out := make([]opsqsql.RowAddr, n)
		rows, _ := pool.Query(ctx, `SELECT chunk_index, ctid FROM opsq.chunks WHERE submission_id = 1`)
		var i int32
		var a opsqsql.RowAddr
		if _, err := pgx.ForEachRow(rows, []any{&i, &a}, func() error { out[i] = a; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := addrs()
	for i, a := range before {
		if a == 0 {
			t.Fatalf("chunk %d's ctid read as address 0, which means none", i)
		}
	}
	// Chunk 0 by its own address, chunk 1 by chunk 7's address, chunk 2 after its row
	// moved (an update writes a new version elsewhere), chunk 3 with no address.
	if _, err := pool.Exec(ctx, `UPDATE opsq.chunks SET input = 'moved' WHERE submission_id = 1 AND chunk_index = 2`); err != nil {
		t.Fatal(err)
	}
	if moved := addrs()[2]; moved == before[2] {
		t.Fatalf("chunk 2's row did not move on update (%d): the test shows nothing", moved)
	}
	done := completeIn(t, pool, []int32{0, 1, 2, 3}, []opsqsql.RowAddr{before[0], before[7], before[2], 0})
	if !slices.Equal(done.chunks, []int32{0, 1, 2, 3}) {
		t.Errorf("completed %v; want [0 1 2 3]", done.chunks)
	}
	left := addrs()
	for i := range 4 {
		if left[i] != 0 {
			t.Errorf("chunk %d is still pending", i)
		}
	}
	for i := 4; i < n; i++ {
		if left[i] == 0 {
			t.Errorf("chunk %d was deleted; only 0-3 were completed", i)
		}
	}
	// A finished chunk given its old address completes nothing, and nothing else.
	if done := completeIn(t, pool, []int32{0}, []opsqsql.RowAddr{before[0]}); len(done.chunks) != 0 {
		t.Errorf("completing finished chunk 0 again completed %v; want nothing", done.chunks)
	}
	// Chunks 4-7 by their own addresses: no descent of the primary key at all.
	done = completeIn(t, pool, []int32{4, 5, 6, 7}, before[4:])
	if !slices.Equal(done.chunks, []int32{4, 5, 6, 7}) || !done.finished {
		t.Errorf("completed %v, submission finished %v; want [4 5 6 7], finished", done.chunks, done.finished)
	}
	if done.descents != 0 {
		t.Errorf("completing 4 chunks by their addresses descended the chunks' indexes %d times; want 0", done.descents)
	}
	var count int
	if err := pool.QueryRow(ctx, `SELECT chunks_done FROM opsq.submissions WHERE id = 1`).Scan(&count); err != nil || count != n {
		t.Errorf("chunks_done %d (%v); want %d, each chunk counted once", count, err, n)
	}
}
