package queuer

import (
	"errors"
	"testing"
	"time"

	"opsq/queuer/panics"
	"opsq/strategy"
)

// TestPanicInAStrategyFailsOnlyItsReserve: a panic in a strategy's walk, which runs on a
// shared run's goroutine (queuer/internal/handout/shared.go), answers that reserve with an error
// (the API's 500), not a crashed process; the instance serves the next reserve. The panic
// is injected with a tree no parser would give (a max_simultaneous without its subtree:
// the walk dereferences it).
func TestPanicInAStrategyFailsOnlyItsReserve(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 1, NewSubmission{})
	broken := strategy.Node{Kind: strategy.MaxSimultaneous, Key: "k", Max: 1}
	_, err := q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Strategy: broken})
	if !errors.Is(err, panics.ErrPanic) {
		t.Fatalf("reserve with a strategy that panics: %v; want an error that is panics.ErrPanic", err)
	}
	got := reserveN(t, q, ReserveRequest{Max: 1})
	if len(got) != 1 || got[0].SubmissionID != id {
		t.Fatalf("reserve after the panic: %+v; want the chunk of %d", got, id)
	}
}
