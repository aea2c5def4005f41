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
// ForMicros from the database's now, in each of Tenants ("": every tenant), by the API key
// named SetBy ("" without keys).
type ThrottleSetParams struct {
	Key       string
	Value     string
	Tenants   []string
	ForMicros int64
	SetBy     string
}

// ThrottleSet sets a throttle and returns when it ends (the earliest end of its rows).
func (q Queries) ThrottleSet(ctx context.Context, p ThrottleSetParams) (time.Time, error) {
	var until time.Time
	err := q.db.QueryRow(ctx, throttleSet, pgx.NamedArgs{
		"key": p.Key, "value": p.Value, "tenants": p.Tenants, "for_us": p.ForMicros, "set_by": p.SetBy,
	}).Scan(&until)
	return until, err
}

//go:embed throttle_lock.sql
var throttleLock string

// ThrottleLock takes the transaction's advisory locks, in the order of locks (sorted by the
// caller): those of the bounds a throttle is counted against.
func (q Queries) ThrottleLock(ctx context.Context, locks []int64) error {
	_, err := q.db.Exec(ctx, throttleLock, pgx.NamedArgs{"locks": locks})
	return err
}

//go:embed throttle_bounds.sql
var throttleBounds string

// ThrottleBoundsParams are throttle_bounds.sql's: a throttle of Key = Value (JSON) about
// to be set in each of Tenants by the API key SetBy.
type ThrottleBoundsParams struct {
	Key     string
	Value   string
	Tenants []string
	SetBy   string
}

// ThrottleBoundsRow is one bound's count: Scope "tenant" (Name the tenant, "" for the
// throttles of every tenant) or "key" (Name the API key); N the throttles in force there
// other than the one about to be set, FirstEndMicros how long until the first of them
// ends.
type ThrottleBoundsRow struct {
	Scope          string `db:"scope"`
	Name           string `db:"name"`
	N              int64  `db:"n"`
	FirstEndMicros int64  `db:"first_end_us"`
}

// ThrottleBounds counts the throttles in force that a new one is counted against.
func (q Queries) ThrottleBounds(ctx context.Context, p ThrottleBoundsParams) ([]ThrottleBoundsRow, error) {
	return collect[ThrottleBoundsRow](ctx, q.db, throttleBounds, pgx.NamedArgs{
		"key": p.Key, "value": p.Value, "tenants": p.Tenants, "set_by": p.SetBy,
	})
}

//go:embed throttle_lift.sql
var throttleLift string

// ThrottleLiftParams are throttle_lift.sql's: the throttles of Key = Value (JSON) in every
// tenant when Every, else in each of Tenants ("": the throttle of every tenant).
type ThrottleLiftParams struct {
	Key     string
	Value   string
	Tenants []string
	Every   bool
}

// ThrottleLift deletes throttles and returns how many of them were in force.
func (q Queries) ThrottleLift(ctx context.Context, p ThrottleLiftParams) (int64, error) {
	var n int64
	tenants := p.Tenants
	if tenants == nil {
		tenants = []string{}
	}
	err := q.db.QueryRow(ctx, throttleLift, pgx.NamedArgs{
		"key": p.Key, "value": p.Value, "tenants": tenants, "every": p.Every,
	}).Scan(&n)
	return n, err
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

// ThrottlesLoadRow is a throttle in force: Value is its JSON text, Tenant "" for every
// tenant, SetBy the API key that set it ("" without keys) at SetAt, LeftMicros how long it
// has left by the database's clock.
type ThrottlesLoadRow struct {
	Key        string    `db:"key"`
	Value      string    `db:"value"`
	Tenant     string    `db:"tenant"`
	Until      time.Time `db:"until"`
	SetBy      string    `db:"set_by"`
	SetAt      time.Time `db:"set_at"`
	LeftMicros int64     `db:"left_us"`
}

// ThrottlesLoad reads every throttle in force, those that end last first.
func (q Queries) ThrottlesLoad(ctx context.Context) ([]ThrottlesLoadRow, error) {
	return collect[ThrottlesLoadRow](ctx, q.db, throttlesLoad, nil)
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
