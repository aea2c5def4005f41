package sql

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed throttle_set.sql
var throttleSet string

// ThrottleSetParams are throttle_set.sql's: Key = Value (canonical JSON) throttled for
// ForMicros from the database's now, in each of Tenants ("": every tenant).
type ThrottleSetParams struct {
	Key       string
	Value     string
	Tenants   []string
	ForMicros int64
}

// ThrottleSet sets a throttle and returns when it ends (the earliest end of its rows).
func (q Queries) ThrottleSet(ctx context.Context, p ThrottleSetParams) (time.Time, error) {
	var until time.Time
	err := q.db.QueryRow(ctx, throttleSet, pgx.NamedArgs{
		"key": p.Key, "value": p.Value, "tenants": p.Tenants, "for_us": p.ForMicros,
	}).Scan(&until)
	return until, err
}

//go:embed throttles_load.sql
var throttlesLoad string

// ThrottlesLoadParams are throttles_load.sql's.
type ThrottlesLoadParams struct {
	Limit int
}

// ThrottlesLoadRow is a throttle in force: Value is its JSON text, Tenant "" for every
// tenant, LeftMicros how long it has left by the database's clock.
type ThrottlesLoadRow struct {
	Key        string    `db:"key"`
	Value      string    `db:"value"`
	Tenant     string    `db:"tenant"`
	Until      time.Time `db:"until"`
	LeftMicros int64     `db:"left_us"`
}

// ThrottlesLoad reads the throttles in force, those that end last first, up to Limit.
func (q Queries) ThrottlesLoad(ctx context.Context, p ThrottlesLoadParams) ([]ThrottlesLoadRow, error) {
	return collect[ThrottlesLoadRow](ctx, q.db, throttlesLoad, pgx.NamedArgs{"limit": p.Limit})
}

//go:embed throttles_collect.sql
var throttlesCollect string

// ThrottlesCollect deletes the throttles that ended. It has no parameters.
func (q Queries) ThrottlesCollect(ctx context.Context) error {
	_, err := q.db.Exec(ctx, throttlesCollect)
	return err
}
