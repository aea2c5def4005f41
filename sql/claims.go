package sql

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

// Claims (package claims): renewal, balancing, acquisition and release of shards, and the
// cluster view of GET /v1/cluster.

//go:embed claims_timeouts.sql
var claimsTimeouts string

// ClaimsTimeoutsParams are claims_timeouts.sql's: the settings' values ("1s").
type ClaimsTimeoutsParams struct {
	LockTimeout                     string
	IdleInTransactionSessionTimeout string
}

// ClaimsTimeouts sets lock_timeout and idle_in_transaction_session_timeout for the rest of
// db's transaction.
func (q Queries) ClaimsTimeouts(ctx context.Context, p ClaimsTimeoutsParams) error {
	_, err := q.db.Exec(ctx, claimsTimeouts, pgx.NamedArgs{
		"lock_timeout": p.LockTimeout, "idle_in_transaction_session_timeout": p.IdleInTransactionSessionTimeout,
	})
	return err
}

//go:embed transaction_settings.sql
var transactionSettings string

// TransactionSettingsRow is transaction_settings.sql's row.
type TransactionSettingsRow struct {
	Isolation                       string
	LockTimeout                     string
	IdleInTransactionSessionTimeout string
}

// TransactionSettings reads the isolation and the timeouts of db's transaction.
func (q Queries) TransactionSettings(ctx context.Context) (TransactionSettingsRow, error) {
	rows, err := q.db.Query(ctx, transactionSettings)
	if err != nil {
		return TransactionSettingsRow{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[TransactionSettingsRow])
}

//go:embed claims_release_disabled.sql
var claimsReleaseDisabled string

//go:embed claims_drain_instance.sql
var claimsDrainInstance string

// ClaimsInstanceParams name the instance of the claims statements that take only it:
// claims_drain_instance.sql and claims_release_disabled.sql.
type ClaimsInstanceParams struct {
	Instance string
}

// ClaimsDrainInstance marks the instance draining, as an operator would.
func (q Queries) ClaimsDrainInstance(ctx context.Context, p ClaimsInstanceParams) error {
	_, err := q.db.Exec(ctx, claimsDrainInstance, pgx.NamedArgs{"instance": p.Instance})
	return err
}

// ClaimsReleaseDisabled releases the disabled shards the instance holds.
func (q Queries) ClaimsReleaseDisabled(ctx context.Context, p ClaimsInstanceParams) error {
	_, err := q.db.Exec(ctx, claimsReleaseDisabled, pgx.NamedArgs{"instance": p.Instance})
	return err
}

//go:embed claims_renew.sql
var claimsRenew string

// ClaimsRenewParams are claims_renew.sql's: the instance, the expiries, and per shard
// held (the same index in each slice) its generation, the owner's count of live
// reservations, whether it knows of reservable chunks there, and whether it drains it.
type ClaimsRenewParams struct {
	Instance    string
	SoftExpiry  time.Duration
	HardExpiry  time.Duration
	Shards      []int32
	Generations []int64
	Inflight    []int32
	Available   []bool
	Draining    []bool
}

// ClaimsRenew renews the shards held, fenced by their generations, and returns those it
// renewed: the others are lost.
func (q Queries) ClaimsRenew(ctx context.Context, p ClaimsRenewParams) ([]int, error) {
	return collectInts(ctx, q.db, claimsRenew, pgx.NamedArgs{
		"instance": p.Instance, "soft_expiry": p.SoftExpiry, "hard_expiry": p.HardExpiry,
		"shards": p.Shards, "generations": p.Generations, "inflight": p.Inflight,
		"available": p.Available, "draining": p.Draining,
	})
}

//go:embed claims_balance.sql
var claimsBalance string

// ClaimsBalanceParams are claims_balance.sql's.
type ClaimsBalanceParams struct {
	HeartbeatTimeout time.Duration // instances silent longer are not live
}

// ClaimsBalanceRow is what balancing needs: the live instances that do not drain, and the
// enabled shards.
type ClaimsBalanceRow struct {
	LiveInstances int `db:"live_instances"`
	EnabledShards int `db:"enabled_shards"`
}

// ClaimsBalance reads what balancing needs.
func (q Queries) ClaimsBalance(ctx context.Context, p ClaimsBalanceParams) (ClaimsBalanceRow, error) {
	return collectOne[ClaimsBalanceRow](ctx, q.db, claimsBalance, pgx.NamedArgs{"heartbeat_timeout": p.HeartbeatTimeout})
}

//go:embed claims_acquire.sql
var claimsAcquire string

// ClaimsAcquireParams are claims_acquire.sql's.
type ClaimsAcquireParams struct {
	Instance   string
	Want       int     // shards taken at most
	Held       []int32 // shards the instance holds already, or must not take now
	Prefer     []int32 // shards taken first when free (nil: none)
	SoftExpiry time.Duration
	HardExpiry time.Duration
}

// ClaimsAcquireRow is a shard acquired, under its new generation.
type ClaimsAcquireRow struct {
	Shard      int   `db:"shard"`
	Generation int64 `db:"generation"`
}

// ClaimsAcquire takes up to p.Want free or expired shards.
func (q Queries) ClaimsAcquire(ctx context.Context, p ClaimsAcquireParams) ([]ClaimsAcquireRow, error) {
	return collect[ClaimsAcquireRow](ctx, q.db, claimsAcquire, pgx.NamedArgs{
		"instance": p.Instance, "want": p.Want, "held": p.Held, "prefer": p.Prefer, "soft_expiry": p.SoftExpiry, "hard_expiry": p.HardExpiry,
	})
}

//go:embed claims_placements.sql
var claimsPlacements string

// ClaimsPlacementRow is where the chunks of one of opsq's shards live on Citus.
type ClaimsPlacementRow struct {
	Shard int    `db:"shard"`
	Node  string `db:"node"` // pg_dist_node's nodename:nodeport
	Free  bool   `db:"free"` // claims_acquire.sql may take it now
}

// ClaimsPlacements reads the node of each shard's chunks. Only on a Citus coordinator.
func (q Queries) ClaimsPlacements(ctx context.Context) ([]ClaimsPlacementRow, error) {
	return collect[ClaimsPlacementRow](ctx, q.db, claimsPlacements, nil)
}

//go:embed claims_release.sql
var claimsRelease string

// ClaimsReleaseParams are claims_release.sql's: the shards (and, at the same index, the
// generation each is held under) that the instance gives back.
type ClaimsReleaseParams struct {
	Instance    string
	Shards      []int32
	Generations []int64
}

// ClaimsRelease releases the shards, fenced by their generations, and returns those it
// released: the others were no longer held.
func (q Queries) ClaimsRelease(ctx context.Context, p ClaimsReleaseParams) ([]int, error) {
	return collectInts(ctx, q.db, claimsRelease, pgx.NamedArgs{"instance": p.Instance, "shards": p.Shards, "generations": p.Generations})
}

//go:embed claims_publish.sql
var claimsPublish string

// ClaimsPublishParams are claims_publish.sql's: per shard (the same index in each slice)
// the generation it is held under and its count of live reservations.
type ClaimsPublishParams struct {
	Instance    string
	Shards      []int32
	Generations []int64
	Inflight    []int32
}

// ClaimsPublish publishes the counts, fenced by the generations, and returns the shards
// it wrote.
func (q Queries) ClaimsPublish(ctx context.Context, p ClaimsPublishParams) ([]int, error) {
	return collectInts(ctx, q.db, claimsPublish, pgx.NamedArgs{
		"instance": p.Instance, "shards": p.Shards, "generations": p.Generations, "inflight": p.Inflight,
	})
}

//go:embed claims_cluster.sql
var claimsCluster string

// ClaimsClusterRow is a row of claims_cluster.sql: an instance with one of its shards, an
// instance without shards (Shard nil), or a shard without an instance (Instance nil).
type ClaimsClusterRow struct {
	ShardCount       int        `db:"shard_count"`
	Instance         *string    `db:"instance"`
	AdvertiseURL     string     `db:"advertise_url"`
	StartedAt        *time.Time `db:"started_at"`
	HeartbeatAt      *time.Time `db:"heartbeat_at"`
	InstanceDraining bool       `db:"instance_draining"`
	Live             bool       `db:"live"`
	Shard            *int       `db:"shard"`
	Generation       *int64     `db:"generation"`
	Draining         *bool      `db:"draining"`
	Inflight         *int       `db:"inflight"`
	Available        *bool      `db:"available"`
	SoftExpiresAt    *time.Time `db:"soft_expires_at"`
	HardExpiresAt    *time.Time `db:"hard_expires_at"`
	Disabled         *bool      `db:"disabled"`
}

// ClaimsCluster reads the instances and the claims table in one statement, so that they
// agree; ordered by instance (those without one last), then shard. It has no parameters.
func (q Queries) ClaimsCluster(ctx context.Context) ([]ClaimsClusterRow, error) {
	return collect[ClaimsClusterRow](ctx, q.db, claimsCluster, nil)
}

// collectInts runs query and returns its one int column.
func collectInts(ctx context.Context, db DB, query string, args pgx.NamedArgs) ([]int, error) {
	rows, err := db.Query(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
