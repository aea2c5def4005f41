package queuer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
)

// TestCustomPriorityCandidatePaging: custom_priority's candidate query, read in pages of
// 2 on a subset of the shards, returns the chunks of those shards in the order of one
// PostgreSQL's statement (priority high to low, then submission id, then chunk index),
// each page resuming from the last row (after_priority, after_submission, after_chunk).
// Priorities tie, there are more submissions than the page, and some submissions have no
// chunk in the shards read. On Citus it runs candidates_custom_priority_citus.sql.
func TestCustomPriorityCandidatePaging(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	priority := map[int64]int64{}
	for i, p := range []int64{2, 5, 2, 7, 5, 2, 1, 5, 7, 2, 3, 5} {
		id := submitN(t, q, 1+i%3, NewSubmission{Priority: p})
		priority[id] = p
	}
	type row struct {
		neg, sub int64
		chunk    int32
		shard    int
	}
	var all []row
	rows, _ := pool.Query(ctx, "SELECT submission_id, chunk_index, shard FROM opsq.chunks")
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&r.sub, &r.chunk, &r.shard}, func() error {
		if p, ok := priority[r.sub]; ok {
			r.neg = -p
			all = append(all, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var shards []int
	for _, r := range all {
		if !slices.Contains(shards, r.shard) {
			shards = append(shards, r.shard)
		}
	}
	slices.Sort(shards)
	if len(shards) < 3 {
		t.Fatalf("the chunks are on shards %v; want at least 3 to leave one out", shards)
	}
	read := shards[:len(shards)-len(shards)/3] // leave the last third out
	var want []row
	subs := map[int64]bool{}
	for _, r := range all {
		if slices.Contains(read, r.shard) {
			want = append(want, r)
			subs[r.sub] = true
		}
	}
	if len(subs) == len(priority) {
		t.Fatalf("every submission has chunks on shards %v; want one without", read)
	}
	slices.SortFunc(want, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.neg, b.neg), cmp.Compare(a.sub, b.sub), cmp.Compare(a.chunk, b.chunk))
	})

	names, args := customPriorityArgs(read, 2)
	query := opsqsql.CandidateQuery(opsqsql.CandidatesCustomPriority, names, nil)
	var got []row
	for page := 0; ; page++ {
		if page > len(want) {
			t.Fatalf("still reading after %d pages: %v", page, got)
		}
		n := 0
		err := opsqsql.New(pool).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(c opsqsql.CandidatesStreamRow) error {
			n++
			got = append(got, row{c.NegPriority, c.SubmissionID, c.ChunkIndex, c.Shard})
			args["after_priority"], args["after_submission"], args["after_chunk"] = c.NegPriority, c.SubmissionID, c.ChunkIndex
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 2 {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("custom_priority pages on shards %v:\n got %v\nwant %v", read, got, want)
	}
}

// TestCustomPriorityCandidateFilter: custom_priority's candidate query with a strategic
// metadata filter (on s.id; on Citus in the submissions' step) returns only the chunks of the
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
	names, args := customPriorityArgs(shards, 64)
	args["k"], args["v"] = "mode", `"x"`
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

// customPriorityArgs binds shards to arguments of their own for CandidateQuery, with the
// keyset arguments of a first page of limit rows.
func customPriorityArgs(shards []int, limit int) ([]string, pgx.NamedArgs) {
	names := make([]string, len(shards))
	args := pgx.NamedArgs{"limit": limit, "after_priority": int64(math.MinInt64), "after_submission": int64(0), "after_chunk": int32(-1)}
	for i, s := range shards {
		names[i] = fmt.Sprintf("shard%d", i)
		args[names[i]] = s
	}
	return names, args
}
