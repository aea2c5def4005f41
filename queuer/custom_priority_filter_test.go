package queuer

import (
	"math"
	"testing"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
)

// TestCustomPriorityCandidateFilter: custom_priority's candidate query with a strategic
// metadata filter (on s.id, inside the Citus form's CTE) returns only the chunks of the
// submission it selects, though another of higher priority comes first unfiltered.
func TestCustomPriorityCandidateFilter(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	want := submitN(t, q, 3, NewSubmission{Priority: 1, StrategicMetadata: []byte(`{"mode": "x"}`)})
	submitN(t, q, 3, NewSubmission{Priority: 5, StrategicMetadata: []byte(`{"mode": "y"}`)})
	var shards []int
	if err := pool.QueryRow(ctx, "SELECT array_agg(DISTINCT shard ORDER BY shard) FROM opsq.chunks").Scan(&shards); err != nil {
		t.Fatal(err)
	}
	args := pgx.NamedArgs{"limit": 64, "after_priority": int64(math.MinInt64), "after_submission": int64(0), "after_chunk": int32(-1), "k": "mode", "v": `"x"`}
	var names []string
	for i, s := range shards {
		n := "s" + string(rune('a'+i))
		names = append(names, n)
		args[n] = s
	}
	query := opsqsql.CandidateQuery(opsqsql.CandidatesCustomPriority, names, []opsqsql.CandidateFilter{{KeyArg: "k", ValueArg: "v"}})
	n := 0
	if err := opsqsql.New(pool).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(c opsqsql.CandidatesStreamRow) error {
		n++
		if c.SubmissionID != want {
			t.Errorf("got a chunk of submission %d; want only %d's", c.SubmissionID, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d candidates; want the 3 chunks of submission %d", n, want)
	}
}
