package handout

import (
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/strategy"
)

// TestSharedRunDealsInOrder: one run for three requests fills them in order, each up to its
// Max, and one whose MaxBytes is reached passes the next chunk to the next request.
func TestSharedRunDealsInOrder(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 20, submissions.NewSubmission{})
	// Each of the first chunks holds 7 bytes of input ("chunk-3") and a few of strategic
	// metadata ("{}") besides answerChunkOverhead: two fit, three do not.
	asks := []Request{
		{Max: 3, Lease: time.Minute, Strategy: strategy.Node{Kind: strategy.OldestFirst}, Consumer: "a"},
		{Max: 5, Lease: time.Minute, Strategy: strategy.Node{Kind: strategy.OldestFirst}, Consumer: "b", MaxBytes: 2*answerChunkOverhead + 100},
		{Max: 4, Lease: time.Minute, Strategy: strategy.Node{Kind: strategy.OldestFirst}, Consumer: "c"},
	}
	out, err := q.path.reserveFor(t.Context(), asks)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{3, 2, 4}
	next := int32(0)
	for i, chunks := range out {
		if len(chunks) != want[i] {
			t.Fatalf("request %d got %d chunks; want %d", i, len(chunks), want[i])
		}
		for _, c := range chunks {
			if c.ChunkIndex != next {
				t.Errorf("request %d got chunk %d; want %d (oldest first, dealt in order)", i, c.ChunkIndex, next)
			}
			next++
			if r, ok := q.reserver.Get(c.Token); !ok || r.Consumer != asks[i].Consumer {
				t.Errorf("chunk %d is reserved for %q; want %q", c.ChunkIndex, r.Consumer, asks[i].Consumer)
			}
		}
	}
}
