package sql_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
	"opsq/strategy"
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
	if _, err := db.SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: 42}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("SubmissionCancel of no submission: %v; want ErrNotFound", err)
	}
	if _, err := db.SubmissionEndedLock(ctx, opsqsql.SubmissionEndedLockParams{ID: 42}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("SubmissionEndedLock of no submission: %v; want ErrNotFound", err)
	}
	if _, err := db.SubmissionEndedLock(ctx, opsqsql.SubmissionEndedLockParams{ID: 42, Failed: true}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("SubmissionEndedLock of no failed submission: %v; want ErrNotFound", err)
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
		// Retried at once (no backoff), so that the chunk stays where the writes look.
		if err := db.SubmissionLifecycleInsert(ctx, opsqsql.SubmissionLifecycleInsertParams{ID: id, OnFailure: []byte(`"fail_submission"`),
			MaxFailed: new(int64), BackoffFactor: 2, BackoffMax: time.Minute}); err != nil {
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
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(1), Fence: fence}); err != nil || !retried.Retried {
		t.Errorf("ChunkRetry under the generation held: %v, %v; want true, nil", retried, err)
	}
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(2), Fence: fence}); err != nil || retried.Retried {
		t.Errorf("ChunkRetry of a chunk with no attempt left: %v, %v; want false, nil (not a fence refusal)", retried, err)
	}
	if failed, err := db.ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk(2), Error: "x", Fence: fence}); err != nil || !failed.Failed {
		t.Errorf("ChunkFail under the generation held: %v, %v; want true, nil", failed, err)
	}
	if retried, err := db.ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk(1), Retries: 1}); err != nil || !retried.Retried {
		t.Errorf("ChunkRetry without a fence: %v, %v; want true, nil", retried, err)
	}
}

