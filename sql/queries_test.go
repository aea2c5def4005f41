package sql_test

import (
	"errors"
	"testing"

	"opsq/migrations/pgtest"
	opsqsql "opsq/sql"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStatementsTranslateTheirErrors: a single-row read that finds nothing is ErrNotFound,
// whatever the statement.
func TestStatementsTranslateTheirErrors(t *testing.T) {
	t.Parallel()
	db := opsqsql.New(pgtest.NewPool(t))
	ctx := t.Context()
	if _, err := db.SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: 42}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("SubmissionStatus of no submission: %v; want ErrNotFound", err)
	}
	if _, err := db.ShardOwner(ctx, opsqsql.ShardOwnerParams{Shard: 3}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("ShardOwner of an unclaimed shard: %v; want ErrNotFound", err)
	}
	if _, err := db.ChunkState(ctx, opsqsql.ChunkStateParams{Chunk: opsqsql.Chunk{Shard: 3, SubmissionID: 42}}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("ChunkState of no chunk: %v; want ErrNotFound", err)
	}
	if err := db.SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: 42}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("SubmissionCancel of no submission: %v; want ErrNotFound", err)
	}
}

// TestFencedWritesReportTheirRefusal: chunk_retry.sql and chunk_fail.sql under a
// generation the claimant does not hold the shard at write nothing and come back as a
// *FenceError naming the shard and that generation; under the generation held they write.
func TestFencedWritesReportTheirRefusal(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	ctx := t.Context()
	const shard, held = 5, 7
	if _, err := pool.Exec(ctx, "UPDATE opsq.shard_claims SET claimant = 'owner', generation = $2 WHERE shard = $1", shard, held); err != nil {
		t.Fatal(err)
	}
	zero := 0
	for _, id := range []int64{1, 2} {
		p := opsqsql.SubmissionInsertParams{ID: id, ChunksTotal: 1, Metadata: "", StrategicMetadata: "{}"}
		if id == 2 {
			p.MaxRetries = &zero // no attempt left: only failing writes
		}
		if err := db.SubmissionInsert(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order) VALUES ($1, 0, $2, 0)", id, shard); err != nil {
			t.Fatal(err)
		}
	}
	chunk := func(id int64) opsqsql.Chunk { return opsqsql.Chunk{Shard: shard, SubmissionID: id} }
	stale := &opsqsql.Fence{Claimant: "owner", Generation: held - 1}
	refused := func(what string, err error) {
		t.Helper()
		var fenced *opsqsql.FenceError
		if !errors.As(err, &fenced) || fenced.Shard != shard || fenced.Generation != stale.Generation {
			t.Fatalf("%s under a stale generation: %v; want a *FenceError naming shard %d, generation %d", what, err, shard, stale.Generation)
		}
		if !errors.Is(err, opsqsql.ErrShardLost) {
			t.Errorf("%s: errors.Is(%v, ErrShardLost) = false; want true", what, err)
		}
	}

	_, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(1), Fence: stale})
	refused("ChunkRetry", err)
	_, err = db.ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk(2), Error: "x", Fence: stale})
	refused("ChunkFail", err)
	for _, id := range []int64{1, 2} {
		if st, err := db.ChunkState(ctx, opsqsql.ChunkStateParams{Chunk: chunk(id)}); err != nil || st.State != "pending" || st.Retries != 0 {
			t.Fatalf("chunk of %d after the refused writes: %+v, %v; want pending with 0 retries", id, st, err)
		}
	}

	fence := &opsqsql.Fence{Claimant: "owner", Generation: held}
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(1), Fence: fence}); err != nil || !retried {
		t.Errorf("ChunkRetry under the generation held: %v, %v; want true, nil", retried, err)
	}
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(2), Fence: fence}); err != nil || retried {
		t.Errorf("ChunkRetry of a chunk with no attempt left: %v, %v; want false, nil (not a fence refusal)", retried, err)
	}
	if failed, err := db.ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk(2), Error: "x", Fence: fence}); err != nil || !failed {
		t.Errorf("ChunkFail under the generation held: %v, %v; want true, nil", failed, err)
	}
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(1), Retries: 1}); err != nil || !retried {
		t.Errorf("ChunkRetry without a fence: %v, %v; want true, nil", retried, err)
	}
}
