package queuer

import (
	"context"
	"time"

	"opsq/queuer/opsqtype"
)

// The consumers' verbs after a reserve (DESIGN.md §3, Consumer), each the outcome part's.

// Complete records completions: the first completion of a chunk wins, repeats are
// harmless.
func (q *Queuer) Complete(ctx context.Context, items []Completion) ([]opsqtype.TokenStatus, error) {
	return q.outcomes.Complete(ctx, items)
}

// Fail records failed attempts, wherever their reservations are held.
func (q *Queuer) Fail(ctx context.Context, items []Failure) ([]opsqtype.TokenStatus, error) {
	return q.outcomes.Fail(ctx, items)
}

// Extend moves the leases of tokens to now + lease.
func (q *Queuer) Extend(ctx context.Context, tokens []string, lease time.Duration, forwarded bool) ([]Extended, error) {
	return q.outcomes.Extend(ctx, tokens, lease, forwarded)
}
