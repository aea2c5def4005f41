package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	opsqsql "opsq/sql"
)

// NodeReuseAfter is how long an instance must have been silent before its node id may be
// given to another instance. An instance stops minting ids once its own last successful
// heartbeat is older than half of it (see Registration.NodeValid), so that a paused
// instance that wakes up never mints an id with a node id already handed on.
const NodeReuseAfter = time.Minute

// ErrForgotten means the instance's row is gone: it was silent for NodeReuseAfter (or an
// operator deleted it). Register again.
var ErrForgotten = errors.New("instance was forgotten by the cluster")

// Instance describes this process in opsq.instances.
type Instance struct {
	ID           string
	AdvertiseURL string
	Version      string
}

// Register adds the instance to opsq.instances under the lowest free node id (0–1023), the
// generator id of its snowflake ids, and returns that node id. Concurrent registrations
// are serialized by the unique node_id constraint and retried.
func Register(ctx context.Context, pool *pgxpool.Pool, in Instance) (int, error) {
	var node int
	err := retrySerializable(ctx, pool, func(q opsqsql.Queries) error {
		db := q
		if err := db.InstanceForgetStale(ctx, opsqsql.InstanceForgetStaleParams{Stale: NodeReuseAfter.String()}); err != nil {
			return err
		}
		var err error
		node, err = db.InstanceRegister(ctx, opsqsql.InstanceRegisterParams{ID: in.ID, AdvertiseURL: in.AdvertiseURL, Version: in.Version})
		if errors.Is(err, opsqsql.ErrNotFound) {
			return errors.New("all 1024 node ids are held by live instances")
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("registering instance %s: %w", in.ID, err)
	}
	return node, nil
}

// Heartbeat marks the instance alive and reports whether an operator asked it to drain.
// It returns ErrForgotten when the instance's row is gone.
func Heartbeat(ctx context.Context, db Querier, id string, node int) (draining bool, err error) {
	draining, err = opsqsql.New(db).InstanceHeartbeat(ctx, opsqsql.InstanceHeartbeatParams{ID: id, NodeID: node})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return false, ErrForgotten
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat of instance %s: %w", id, err)
	}
	return draining, nil
}

// Deregister removes the instance's row, freeing its node id at once.
func Deregister(ctx context.Context, db Querier, id string) error {
	if err := opsqsql.New(db).InstanceDeregister(ctx, opsqsql.InstanceDeregisterParams{ID: id}); err != nil {
		return fmt.Errorf("deregistering instance %s: %w", id, err)
	}
	return nil
}
