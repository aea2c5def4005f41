package queuer

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// bulkSubmission is submission i of the bulk tests: ids from 1<<40, company_id i % 7,
// submission i with 1 + i%3 chunks "bulk <i>.<j>", every fifth with max_retries 3.
func bulkSubmission(i int64) submissions.SmallSubmission {
	s := submissions.SmallSubmission{ID: 1<<40 + i, Metadata: fmt.Sprintf("bulk %d", i), Priority: i % 2,
		StrategicMetadata: json.RawMessage(fmt.Sprintf(`{"company_id": %d, "mode": "bulk"}`, i%7))}
	for j := range 1 + i%3 {
		s.Chunks = append(s.Chunks, fmt.Appendf(nil, "bulk %d.%d", i, j))
	}
	if i%5 == 0 {
		three := 3
		s.MaxRetries = &three
	}
	return s
}

func TestSubmitManyWritesTheRowsOfSubmit(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	const n = 1000
	var lastProgress int64
	if err := submissions.SubmitMany(ctx, pool, n, bulkSubmission, func(rows int64) { lastProgress = rows }); err != nil {
		t.Fatal(err)
	}
	var chunks int64
	for i := range int64(n) {
		chunks += int64(len(bulkSubmission(i).Chunks))
	}
	if lastProgress != chunks+2*n {
		t.Errorf("last progress %d rows; want %d (chunks, then submissions and their metadata)", lastProgress, chunks+2*n)
	}
	if got := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks"); got != chunks {
		t.Fatalf("%d chunk rows; want %d", got, chunks)
	}
	rows, err := pool.Query(ctx, "SELECT submission_id, chunk_index, shard, random_order, input FROM opsq.chunks")
	if err != nil {
		t.Fatal(err)
	}
	shards := map[int]bool{}
	for rows.Next() {
		var id int64
		var idx, shard, order int
		var input []byte
		if err := rows.Scan(&id, &idx, &shard, &order, &input); err != nil {
			t.Fatal(err)
		}
		if shard != opsqtype.ShardOf(id, idx, 64) || order != opsqtype.RandomOrder(id, idx, 64) {
			t.Fatalf("chunk %d/%d on shard %d, random_order %d; want Submit's: %d and %d", id, idx, shard, order,
				opsqtype.ShardOf(id, idx, 64), opsqtype.RandomOrder(id, idx, 64))
		}
		if want := fmt.Sprintf("bulk %d.%d", id-1<<40, idx); string(input) != want {
			t.Fatalf("chunk %d/%d input %q; want %q", id, idx, input, want)
		}
		shards[shard] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(shards) != 64 {
		t.Errorf("chunks on %d shards; want all 64", len(shards))
	}
	for _, i := range []int64{0, 1, 2, 999} {
		want := bulkSubmission(i)
		st, err := q.Status(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != opsqtype.StateInProgress || st.ChunksTotal != int64(len(want.Chunks)) || st.Priority != want.Priority || st.Metadata != want.Metadata {
			t.Errorf("status of submission %d = %+v; want in_progress, %d chunks, priority %d, metadata %q", i, st, len(want.Chunks), want.Priority, want.Metadata)
		}
		var sm map[string]any
		if err := json.Unmarshal(st.StrategicMetadata, &sm); err != nil || sm["company_id"] != float64(i%7) || sm["mode"] != "bulk" {
			t.Errorf("strategic metadata of submission %d = %s; want company_id %d and mode bulk", i, st.StrategicMetadata, i%7)
		}
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.strategic_metadata WHERE submission_id = $1", want.ID); n != 3 { // its two keys and its tenant
			t.Errorf("submission %d: %d strategic metadata rows; want 3", i, n)
		}
		wantRetries := int64(10) // the default_max_retries setting
		if want.MaxRetries != nil {
			wantRetries = int64(*want.MaxRetries)
		}
		if n := pgtest.Count(t, pool, "SELECT max_retries FROM opsq.submissions WHERE id = $1", want.ID); n != wantRetries {
			t.Errorf("submission %d: max_retries = %d; want %d", i, n, wantRetries)
		}
	}
	// The queuer, woken by the NOTIFY, serves them.
	chunk, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 5 * time.Second, Strategy: strategy.Default})
	if err != nil || len(chunk) != 1 {
		t.Fatalf("Reserve after SubmitMany = %d chunks, %v; want 1", len(chunk), err)
	}
}

func TestSubmitManyIsAtomic(t *testing.T) {
	t.Parallel()
	_, pool := setup(t)
	err := submissions.SubmitMany(t.Context(), pool, 100, func(i int64) submissions.SmallSubmission {
		s := bulkSubmission(i)
		if i == 77 {
			s.Chunks = nil
		}
		return s
	}, nil)
	if err == nil {
		t.Fatal("SubmitMany with a submission of no chunk: want an error")
	}
	for _, table := range []string{"chunks", "submissions", "strategic_metadata"} {
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq."+table); n != 0 {
			t.Errorf("%d rows in opsq.%s after a failed SubmitMany; want 0", n, table)
		}
	}
}

func TestCancelManyCancelsAsCancel(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	const n = 2500 // three transactions
	if err := submissions.SubmitMany(ctx, pool, n, bulkSubmission, nil); err != nil {
		t.Fatal(err)
	}
	// A max_simultaneous hold on one of them, which Cancel deletes with its submission.
	first := bulkSubmission(0).ID
	if _, err := pool.Exec(ctx, "INSERT INTO opsq.simultaneous_holds (token, key, value, submission_id, chunk_index, shard, generation) "+
		"VALUES ('t', 'company_id', '0', $1, 0, 0, 1)", first); err != nil {
		t.Fatal(err)
	}
	finished := submitN(t, q, 1, NewSubmission{}) // cancelled before: left as it is
	if _, err := q.Cancel(ctx, finished); err != nil {
		t.Fatal(err)
	}
	ids := []int64{finished, 42} // and an unknown one
	for i := range int64(n) {
		ids = append(ids, bulkSubmission(i).ID)
	}
	done := 0
	cancelled, err := submissions.CancelMany(ctx, pool, ids, func(d int) { done = d })
	if err != nil {
		t.Fatal(err)
	}
	if cancelled != n || done != len(ids) {
		t.Errorf("CancelMany = %d cancelled, progress %d; want %d and %d", cancelled, done, n, len(ids))
	}
	for table, want := range map[string]int64{"chunks": 0, "submissions": 0, "simultaneous_holds": 0, "submissions_cancelled": n + 1} {
		if got := pgtest.Count(t, pool, "SELECT count(*) FROM opsq."+table); got != want {
			t.Errorf("%d rows in opsq.%s after CancelMany; want %d", got, table, want)
		}
	}
	st, err := q.Status(ctx, first)
	if err != nil || st.State != opsqtype.StateCancelled || st.FinishedAt == nil {
		t.Errorf("status of a submission after CancelMany = %+v, %v; want cancelled with finished_at", st, err)
	}
}
