package sql

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
)

// The statements of opsq.instances and opsq.settings (package claims).

//go:embed instance_forget_stale.sql
var instanceForgetStale string

// InstanceForgetStaleParams are instance_forget_stale.sql's.
type InstanceForgetStaleParams struct {
	Stale string // an interval: instances silent longer are forgotten
}

// InstanceForgetStale deletes the instances silent for longer than p.Stale.
func (q Queries) InstanceForgetStale(ctx context.Context, p InstanceForgetStaleParams) error {
	_, err := q.db.Exec(ctx, instanceForgetStale, pgx.NamedArgs{"stale": p.Stale})
	return err
}

//go:embed instance_register.sql
var instanceRegister string

// InstanceRegisterParams are instance_register.sql's.
type InstanceRegisterParams struct {
	ID           string
	AdvertiseURL string
	Version      string
}

// InstanceRegister adds the instance under the lowest free node id and returns it;
// ErrNotFound when every node id is taken.
func (q Queries) InstanceRegister(ctx context.Context, p InstanceRegisterParams) (int, error) {
	var node int
	err := q.db.QueryRow(ctx, instanceRegister, pgx.NamedArgs{"id": p.ID, "advertise_url": p.AdvertiseURL, "version": p.Version}).Scan(&node)
	return node, notFound(err)
}

//go:embed instance_heartbeat.sql
var instanceHeartbeat string

// InstanceHeartbeatParams are instance_heartbeat.sql's.
type InstanceHeartbeatParams struct {
	ID     string
	NodeID int
}

// InstanceHeartbeat marks the instance alive and reports whether it is asked to drain;
// ErrNotFound when its row (under that node id) is gone.
func (q Queries) InstanceHeartbeat(ctx context.Context, p InstanceHeartbeatParams) (draining bool, err error) {
	err = q.db.QueryRow(ctx, instanceHeartbeat, pgx.NamedArgs{"id": p.ID, "node_id": p.NodeID}).Scan(&draining)
	return draining, notFound(err)
}

//go:embed instance_deregister.sql
var instanceDeregister string

// InstanceDeregisterParams are instance_deregister.sql's.
type InstanceDeregisterParams struct {
	ID string
}

// InstanceDeregister deletes the instance's row.
func (q Queries) InstanceDeregister(ctx context.Context, p InstanceDeregisterParams) error {
	_, err := q.db.Exec(ctx, instanceDeregister, pgx.NamedArgs{"id": p.ID})
	return err
}

//go:embed settings_load.sql
var settingsLoad string

// SettingsLoadRow is one of opsq.settings.
type SettingsLoadRow struct {
	Key   string `db:"key"`
	Value string `db:"value"`
}

// SettingsLoad reads opsq.settings. It has no parameters.
func (q Queries) SettingsLoad(ctx context.Context) ([]SettingsLoadRow, error) {
	return collect[SettingsLoadRow](ctx, q.db, settingsLoad, nil)
}
