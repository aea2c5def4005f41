//go:build citus

// Instances homed on a Citus worker (Config.Home): `make test-citus` (OPSQ_TEST_CITUS=1,
// -tags citus) runs these beside the package's other tests.

package claims

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

func requireCitus(t *testing.T) {
	t.Helper()
	if !pgtest.Citus() {
		t.Fatalf("built with -tags citus but %s is not 1: run make test-citus", pgtest.EnvCitus)
	}
}

// placements returns the shards on each node, by pg_dist_node's nodename:nodeport.
func (f *fixture) placements() map[string][]int {
	f.t.Helper()
	rows, err := opsqsql.New(f.pool).ClaimsPlacements(f.t.Context())
	if err != nil {
		f.t.Fatalf("reading the placements: %v", err)
	}
	out := map[string][]int{}
	for _, r := range rows {
		out[r.Node] = append(out[r.Node], r.Shard)
	}
	return out
}

// startHomed starts a Manager homed on node.
func (f *fixture) startHomed(name, node string) *manager {
	f.t.Helper()
	tm := f.newManager(name)
	tm.cfg.Home = node
	if err := tm.Start(f.t.Context()); err != nil {
		f.t.Fatalf("starting %s: %v", tm.id, err)
	}
	return tm
}

// ownedAsPlaced says what differs between the claims and "each node's shards held, not
// draining, by the instance homed there"; "" when nothing does.
func (f *fixture) ownedAsPlaced(homes map[string]*manager) string {
	claims := f.claims()
	var diffs []string
	for node, shards := range f.placements() {
		tm := homes[node]
		for _, shard := range shards {
			c := claims[shard]
			if c.Claimant == nil || *c.Claimant != tm.id || c.Draining {
				owner := "nobody"
				if c.Claimant != nil {
					owner = *c.Claimant
				}
				diffs = append(diffs, fmt.Sprintf("shard %d (on %s) held by %s, draining %v; want %s", shard, node, owner, c.Draining, tm.id))
			}
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// Two instances each homed on one worker end with the shards placed on their worker; after
// citus_move_shard_placement of one opsq shard's Citus shard to the other worker, its
// ownership follows, through the normal hand-over (a new generation).
func TestHomeClaimsFollowPlacements(t *testing.T) {
	requireCitus(t)
	f := setup(t, fast)
	placed := f.placements()
	nodes := slices.Sorted(maps.Keys(placed))
	if len(nodes) != pgtest.CitusWorkers {
		t.Fatalf("opsq's shards are placed on %v; want %d workers", nodes, pgtest.CitusWorkers)
	}
	homes := map[string]*manager{}
	for i, node := range nodes {
		homes[node] = f.startHomed(fmt.Sprintf("home%d", i), node)
	}
	pgtest.WaitFor(t, 30*time.Second, "each worker's shards held by the instance homed there", func() string {
		return f.ownedAsPlaced(homes)
	})

	// Move the Citus shard of one of the first worker's opsq shards to the second.
	moved := placed[nodes[0]][0]
	before := f.claims()[moved]
	from, to := hostPort(t, nodes[0]), hostPort(t, nodes[1])
	f.exec(`SELECT citus_move_shard_placement(get_shard_id_for_distribution_column('opsq.chunks', $1::int),
		$2::text, $3::int, $4::text, $5::int, shard_transfer_mode => 'block_writes')`,
		moved, from.host, from.port, to.host, to.port)
	if now := f.placements(); !slices.Contains(now[nodes[1]], moved) {
		t.Fatalf("after the move, shard %d is not on %s: %v", moved, nodes[1], now)
	}
	pgtest.WaitFor(t, 30*time.Second, "ownership to follow the moved shard", func() string {
		return f.ownedAsPlaced(homes)
	})
	after := f.claims()[moved]
	if after.Generation <= before.Generation {
		t.Errorf("shard %d changed owner under generation %d (was %d); want a new generation", moved, after.Generation, before.Generation)
	}
	if lost, _ := homes[nodes[0]].lostSince(time.Time{}); !slices.Contains(lost, moved) {
		t.Errorf("%s did not report shard %d lost (released); lost: %v", homes[nodes[0]].id, moved, lost)
	}
}

type hp struct {
	host string
	port int
}

func hostPort(t *testing.T, node string) hp {
	t.Helper()
	host, port, err := net.SplitHostPort(node)
	if err != nil {
		t.Fatal(err)
	}
	var p int
	if _, err := fmt.Sscan(port, &p); err != nil {
		t.Fatal(err)
	}
	return hp{host, p}
}
