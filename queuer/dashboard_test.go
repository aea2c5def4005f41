package queuer

import (
	"testing"

	"opsq/strategy"
)

// TestOverview: the dashboard's overview counts the submissions in progress and their
// chunks left, and the completions between two overviews, those of a submission that
// finished in between included.
func TestOverview(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	before, err := q.Admin().Overview(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if before.InProgress != 0 || before.ChunksLeft != 0 || before.OldestID != nil {
		t.Fatalf("empty queue: overview %+v; want nothing in progress", before)
	}
	small := submitN(t, q, 2, NewSubmission{})
	big := submitN(t, q, 50, NewSubmission{})
	o, err := q.Admin().Overview(t.Context(), &before.Now)
	if err != nil {
		t.Fatal(err)
	}
	if o.InProgress != 2 || o.ChunksLeft != 52 || o.OldestID == nil || *o.OldestID != small {
		t.Fatalf("after two submissions: overview %+v; want 2 in progress, 52 chunks left, the oldest %d", o, small)
	}
	// Oldest first: small's 2 chunks, then 3 of big; completing them finishes small.
	chunks := reserveN(t, q, ReserveRequest{Max: 5, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(chunks) != 5 {
		t.Fatalf("reserved %d chunks; want 5", len(chunks))
	}
	for _, c := range chunks {
		if _, err := q.Complete(t.Context(), []Completion{{Token: c.Token, Output: []byte("ok")}}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := q.Admin().Overview(t.Context(), &o.Now)
	if err != nil {
		t.Fatal(err)
	}
	if after.InProgress != 1 || after.ChunksLeft != 47 || after.OldestID == nil || *after.OldestID != big {
		t.Errorf("after completing 5: overview %+v; want 1 in progress, 47 chunks left, the oldest %d", after, big)
	}
	if got := after.Completed(o); got != 5 {
		t.Errorf("Completed between the two overviews = %d; want 5 (%+v, then %+v)", got, o, after)
	}
}
