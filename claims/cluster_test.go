package claims

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

func TestLoadCluster(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)

	empty, err := LoadCluster(t.Context(), f.pool)
	if err != nil {
		t.Fatal(err)
	}
	if empty.ShardCount != 64 || len(empty.Unclaimed) != 64 {
		t.Errorf("LoadCluster with no instances: shard_count %d, %d unclaimed; want 64 and 64", empty.ShardCount, len(empty.Unclaimed))
	}
	if empty.Instances == nil || len(empty.Instances) != 0 || empty.Disabled == nil || len(empty.Disabled) != 0 {
		t.Errorf("LoadCluster with no instances = %+v; want empty lists, not nil (api encodes them as [])", empty)
	}

	f.runRecipe("disable_shard.sql", map[string]string{"shard": "63"})
	a, b := f.start("a"), f.start("b")
	busy := a.shards()[0] // once: a may acquire a lower shard before a second look
	a.setInflight(busy, 4)
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 63 shards", func() string { return balanced([]*manager{a, b}, 63, 31, 32) })
	waitCycles(t, a.Manager, 2)
	f.runRecipe("drain_instance.sql", map[string]string{"instance": b.id})
	var c Cluster
	pgtest.WaitFor(t, 5*time.Second, "b drains and a takes its shards", func() string {
		if c, err = LoadCluster(t.Context(), f.pool); err != nil {
			t.Fatal(err)
		}
		for _, in := range c.Instances {
			if in.ID == a.id && len(in.Shards) != 63 {
				return fmt.Sprintf("a holds %d shards", len(in.Shards))
			}
		}
		return ""
	})
	if c.ShardCount != 64 {
		t.Errorf("shard_count = %d; want 64", c.ShardCount)
	}
	if !slices.Equal(c.Disabled, []int{63}) {
		t.Errorf("disabled = %v; want [63]", c.Disabled)
	}
	if len(c.Instances) != 2 {
		t.Fatalf("%d instances; want 2: %+v", len(c.Instances), c.Instances)
	}
	byID := map[string]ClusterInstance{}
	for _, in := range c.Instances {
		byID[in.ID] = in
	}
	ia, ib := byID[a.id], byID[b.id]
	if !ia.Live || ia.Draining || ia.StartedAt == nil || ia.HeartbeatAt == nil || ia.AdvertiseURL == "" {
		t.Errorf("instance a = %+v; want live, not draining, with times and URL", ia)
	}
	if !ib.Draining || ib.Shards == nil || len(ib.Shards) != 0 {
		t.Errorf("instance b = %+v; want draining with no shards ([])", ib)
	}
	held := len(ia.Shards) + len(c.Unclaimed)
	if held != 63 {
		t.Errorf("a holds %d shards and %d are unclaimed; want 63 in all", len(ia.Shards), len(c.Unclaimed))
	}
	for _, s := range ia.Shards {
		if s.Draining || s.Generation < 1 || !s.SoftExpiresAt.After(time.Now().Add(-time.Minute)) || s.HardExpiresAt.Before(s.SoftExpiresAt) {
			t.Errorf("claim %+v; want active, generation ≥ 1, hard expiry after soft expiry", s)
		}
		if s.Shard == busy && (s.Inflight != 4 || !s.Available) {
			t.Errorf("claim of the busy shard %+v; want inflight 4, available", s)
		}
	}
	if c.Unclaimed == nil {
		t.Error("unclaimed is nil; want a list (api encodes it as [])")
	}
	// The JSON of GET /v1/cluster is api's: see api's TestClusterAnswerJSON and
	// TestClusterEndpoint.

	// A claimant that is no longer registered is listed until its claims are taken.
	a.abandon()
	f.exec("DELETE FROM opsq.instances WHERE id = $1", a.id)
	c, err = LoadCluster(t.Context(), f.pool)
	if err != nil {
		t.Fatal(err)
	}
	var gone *ClusterInstance
	for i := range c.Instances {
		if c.Instances[i].ID == a.id {
			gone = &c.Instances[i]
		}
	}
	if gone == nil || gone.Live || gone.StartedAt != nil || len(gone.Shards) == 0 {
		t.Errorf("unregistered claimant = %+v; want listed, not live, no started_at, its shards", gone)
	}
}
