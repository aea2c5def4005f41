package queuertest_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// TestLoadBacklogIsWhatTheEngineReserves: a started queuer hands out every chunk of a
// loaded backlog that its strategy selects, with its input, and no other.
func TestLoadBacklogIsWhatTheEngineReserves(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	queuertest.LoadBacklog(t, pool, []queuertest.Submission{
		{ID: 1, Chunks: 40, MaxRetries: 3, StrategicMetadata: map[string]any{"mode": "preview"}, Input: []byte("p")},
		{ID: 2, Chunks: 30, MaxRetries: 3, StrategicMetadata: map[string]any{"mode": "full", "company_id": 7}, Input: []byte("f")},
		{ID: 3, Chunks: 20, MaxRetries: 3, Input: []byte("n")},
	})
	q := queuertest.Start(t, queuer.Config{Pool: pool})
	for _, tc := range []struct {
		strategy string
		sub      int64
		chunks   int
		input    string
	}{
		{"select_only(mode=preview, random)", 1, 40, "p"},
		{"select_only(company_id=7, oldest_first)", 2, 30, "f"},
		{"random", 3, 20, "n"}, // what is left
	} {
		got := map[int32]bool{}
		pgtest.WaitFor(t, 30*time.Second, tc.strategy+" reserves submission "+fmt.Sprint(tc.sub), func() string {
			chunks, err := q.Reserve(t.Context(), queuer.ReserveRequest{Max: 100, Lease: time.Hour, Wait: 100 * time.Millisecond,
				Strategy: queuertest.Strategy(t, tc.strategy)})
			if err != nil {
				t.Fatalf("Reserve(%s): %v", tc.strategy, err)
			}
			for _, c := range chunks {
				if c.SubmissionID != tc.sub || string(c.Input) != tc.input || got[c.ChunkIndex] {
					t.Fatalf("%s: chunk %d/%d with input %q (seen before: %t); want each chunk of submission %d once, input %q",
						tc.strategy, c.SubmissionID, c.ChunkIndex, c.Input, got[c.ChunkIndex], tc.sub, tc.input)
				}
				got[c.ChunkIndex] = true
			}
			if len(got) < tc.chunks {
				return fmt.Sprintf("%d of %d chunks", len(got), tc.chunks)
			}
			return ""
		})
	}
}

// TestStartNamesEachInstance: two queuers started on one database get their own names.
func TestStartNamesEachInstance(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	queuertest.Start(t, queuer.Config{Pool: pool})
	queuertest.Start(t, queuer.Config{Pool: pool})
	if n := pgtest.Count(t, pool, "SELECT count(DISTINCT id) FROM opsq.instances"); n != 2 {
		t.Errorf("%d instances registered; want 2", n)
	}
}
