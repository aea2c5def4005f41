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

//go:embed throttle_owners.sql
var throttleOwners string

// ThrottleOwners lists the instances holding a live claim on a shard, but instance: those
// that may hand out chunks, which a throttle's setter waits for.
func (q Queries) ThrottleOwners(ctx context.Context, instance string) ([]string, error) {
	rows, err := q.db.Query(ctx, throttleOwners, pgx.NamedArgs{"instance": instance})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
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

//go:embed rate_take.sql
var rateTake string

// RateTakeParams are rate_take.sql's: up to Want tokens of the bucket of Key = Value
// (JSON) at PerSecond with Capacity, after giving back Returned tokens leased and unused.
type RateTakeParams struct {
	Key       string
	Value     string
	PerSecond float64
	Capacity  int
	Want      int
	Returned  int
}

// RateTake leases tokens of a rate_limit bucket and returns how many it got.
func (q Queries) RateTake(ctx context.Context, p RateTakeParams) (int, error) {
	var got int
	err := q.db.QueryRow(ctx, rateTake, pgx.NamedArgs{
		"key": p.Key, "value": p.Value, "per_second": p.PerSecond, "capacity": p.Capacity,
		"want": p.Want, "returned": p.Returned,
	}).Scan(&got)
	return got, err
}

//go:embed rate_collect.sql
var rateCollect string

// RateCollect deletes the rate buckets that are full again. It has no parameters.
func (q Queries) RateCollect(ctx context.Context) error {
	_, err := q.db.Exec(ctx, rateCollect)
	return err
}

//go:embed rate_buckets_list.sql
var rateBucketsList string

// RateBucketsListParams are rate_buckets_list.sql's.
type RateBucketsListParams struct {
	Limit int
}

// RateBucketsListRow is a rate_limit bucket in use: Value is the JSON text of the key's
// value, Level the tokens it holds now out of Capacity.
type RateBucketsListRow struct {
	Key       string  `db:"key"`
	Value     string  `db:"value"`
	PerSecond float64 `db:"per_second"`
	Capacity  int     `db:"capacity"`
	Level     float64 `db:"level"`
}

// RateBucketsList reads the rate_limit buckets in use, the emptiest first, up to Limit.
func (q Queries) RateBucketsList(ctx context.Context, p RateBucketsListParams) ([]RateBucketsListRow, error) {
	return collect[RateBucketsListRow](ctx, q.db, rateBucketsList, pgx.NamedArgs{"limit": p.Limit})
}
