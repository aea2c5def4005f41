package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

func (s *server) cluster(c echo.Context) error {
	cl, err := s.q.Cluster(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, clusterAnswer(cl))
}

// clusterAnswer is the wire form of claims' view of the cluster. Lists stay non-nil, so
// that they encode as [].
func clusterAnswer(cl queuer.Cluster) wire.Cluster {
	out := wire.Cluster{
		ShardCount: cl.ShardCount,
		Instances:  make([]wire.ClusterInstance, len(cl.Instances)),
		Unclaimed:  cl.Unclaimed,
		Disabled:   cl.Disabled,
	}
	for i, in := range cl.Instances {
		ci := wire.ClusterInstance{
			ID: in.ID, AdvertiseURL: in.AdvertiseURL, StartedAt: in.StartedAt, HeartbeatAt: in.HeartbeatAt,
			Live: in.Live, Draining: in.Draining, Shards: make([]wire.ClusterShard, len(in.Shards)),
		}
		for j, claim := range in.Shards {
			state := wire.ClaimActive
			if claim.Draining {
				state = wire.ClaimDraining
			}
			ci.Shards[j] = wire.ClusterShard{
				Shard: claim.Shard, Generation: claim.Generation, State: state, Inflight: claim.Inflight,
				Available: claim.Available, SoftExpiresAt: &claim.SoftExpiresAt, HardExpiresAt: &claim.HardExpiresAt,
			}
		}
		out.Instances[i] = ci
	}
	if out.Unclaimed == nil {
		out.Unclaimed = []int{}
	}
	if out.Disabled == nil {
		out.Disabled = []int{}
	}
	return out
}
