package admin

import (
	"context"
	"fmt"

	opsqsql "opsq/sql"
)

// Child is a submission sent after another, with its state.
type Child struct {
	ID    int64
	State string
}

// Children returns the first limit children of submission id by id, and how many it has,
// counted up to countMax.
func (a *Admin) Children(ctx context.Context, id int64, limit, countMax int) ([]Child, int64, error) {
	rows, err := opsqsql.New(a.pool).DashboardChildren(ctx, opsqsql.DashboardChildrenParams{Parent: id, Limit: limit, CountMax: countMax})
	if err != nil {
		return nil, 0, fmt.Errorf("reading the children of %d: %w", id, err)
	}
	out := make([]Child, len(rows))
	var total int64
	for i, r := range rows {
		out[i], total = Child{ID: r.ID, State: r.State}, r.Total
	}
	return out, total, nil
}
