package claims

import (
	"context"
	"fmt"
	"time"

	opsqsql "opsq/sql"
)

// Cluster is who holds which shard, as the claims table and the instances table say. It
// is claims' own view, without a wire format: api turns it into wire.Cluster, the JSON of
// GET /v1/cluster (claims does not depend on the HTTP client). Lists are never nil.
type Cluster struct {
	ShardCount int
	// Instances: every registered instance, with or without shards, and every claimant no
	// longer registered (stopped or forgotten) whose claims have not been taken yet; ordered
	// by id.
	Instances []ClusterInstance
	// Unclaimed: the enabled shards nobody holds.
	Unclaimed []int
	// Disabled: the shards an operator disabled (sql/admin/disable_shard.sql).
	Disabled []int
}

// ClusterInstance is one instance of Cluster.
type ClusterInstance struct {
	ID           string
	AdvertiseURL string
	// StartedAt and HeartbeatAt are nil for a claimant no longer registered.
	StartedAt   *time.Time
	HeartbeatAt *time.Time
	// Live: the heartbeat is younger than instance_heartbeat_timeout.
	Live bool
	// Draining: drained by an operator (sql/admin/drain_instance.sql) or shutting down.
	Draining bool
	Shards   []Claim
}

// Claim is a shard held by an instance, as of its last renewal.
type Claim struct {
	Shard      int
	Generation int64
	// Draining: the owner drains the shard (it reserves nothing more from it, and releases
	// it once nothing of it is in flight); else the shard is active.
	Draining bool
	// Inflight is the owner's count of live reservations on the shard.
	Inflight int
	// Available: the owner knows of reservable chunks on the shard.
	Available     bool
	SoftExpiresAt time.Time
	HardExpiresAt time.Time
}

// LoadCluster reads the instances and the claims table, in one statement so that they agree.
func LoadCluster(ctx context.Context, db Querier) (Cluster, error) {
	crows, err := opsqsql.New(db).ClaimsCluster(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("reading claims: %w", err)
	}
	c := Cluster{Instances: []ClusterInstance{}, Unclaimed: []int{}, Disabled: []int{}}
	for _, r := range crows {
		c.ShardCount = r.ShardCount
		if r.Shard != nil && *r.Disabled {
			c.Disabled = append(c.Disabled, *r.Shard)
		}
		if r.Instance == nil {
			if !*r.Disabled {
				c.Unclaimed = append(c.Unclaimed, *r.Shard)
			}
			continue
		}
		if n := len(c.Instances); n == 0 || c.Instances[n-1].ID != *r.Instance {
			c.Instances = append(c.Instances, ClusterInstance{
				ID: *r.Instance, AdvertiseURL: r.AdvertiseURL, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt,
				Live: r.Live, Draining: r.InstanceDraining, Shards: []Claim{},
			})
		}
		if r.Shard == nil {
			continue
		}
		in := &c.Instances[len(c.Instances)-1]
		claim := Claim{Shard: *r.Shard, Generation: *r.Generation, Draining: *r.Draining, Inflight: *r.Inflight, Available: *r.Available}
		if r.SoftExpiresAt != nil {
			claim.SoftExpiresAt = *r.SoftExpiresAt
		}
		if r.HardExpiresAt != nil {
			claim.HardExpiresAt = *r.HardExpiresAt
		}
		in.Shards = append(in.Shards, claim)
	}
	return c, nil
}
