package sql

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// What the dashboard shows of the work being done (migrations/00008_activity.sql).

//go:embed activity_add.sql
var activityAdd string

// ActivityAddParams are activity_add.sql's.
type ActivityAddParams struct {
	Completed, Failed int64
}

// ActivityAdd adds an instance's counts to the current minute.
func (q Queries) ActivityAdd(ctx context.Context, p ActivityAddParams) error {
	_, err := q.db.Exec(ctx, activityAdd, pgx.NamedArgs{"completed": p.Completed, "failed": p.Failed})
	return err
}

//go:embed activity_minutes.sql
var activityMinutes string

// ActivityMinutesRow is one minute of the last 24 h.
type ActivityMinutesRow struct {
	Minute    time.Time `db:"minute"`
	Completed int64     `db:"completed"`
	Failed    int64     `db:"failed"`
	Now       time.Time `db:"now"`
}

// ActivityMinutes reads the minutes of the last 24 h that counted anything, oldest first.
func (q Queries) ActivityMinutes(ctx context.Context) ([]ActivityMinutesRow, error) {
	return collect[ActivityMinutesRow](ctx, q.db, activityMinutes, nil)
}

//go:embed consumer_activity_write.sql
var consumerActivityWrite string

// ConsumerActivityWriteParams are consumer_activity_write.sql's.
type ConsumerActivityWriteParams struct {
	Instance   string
	Consumers  json.RawMessage // a JSON array
	ValueRates json.RawMessage // a JSON array
}

// ConsumerActivityWrite replaces an instance's summary of its consumers and of its top
// values' rates.
func (q Queries) ConsumerActivityWrite(ctx context.Context, p ConsumerActivityWriteParams) error {
	_, err := q.db.Exec(ctx, consumerActivityWrite, pgx.NamedArgs{
		"instance": p.Instance, "consumers": string(p.Consumers), "value_rates": string(p.ValueRates),
	})
	return err
}

//go:embed consumer_activity.sql
var consumerActivity string

// ConsumerActivityParams are consumer_activity.sql's.
type ConsumerActivityParams struct {
	Fresh time.Duration // summaries older than this are left out
}

// ConsumerActivityRow is one instance's summary of its consumers.
type ConsumerActivityRow struct {
	Instance  string          `db:"instance"`
	Consumers json.RawMessage `db:"consumers"`
	WrittenAt time.Time       `db:"written_at"`
	Now       time.Time       `db:"now"`
}

// ConsumerActivity reads the fresh summaries of every instance.
func (q Queries) ConsumerActivity(ctx context.Context, p ConsumerActivityParams) ([]ConsumerActivityRow, error) {
	return collect[ConsumerActivityRow](ctx, q.db, consumerActivity, pgx.NamedArgs{"fresh": p.Fresh.String()})
}

//go:embed value_rates.sql
var valueRates string

// ValueRatesParams are value_rates.sql's.
type ValueRatesParams struct {
	Fresh time.Duration // summaries older than this are left out
}

// ValueRatesRow is one instance's top values' rates.
type ValueRatesRow struct {
	Instance   string          `db:"instance"`
	ValueRates json.RawMessage `db:"value_rates"`
}

// ValueRates reads the fresh top values' rates of every instance.
func (q Queries) ValueRates(ctx context.Context, p ValueRatesParams) ([]ValueRatesRow, error) {
	return collect[ValueRatesRow](ctx, q.db, valueRates, pgx.NamedArgs{"fresh": p.Fresh.String()})
}
