package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
)

// Claim states in Cluster.
const (
	StateActive   = "active"
	StateDraining = "draining"
)

// Cluster is who holds which shard, for GET /v1/cluster. Lists are never nil, so that they
// encode as [].
type Cluster struct {
	ShardCount int `json:"shard_count"`
	// Instances: every registered instance, with or without shards, and every claimant no
	// longer registered (stopped or forgotten) whose claims have not been taken yet; ordered
	// by id.
	Instances []ClusterInstance `json:"instances"`
	// Unclaimed: the enabled shards nobody holds.
	Unclaimed []int `json:"unclaimed"`
	// Disabled: the shards an operator disabled (sql/admin/disable_shard.sql).
	Disabled []int `json:"disabled"`
}

// ClusterInstance is one instance of Cluster.
type ClusterInstance struct {
	ID           string `json:"id"`
	AdvertiseURL string `json:"advertise_url"`
	// StartedAt and HeartbeatAt are nil for a claimant no longer registered.
	StartedAt   *time.Time `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	// Live: the heartbeat is younger than instance_heartbeat_timeout.
	Live bool `json:"live"`
	// Draining: drained by an operator (sql/admin/drain_instance.sql) or shutting down.
	Draining bool    `json:"draining"`
	Shards   []Claim `json:"shards"`
}

// Claim is a shard held by an instance, as of its last renewal.
type Claim struct {
	Shard      int    `json:"shard"`
	Generation int64  `json:"generation"`
	State      string `json:"state"` // StateActive or StateDraining
	// Inflight is the owner's count of live reservations on the shard.
	Inflight int `json:"inflight"`
	// Available: the owner knows of reservable chunks on the shard.
	Available     bool      `json:"available"`
	SoftExpiresAt time.Time `json:"soft_expires_at"`
	HardExpiresAt time.Time `json:"hard_expires_at"`
}

// clusterRow is a row of claims_cluster.sql.
type clusterRow struct {
	ShardCount       int
	Instance         *string
	AdvertiseURL     string
	StartedAt        *time.Time
	HeartbeatAt      *time.Time
	InstanceDraining bool
	Live             bool
	Shard            *int
	Generation       *int64
	Draining         *bool
	Inflight         *int
	Available        *bool
	SoftExpiresAt    *time.Time
	HardExpiresAt    *time.Time
	Disabled         *bool
}

// LoadCluster reads the instances and the claims table, in one statement so that they agree.
func LoadCluster(ctx context.Context, db Querier) (Cluster, error) {
	rows, err := db.Query(ctx, opsqsql.ClaimsCluster)
	if err != nil {
		return Cluster{}, fmt.Errorf("reading claims: %w", err)
	}
	crows, err := pgx.CollectRows(rows, pgx.RowToStructByName[clusterRow])
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
		claim := Claim{Shard: *r.Shard, Generation: *r.Generation, State: StateActive, Inflight: *r.Inflight, Available: *r.Available}
		if *r.Draining {
			claim.State = StateDraining
		}
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