// TestAPIKeys: the API keys' statements, and their errors translated: a name or a hash
// taken, no key, no submission.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	db := opsqsql.New(pgtest.NewPool(t))
	ctx := t.Context()
	sum := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	if _, err := db.APIKeyCreate(ctx, opsqsql.APIKeyCreateParams{Name: "ci", Role: "admin", SHA256: sum(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APIKeyCreate(ctx, opsqsql.APIKeyCreateParams{Name: "ci", Role: "admin", SHA256: sum(2)}); !errors.Is(err, opsqsql.ErrAPIKeyNameTaken) {
		t.Errorf("APIKeyCreate of a name taken: %v; want ErrAPIKeyNameTaken", err)
	}
	if _, err := db.APIKeyCreate(ctx, opsqsql.APIKeyCreateParams{Name: "other", Role: "admin", SHA256: sum(1)}); err == nil || errors.Is(err, opsqsql.ErrAPIKeyNameTaken) {
		t.Errorf("APIKeyCreate of a hash taken: %v; want an error that is not ErrAPIKeyNameTaken", err)
	}
	if _, err := db.APIKeyRevoke(ctx, opsqsql.APIKeyRevokeParams{Name: "nobody"}); !errors.Is(err, opsqsql.ErrNotFound) {
		t.Errorf("APIKeyRevoke of no key: %v; want ErrNotFound", err)
	}
	keys, err := db.APIKeysList(ctx)
	if err != nil || len(keys) != 1 || keys[0].Name != "ci" || keys[0].Role != "admin" {
		t.Errorf("APIKeysList: %+v, %v; want the one key ci", keys, err)
	}
	loaded, err := db.APIKeysLoad(ctx)
	if err != nil || len(loaded) != 1 || !bytes.Equal(loaded[0].SHA256, sum(1)) || loaded[0].Revoked {
		t.Errorf("APIKeysLoad: %+v, %v; want ci with its hash, not revoked", loaded, err)
	}
}

// TestSubmissionsCancel: one batch moves the submissions in progress and returns their
// ids, in order; the unknown and the finished are left.
func TestSubmissionsCancel(t *testing.T) {
	t.Parallel()
	db := opsqsql.New(pgtest.NewPool(t))
	ctx := t.Context()
	for _, id := range []int64{1, 2, 3} {
		if err := db.SubmissionInsert(ctx, opsqsql.SubmissionInsertParams{ID: id, ChunksTotal: 1, StrategicMetadata: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: 2, SkipNow: 1}); err != nil {
		t.Fatal(err)
	}
	moved, err := db.SubmissionsCancel(ctx, opsqsql.SubmissionsCancelParams{IDs: []int64{3, 2, 99, 1}})
	if err != nil || !slices.Equal(moved, []int64{3, 1}) {
		t.Errorf("SubmissionsCancel of 3, 2 (cancelled), 99 (unknown), 1: %v, %v; want [3 1]", moved, err)
	}
	if moved, err := db.SubmissionsCancel(ctx, opsqsql.SubmissionsCancelParams{}); err != nil || len(moved) != 0 {
		t.Errorf("SubmissionsCancel of none: %v, %v; want none", moved, err)
	}
}

// TestAdminActionsReportTheirTarget: the dashboard's recipes report whether the instance
// or shard they name exists.
func TestAdminActionsReportTheirTarget(t *testing.T) {
	t.Parallel()
	db := opsqsql.New(pgtest.NewPool(t))
	ctx := t.Context()
	if _, err := db.InstanceRegister(ctx, opsqsql.InstanceRegisterParams{ID: "i1", AdvertiseURL: "http://i1"}); err != nil {
		t.Fatal(err)
	}
	instance := func(action func(context.Context, opsqsql.AdminInstanceParams) (bool, error), id string) func() (bool, error) {
		return func() (bool, error) { return action(ctx, opsqsql.AdminInstanceParams{Instance: id}) }
	}
	shard := func(action func(context.Context, opsqsql.AdminShardParams) (bool, error), s int) func() (bool, error) {
		return func() (bool, error) { return action(ctx, opsqsql.AdminShardParams{Shard: s}) }
	}
	for _, tc := range []struct {
		name string
		run  func() (bool, error)
		want bool
	}{
		{"drain i1", instance(db.AdminDrainInstance, "i1"), true},
		{"undrain i1", instance(db.AdminUndrainInstance, "i1"), true},
		{"drain nobody", instance(db.AdminDrainInstance, "nobody"), false},
		{"disable 3", shard(db.AdminDisableShard, 3), true},
		{"enable 3", shard(db.AdminEnableShard, 3), true},
		{"disable 100000", shard(db.AdminDisableShard, 100000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := tc.run(); err != nil || got != tc.want {
				t.Errorf("got %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}

// TestCandidatesStream: a candidate query as strategy compiles it streams its rows, in its
// order, each with its columns and where its row is; a failure reads "reading candidates".
func TestCandidatesStream(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	db := opsqsql.New(pool)
	ctx := t.Context()
	if err := db.SubmissionInsert(ctx, opsqsql.SubmissionInsertParams{ID: 7, ChunksTotal: 2, Priority: 5, StrategicMetadata: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, input)
		VALUES (7, 0, 2, 10, '"a"'), (7, 1, 2, 20, '"b"')`); err != nil {
		t.Fatal(err)
	}
	query, args := strategy.CandidateQuery(strategy.OldestFirst, nil, []int32{2})
	for k, v := range strategy.NewCursor(strategy.OldestFirst).Args(10) {
		args[k] = v
	}
	var got []opsqsql.CandidatesStreamRow
	err := db.CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(r opsqsql.CandidatesStreamRow) error {
		got = append(got, r)
		return nil
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("CandidatesStream: %d rows, %v; want 2", len(got), err)
	}
	for i, r := range got {
		want := opsqsql.CandidatesStreamRow{SubmissionID: 7, ChunkIndex: int32(i), Shard: 2, Input: []byte{'"', byte('a' + i), '"'}, RandomOrder: 10 * (i + 1)}
		if r.SubmissionID != want.SubmissionID || r.ChunkIndex != want.ChunkIndex || r.Shard != want.Shard || !bytes.Equal(r.Input, want.Input) || r.RandomOrder != want.RandomOrder {
			t.Errorf("row %d: %+v; want %+v", i, r, want)
		}
		var at opsqsql.RowAddr
		if err := pool.QueryRow(ctx, `SELECT ctid FROM opsq.chunks WHERE submission_id = 7 AND chunk_index = $1`, i).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if r.Row == 0 || r.Row != at {
			t.Errorf("row %d: read at address %d; its row is at %d", i, r.Row, at)
		}
	}
	stop := errors.New("stop")
	err = db.CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(opsqsql.CandidatesStreamRow) error { return stop })
	if !errors.Is(err, stop) || !strings.HasPrefix(err.Error(), "reading candidates: ") {
		t.Errorf("CandidatesStream with fn failing: %v; want fn's error, wrapped as reading candidates", err)
	}
}
