package handout

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
)

// streamBreakers are the plan nodes that read or hold a whole range of the backlog before
// the first row, instead of streaming the leaf's order from the chunks' indexes, and
// the parallel plans that gather them.
var streamBreakers = []string{"Sort", "Incremental Sort", "Hash", "Hash Join", "Materialize", "HashAggregate",
	"Bitmap Heap Scan", "Seq Scan", "Gather", "Gather Merge"}

// TestCandidatePlansStreamAtAnyBacklog: the cached generic plans of the candidate queries,
// made on the queuer's own candidate connections, stream through the indexes even when the
// statistics say the backlog is 100 000 000 chunks. At that size the random query's generic
// plan over 8 shards became a Sort of a parallel bitmap scan (1.7–9 s an execution, a
// reserve timed out: issue 10's second cliff). Loading 10⁸ chunks is too slow for a test,
// so the test loads 128 000 and tells the planner there are 1 000 times more (the chunk
// table's and its indexes' reltuples, which the planner scales by the pages it finds); a
// plain connection making the same generic plans shows the statistics do change them.
func TestCandidatePlansStreamAtAnyBacklog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := startEngine(t, pool)
	chunks := make([][]byte, 2000)
	for i := range chunks {
		chunks[i] = []byte("x")
	}
	// 64 submissions of 2 000 chunks; one in ten has mode "preview", company_id is 0–7.
	at := func(i int64) submissions.SmallSubmission {
		mode := "full"
		if i%10 == 0 {
			mode = "preview"
		}
		meta, _ := json.Marshal(map[string]any{"company_id": i % 8, "mode": mode})
		return submissions.SmallSubmission{ID: i + 1, StrategicMetadata: meta, Chunks: chunks}
	}
	if err := submissions.SubmitMany(ctx, pool, 64, at, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE opsq.chunks; ANALYZE opsq.submissions; ANALYZE opsq.strategic_metadata"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE pg_class SET reltuples = reltuples * 1000
		WHERE relnamespace = 'opsq'::regnamespace AND relname IN ('chunks', 'chunks_pkey', 'chunks_random_order', 'chunks_shard_submission')`); err != nil {
		t.Fatalf("scaling the chunk table's statistics (the test needs a superuser): %v", err)
	}

	plain, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	if _, err := plain.Exec(ctx, "SET plan_cache_mode = force_generic_plan; SET jit = off"); err != nil {
		t.Fatal(err)
	}
	conn, err := q.path.scans.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	plainBroke := 0
	for _, s := range candidateScans() {
		if len(pgtest.PlanNodes(t, pgtest.ExplainExecute(t, plain, "FORMAT JSON", s.query, s.args), streamBreakers)) > 0 {
			plainBroke++
		}
		if got := pgtest.PlanNodes(t, pgtest.ExplainExecute(t, conn.Conn(), "FORMAT JSON", s.query, s.args), streamBreakers); len(got) > 0 {
			t.Errorf("%s: the candidate connection's generic plan at 10⁸ chunks has %v; want a stream of index scans\n%s",
				s.name, got, pgtest.ExplainExecute(t, conn.Conn(), "COSTS OFF", s.query, s.args))
		}
	}
	if plainBroke == 0 {
		t.Fatal("no generic plan of a plain connection sorts or scans whole ranges at 10⁸ chunks: the scaled statistics show nothing, so the test cannot fail")
	}
	t.Logf("%d of %d generic plans of a plain connection sort or scan whole ranges at 10⁸ chunks", plainBroke, len(candidateScans()))
}
