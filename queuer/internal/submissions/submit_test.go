package submissions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/queuer/internal/notify"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// setup returns a store on a fresh database whose object-storage submissions go in by
// slices of slice chunks.
func setup(t *testing.T, slice int) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	ids := NewIDs()
	ids.SetNode(1, time.Now().Add(time.Hour))
	shards := int(pgtest.Count(t, pool, "SELECT value::bigint FROM opsq.settings WHERE key = 'shard_count'"))
	s := New(Config{Pool: pool, ShardCount: shards, Log: pgtest.Logger(t, 0), IDs: ids, Bus: &notify.Bus{}})
	s.cfg.SliceRows = slice
	return s, pool
}

// TestSubmitSlicedCut: an object-storage submission cut half-way is never visible, and
// leaves none of the slices it committed.
func TestSubmitSlicedCut(t *testing.T) {
	t.Parallel()
	s, pool := setup(t, 1000)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen []int64
	s.cfg.AfterSlice = func(done int64) {
		seen = append(seen, done)
		// Half-way: the slices are committed, the submission is not there.
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks"); n != done {
			t.Errorf("after %d chunks: %d chunk rows committed; want %d", done, n, done)
		}
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_status"); n != 0 {
			t.Errorf("after %d chunks: %d submissions visible; want none before the last slice", done, n)
		}
		if done == 3000 {
			cancel() // the client goes away
		}
	}
	_, err := s.Submit(ctx, NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: 10_000}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit cut after 3 slices: %v; want context.Canceled", err)
	}
	if len(seen) != 3 {
		t.Errorf("slices committed %v; want 3 before the cut", seen)
	}
	for _, q := range []string{
		"SELECT count(*) FROM opsq.chunks", "SELECT count(*) FROM opsq.chunks_waiting",
		"SELECT count(*) FROM opsq.submission_status", "SELECT count(*) FROM opsq.strategic_metadata",
	} {
		if n := pgtest.Count(t, pool, q); n != 0 {
			t.Errorf("%s = %d after the cut; want 0", q, n)
		}
	}
}

// TestSubmitSliced: a large object-storage submission goes in whole, by slices, and an
// idempotent repeat inserts nothing more.
func TestSubmitSliced(t *testing.T) {
	t.Parallel()
	s, pool := setup(t, 1000)
	slices := 0
	s.cfg.AfterSlice = func(int64) { slices++ }
	sub := NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: 2500, IdempotencyKey: "run-1"}
	created, err := s.Submit(t.Context(), sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if created.ChunksTotal != 2500 || created.Existing {
		t.Errorf("created %+v; want 2500 chunks, new", created)
	}
	if slices != 3 {
		t.Errorf("%d slices; want 3 of at most 1000", slices)
	}
	if n := pgtest.Count(t, pool, "SELECT count(DISTINCT chunk_index) FROM opsq.chunks WHERE submission_id = $1 AND chunk_index BETWEEN 0 AND 2499", created.ID); n != 2500 {
		t.Errorf("%d distinct chunks 0–2499; want 2500", n)
	}
	st, err := s.Status(t.Context(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksTotal != 2500 || st.State != "in_progress" {
		t.Errorf("status %s of %d chunks; want in_progress of 2500", st.State, st.ChunksTotal)
	}
	again, err := s.Submit(t.Context(), sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Existing || again.ID != created.ID {
		t.Errorf("the repeat: %+v; want the first submission %d", again, created.ID)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks"); n != 2500 {
		t.Errorf("%d chunk rows after the repeat; want 2500", n)
	}
}
