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

// With more live instances than workers, the home does not break the fair share of §4:
// three instances, two homed on one worker and one on the other, serve every shard, none
// more than ceil(64/3), and the lone instance's shards are its worker's.
func TestHomeMoreInstancesThanWorkersKeepsFairCounts(t *testing.T) {
	requireCitus(t)
	f := setup(t, fast)
	placed := f.placements()
	nodes := slices.Sorted(maps.Keys(placed))
	if len(nodes) != pgtest.CitusWorkers {
		t.Fatalf("opsq's shards are placed on %v; want %d workers", nodes, pgtest.CitusWorkers)
	}
	ms := []*manager{f.startHomed("a", nodes[0]), f.startHomed("b", nodes[0]), f.startHomed("c", nodes[1])}
	total := len(f.claims())
	fair := (total + len(ms) - 1) / len(ms)
	pgtest.WaitFor(t, 30*time.Second, "every shard served, fair counts", func() string {
		counts := map[string]int{}
		for shard, c := range f.claims() {
			if c.Claimant == nil || c.Draining {
				return fmt.Sprintf("shard %d not served (claimant %v, draining %v)", shard, c.Claimant, c.Draining)
			}
			counts[*c.Claimant]++
		}
		for _, m := range ms {
			if n := counts[m.id]; n > fair || n < fair-2 {
				return fmt.Sprintf("%s holds %d shards; want %d or a little less (counts %v)", m.id, n, fair, counts)
			}
		}
		return ""
	})
	onLone := 0
	for _, shard := range ms[2].shards() {
		if slices.Contains(placed[nodes[1]], shard) {
			onLone++
		}
	}
	if held := len(ms[2].shards()); onLone != held && onLone < len(placed[nodes[1]]) {
		t.Errorf("%s (homed alone on %s) holds %d shards, %d of them from its worker (%d there); want its worker's first",
			ms[2].id, nodes[1], held, onLone, len(placed[nodes[1]]))
	}
}
