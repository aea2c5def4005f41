package queuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

// genChunks yields n chunks "chunk-<i>", failing with failAt's error at index failAt when
// failAt ≥ 0.
type genChunks struct {
	n, next, failAt int
}

var errBrokenInput = errors.New("broken input")

func (g *genChunks) Next() ([]byte, error) {
	if g.next == g.failAt {
		return nil, errBrokenInput
	}
	if g.next == g.n {
		return nil, io.EOF
	}
	g.next++
	return fmt.Appendf(nil, "chunk-%d", g.next-1), nil
}

func TestSubmitInsertsChunksOnTheirShards(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	created, err := q.Submit(ctx, NewSubmission{
		Metadata:          "m",
		StrategicMetadata: json.RawMessage(`{"company_id": 42, "mode": "preview"}`),
		Priority:          7,
	}, &genChunks{n: 1000, failAt: -1})
	if err != nil {
		t.Fatal(err)
	}
	if created.ChunksTotal != 1000 || created.Existing {
		t.Fatalf("Submit = %+v; want 1000 new chunks", created)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", created.ID); n != 1000 {
		t.Fatalf("%d chunk rows; want 1000", n)
	}
	rows, err := pool.Query(ctx, "SELECT chunk_index, shard, random_order, input FROM opsq.chunks WHERE submission_id = $1", created.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx, shard, order int
		var input []byte
		if err := rows.Scan(&idx, &shard, &order, &input); err != nil {
			t.Fatal(err)
		}
		if want := opsqtype.ShardOf(created.ID, idx, 64); shard != want {
			t.Fatalf("chunk %d on shard %d; want %d", idx, shard, want)
		}
		if want := opsqtype.RandomOrder(created.ID, idx, 64); order != want {
			t.Fatalf("chunk %d random_order %d; want %d", idx, order, want)
		}
		if want := fmt.Sprintf("chunk-%d", idx); string(input) != want {
			t.Fatalf("chunk %d input %q; want %q", idx, input, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	st, err := q.Status(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress || st.ChunksTotal != 1000 || st.Priority != 7 || st.Metadata != "m" {
		t.Errorf("status = %+v; want in_progress, 1000 chunks, priority 7, metadata m", st)
	}
	var sm map[string]any
	if err := json.Unmarshal(st.StrategicMetadata, &sm); err != nil || sm["company_id"] != 42.0 || sm["mode"] != "preview" {
		t.Errorf("strategic metadata = %s; want company_id 42 and mode preview", st.StrategicMetadata)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.strategic_metadata WHERE submission_id = $1", created.ID); n != 3 { // its two keys and its tenant
		t.Errorf("%d strategic metadata rows; want 3", n)
	}
	if n := pgtest.Count(t, pool, "SELECT max_retries FROM opsq.submissions WHERE id = $1", created.ID); n != 10 {
		t.Errorf("max_retries = %d; want the default_max_retries setting, 10", n)
	}
}

func TestSubmitIsAtomic(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	_, err := q.Submit(t.Context(), NewSubmission{IdempotencyKey: "k"}, &genChunks{n: 100000, failAt: 90000})
	if !errors.Is(err, errBrokenInput) {
		t.Fatalf("Submit with broken input at chunk 90000: err = %v; want the input's error", err)
	}
	for _, table := range []string{"opsq.chunks", "opsq.submission_status", "opsq.strategic_metadata", "opsq.idempotency_keys"} {
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%s has %d rows after a failed submission; want 0", table, n)
		}
	}
}

func TestSubmitWithoutChunksIsCompleted(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	created, err := q.Submit(t.Context(), NewSubmission{}, &genChunks{n: 0, failAt: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := q.Status(t.Context(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateCompleted || st.FinishedAt == nil || st.ChunksTotal != 0 {
		t.Fatalf("status = %+v; want completed at once", st)
	}
}

func TestSubmitObjectStorageMode(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	created, err := q.Submit(t.Context(), NewSubmission{Prefix: "s3://b/run-7/", ChunkCount: 500}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if created.ChunksTotal != 500 {
		t.Fatalf("ChunksTotal = %d; want 500", created.ChunksTotal)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1 AND input IS NULL", created.ID); n != 500 {
		t.Fatalf("%d chunks without content; want 500", n)
	}
	st, err := q.Status(t.Context(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Prefix == nil || *st.Prefix != "s3://b/run-7/" {
		t.Fatalf("prefix = %v; want s3://b/run-7/", st.Prefix)
	}
}

func TestSubmitIdempotencyKeyUnderConcurrency(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	const producers = 8
	ids := make([]int64, producers)
	existing := make([]bool, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			c, err := q.Submit(context.Background(), NewSubmission{IdempotencyKey: "same"}, &genChunks{n: 2000, failAt: -1})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], existing[i] = c.ID, c.Existing
		})
	}
	wg.Wait()
	fresh := 0
	for i := range producers {
		if ids[i] != ids[0] {
			t.Errorf("producer %d got id %d; want %d like producer 0", i, ids[i], ids[0])
		}
		if !existing[i] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d producers created a submission; want exactly 1", fresh)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks"); n != 2000 {
		t.Errorf("%d chunk rows; want 2000 (one submission)", n)
	}
}

func TestConcurrentProducers(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	const producers, each = 16, 20
	var mu sync.Mutex
	all := map[int64]bool{}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			var last int64
			for i := range each {
				before := time.Now().Add(-time.Millisecond)
				c, err := q.Submit(context.Background(), NewSubmission{Metadata: fmt.Sprint(p, "/", i)}, &genChunks{n: 10, failAt: -1})
				after := time.Now().Add(time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				if c.ID <= last {
					t.Errorf("producer %d: id %d after %d; want ids ordered by time", p, c.ID, last)
				}
				if at := submissions.IDTime(c.ID); at.Before(before) || at.After(after) {
					t.Errorf("producer %d: id %d says %s; want between %s and %s", p, c.ID, at, before, after)
				}
				last = c.ID
				mu.Lock()
				if all[c.ID] {
					t.Errorf("id %d handed out twice", c.ID)
				}
				all[c.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submissions"); n != producers*each {
		t.Errorf("%d submissions; want %d", n, producers*each)
	}
}

// reusedChunks yields "chunk-<i>" for i < n in one buffer it overwrites each call, as
// Chunks may.
type reusedChunks struct {
	n, next int
	buf     []byte
}

func (r *reusedChunks) Next() ([]byte, error) {
	if r.next == r.n {
		return nil, io.EOF
	}
	r.buf = fmt.Appendf(r.buf[:0], "chunk-%d", r.next)
	r.next++
	return r.buf, nil
}

// The chunk rows are written grouped by shard (a window of chunks at a time), so that a
// shard's consecutive chunks share their heap pages in the one chunk table; each keeps its
// own input, though the source reuses its buffer.
func TestSubmitWritesChunksGroupedByShard(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	const n = 10_000
	c, err := q.Submit(ctx, NewSubmission{}, &reusedChunks{n: n})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT chunk_index, shard, input FROM opsq.chunks WHERE submission_id = $1 ORDER BY ctid", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen, changes, last := map[int32]bool{}, 0, int32(-1)
	for rows.Next() {
		var idx, shard int32
		var input []byte
		if err := rows.Scan(&idx, &shard, &input); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("chunk-%d", idx); string(input) != want || seen[idx] {
			t.Fatalf("chunk %d: input %q (seen before: %v); want %q once", idx, input, seen[idx], want)
		}
		seen[idx] = true
		if shard != last {
			changes++
			last = shard
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d chunk rows; want %d", len(seen), n)
	}
	// In index order the shard changes at every row; grouped, once per shard per window.
	if max := 64 * ((n + 4095) / 4096); changes > max {
		t.Errorf("the shard changes %d times along the heap; want at most %d (rows grouped by shard)", changes, max)
	}
}
