package queuer

import (
	"context"

	"opsq/queuer/internal/admin"
)

// Child is a submission sent after another (its parent), with its state.
type Child = admin.Child

// Children returns the first limit children of submission id (those sent after it), by id,
// with their states, and how many it has, counted up to countMax (the dashboard's
// submission page).
func (q *Queuer) Children(ctx context.Context, id int64, limit, countMax int) ([]Child, int64, error) {
	return q.admin.Children(ctx, id, limit, countMax)
}
