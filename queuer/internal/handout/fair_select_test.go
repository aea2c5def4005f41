package handout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestWeightedFairOverSelectOnlyIgnoresOtherBacklog (issue 31, finding 8): a weighted_fair
// whose then is a select_only reads, for a value's turn, that value's few submissions, not
// the backlog of other values under the select_only's filter: a reserve costs about what it
// costs without the unrelated backlog. 100 values × 2 chunks, beside 200 000 chunks of
// another value that pass the select_only: each reserve takes 10 chunks in well under the
// time a scan of the backlog would take (before: about 1 s each on a 2-core machine).
func TestWeightedFairOverSelectOnlyIgnoresOtherBacklog(t *testing.T) {
	t.Parallel()
	const values, backlog = 100, 200_000
	pool := pgtest.NewPool(t)
	e := startEngine(t, pool)
	ctx := t.Context()
	big := make([][]byte, backlog)
	for i := range big {
		big[i] = []byte("x")
	}
	// The backlog first (oldest), then the values'.
	if err := submissions.SubmitMany(ctx, pool, 1, func(int64) submissions.SmallSubmission {
		return submissions.SmallSubmission{ID: 1 << 40, StrategicMetadata: []byte(`{"customer": "big", "mode": "x"}`), Chunks: big}
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := submissions.SubmitMany(ctx, pool, values, func(i int64) submissions.SmallSubmission {
		return submissions.SmallSubmission{ID: 1<<40 + 1 + i, StrategicMetadata: fmt.Appendf(nil, `{"customer": "c%03d", "mode": "x"}`, i), Chunks: big[:2]}
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE opsq.chunks; ANALYZE opsq.submissions; ANALYZE opsq.strategic_metadata"); err != nil {
		t.Fatal(err)
	}
	weights := ""
	for i := range values {
		weights += fmt.Sprintf("c%03d: 1, ", i)
	}
	tree, err := strategy.ParseText(fmt.Sprintf("weighted_fair(customer, {%sbig: 1}, 1, select_only(mode=x, oldest_first))", weights))
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	seen := map[int64]int{}
	for range 5 {
		start := time.Now()
		got, err := e.path.Reserve(ctx, Request{Max: 10, Strategy: tree, Lease: time.Hour})
		took = append(took, time.Since(start))
		if err != nil || len(got) != 10 {
			t.Fatalf("reserve: %d chunks, %v; want 10", len(got), err)
		}
		for _, c := range got {
			seen[c.SubmissionID]++
		}
	}
	slices.Sort(took)
	t.Logf("5 reserves of 10: p50 %s, max %s; %d submissions served", took[2].Round(time.Millisecond), took[4].Round(time.Millisecond), len(seen))
	// The fastest of the five, not their median: a busy machine slows some reserves, while
	// a turn that reads the backlog makes every one slow (about 1 s each before the fix).
	// TODO(issue 29): judge this by the rows the turn reads, not by time.
	if took[0] > 250*time.Millisecond {
		t.Errorf("the fastest reserve took %s; want well under 250ms: a value's turn reads its own submissions, not the %d chunks of another value", took[0].Round(time.Millisecond), backlog)
	}
	if n := seen[1<<40]; n > 5 {
		t.Errorf("the backlog's value got %d of 50 chunks; want its share, about 1 in %d", n, values+1)
	}
}
