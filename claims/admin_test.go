package claims

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// runRecipe runs sql/admin/name with psql and the variables vars, as an operator would.
func (f *fixture) runRecipe(name string, vars map[string]string) {
	f.t.Helper()
	var args []string
	for k, v := range vars {
		args = append(args, k+"="+v)
	}
	if out, err := pgtest.Psql(f.t, f.url, filepath.Join("..", "sql", "admin", name), args...); err != nil {
		f.t.Fatalf("running %s: %v\n%s", name, err, out)
	}
}

func TestAdminRecipesAreDocumented(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(opsqsql.Admin, "admin")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		script, _ := fs.ReadFile(opsqsql.Admin, "admin/"+e.Name())
		if !strings.HasPrefix(string(script), "-- ") || !strings.Contains(string(script), "psql ") {
			t.Errorf("%s: want a leading comment that shows how to run it with psql", e.Name())
		}
	}
	for _, want := range []string{"claims_overview.sql", "disable_shard.sql", "drain_instance.sql", "enable_shard.sql",
		"force_release_shard.sql", "rotate_cluster_key.sql", "set_timings.sql", "undrain_instance.sql"} {
		if !slices.Contains(names, want) {
			t.Errorf("sql/admin has no %s", want)
		}
	}
}

// TestAdminRotateClusterKey: each run of the recipe adds a key with the next id and a fresh
// 32-byte secret, and tells the instances by NOTIFY (queuer's tests check that tokens signed
// before a rotation keep working).
func TestAdminRotateClusterKey(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN opsq_cluster_keys"); err != nil {
		t.Fatal(err)
	}
	f.runRecipe("rotate_cluster_key.sql", nil)
	f.runRecipe("rotate_cluster_key.sql", nil)
	type key struct {
		ID      int
		Secret  []byte
		Created time.Time
	}
	rows, err := f.pool.Query(ctx, "SELECT id, secret, created_at AS created FROM opsq.cluster_keys ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByName[key])
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("%d cluster keys after the migration and 2 rotations; want 3", len(keys))
	}
	for i, k := range keys {
		if k.ID != i+1 || len(k.Secret) != 32 {
			t.Errorf("key %d: id %d with a %d-byte secret; want id %d, 32 bytes", i, k.ID, len(k.Secret), i+1)
		}
		for _, other := range keys[:i] {
			if string(other.Secret) == string(k.Secret) {
				t.Errorf("keys %d and %d have the same secret", other.ID, k.ID)
			}
		}
		if i > 0 && k.Created.Before(keys[i-1].Created) {
			t.Errorf("key %d was created before key %d", k.ID, keys[i-1].ID)
		}
	}
	for _, want := range []string{"2", "3"} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil || n.Channel != "opsq_cluster_keys" || n.Payload != want {
			t.Fatalf("notification after a rotation: %+v, %v; want opsq_cluster_keys %q", n, err, want)
		}
	}
}

// overviewRow is a row of opsq.claims_overview.
type overviewRow struct {
	Instance         *string
	Live             *bool
	InstanceDraining bool
	Shards           int
	ShardList        []int32
	DrainingShards   int
	DisabledShards   int
	Inflight         int64
}

func (f *fixture) overview() []overviewRow {
	f.t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT instance, live, instance_draining, shards, shard_list,
		draining_shards, disabled_shards, inflight FROM opsq.claims_overview ORDER BY instance NULLS LAST`)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[overviewRow])
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func TestAdminClaimsOverview(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	f.runRecipe("claims_overview.sql", nil) // runs on an empty cluster
	a, b := f.start("a"), f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })
	// After the split: a shard given in-flight reservations before it could be among those
	// a drains, and on a busy machine the drain timeout then released it anyway.
	busy := a.shards()[0]
	if busy == 5 { // shard 5 is disabled below
		busy = a.shards()[1]
	}
	a.setInflight(busy, 3)
	waitCycles(t, a.Manager, 2)
	f.runRecipe("disable_shard.sql", map[string]string{"shard": "5"})
	pgtest.WaitFor(t, 5*time.Second, "the disabled shard is released", func() string {
		if c := f.claims()[5]; c.Claimant != nil {
			return "shard 5 claimed by " + *c.Claimant
		}
		return ""
	})
	f.exec("INSERT INTO opsq.instances (id, node_id, advertise_url, heartbeat_at) VALUES ('old', 999, 'http://old', now() - interval '1 hour')")
	f.runRecipe("claims_overview.sql", nil)

	rows := f.overview()
	if len(rows) != 4 {
		t.Fatalf("claims_overview has %d rows; want 4 (a, b, old, unclaimed): %+v", len(rows), rows)
	}
	byID := map[string]overviewRow{}
	for _, r := range rows[:3] {
		byID[*r.Instance] = r
	}
	if r := byID[a.id]; r.Live == nil || !*r.Live || len(r.ShardList) != r.Shards || r.Inflight != 3 {
		t.Errorf("claims_overview row of a = %+v; want live, its shards listed, inflight 3", r)
	}
	if r := byID["old"]; r.Live == nil || *r.Live || r.Shards != 0 || r.ShardList == nil {
		t.Errorf("claims_overview row of a silent instance = %+v; want not live, 0 shards, an empty list", r)
	}
	if r := rows[3]; r.Instance != nil || r.Live != nil || r.DisabledShards != 1 || !slices.Contains(r.ShardList, 5) {
		t.Errorf("claims_overview unclaimed row = %+v; want instance NULL, live NULL, the disabled shard 5", r)
	}
	if total := byID[a.id].Shards + byID[b.id].Shards + rows[3].Shards; total != 64 {
		t.Errorf("claims_overview counts %d shards; want 64", total)
	}
	if !slices.IsSorted(byID[a.id].ShardList) {
		t.Errorf("shard_list %v is not sorted", byID[a.id].ShardList)
	}
}

func TestAdminForceRelease(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })
	victim := a.Reservable()[0]

	released := time.Now()
	f.runRecipe("force_release_shard.sql", map[string]string{"shard": fmt.Sprint(victim.Shard)})
	took := pgtest.WaitFor(t, 5*time.Second, "the old owner notices the force-release", func() string {
		if lost, _ := a.lostSince(released); !slices.Contains(lost, victim.Shard) {
			return fmt.Sprintf("shard %d not reported lost", victim.Shard)
		}
		return ""
	})
	t.Logf("force-release noticed by the old owner after %s (renew interval %s)", took, fast.Renew)
	if took > 2*fast.Renew+50*time.Millisecond {
		t.Errorf("force-release noticed after %s; want within two renew intervals (%s)", took, 2*fast.Renew)
	}
	pgtest.WaitFor(t, 5*time.Second, "someone takes the shard again with a higher generation", func() string {
		c := f.claims()[victim.Shard]
		if c.Claimant == nil || c.Generation < victim.Generation+2 {
			return fmt.Sprintf("shard %d: claimant %v, generation %d", victim.Shard, c.Claimant, c.Generation)
		}
		return ""
	})
	if l, ok := a.Lease(victim.Shard); ok && l.Generation <= victim.Generation+1 {
		t.Errorf("old owner's Lease(%d) = generation %d; want the shard lost (was %d)", victim.Shard, l.Generation, victim.Generation)
	}
	pgtest.WaitFor(t, 5*time.Second, "2 managers split 64 shards again", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })
}

func TestAdminDrainInstance(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	ms := []*manager{a, b}
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced(ms, 64, 32, 32) })

	s := startSampler(a, b)
	drained := time.Now()
	f.runRecipe("drain_instance.sql", map[string]string{"instance": a.id})
	took := pgtest.WaitFor(t, 5*time.Second, "a drained instance gives all its shards away", func() string { return balanced(ms, 64, 0, 64) + balanced([]*manager{b}, 64, 64, 64) })
	t.Logf("drained instance: all shards moved in %s", took)
	if lost, _ := a.lostSince(drained); len(lost) != 32 {
		t.Errorf("drained instance reported %d shards lost; want 32", len(lost))
	}
	waitCycles(t, a.Manager, 3)
	if n := len(a.shards()); n != 0 {
		t.Errorf("a drained instance holds %d shards after 3 more cycles; want 0", n)
	}

	f.runRecipe("undrain_instance.sql", map[string]string{"instance": a.id})
	took = pgtest.WaitFor(t, 5*time.Second, "an undrained instance takes its share again", func() string { return balanced(ms, 64, 32, 32) })
	t.Logf("undrained instance: balanced again in %s", took)
	s.finish(t)
}

func TestAdminDisableShard(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	ms := []*manager{a, b}
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced(ms, 64, 32, 32) })
	victim := a.Reservable()[0].Shard

	disabled := time.Now()
	f.runRecipe("disable_shard.sql", map[string]string{"shard": fmt.Sprint(victim)})
	pgtest.WaitFor(t, 5*time.Second, "the owner of a disabled shard drops it", func() string {
		if lost, _ := a.lostSince(disabled); !slices.Contains(lost, victim) {
			return fmt.Sprintf("shard %d not reported lost", victim)
		}
		return ""
	})
	waitCycles(t, a.Manager, 5)
	waitCycles(t, b.Manager, 1)
	if c := f.claims()[victim]; c.Claimant != nil {
		t.Errorf("disabled shard %d claimed by %s; want nobody", victim, *c.Claimant)
	}
	for _, m := range ms {
		if slices.Contains(m.shards(), victim) {
			t.Errorf("disabled shard %d reservable at %s", victim, m.id)
		}
	}
	if why := balanced(ms, 63, 31, 32); why != "" {
		t.Errorf("with one shard disabled: %s", why)
	}

	f.runRecipe("enable_shard.sql", map[string]string{"shard": fmt.Sprint(victim)})
	took := pgtest.WaitFor(t, 5*time.Second, "an enabled shard is claimed again", func() string { return balanced(ms, 64, 32, 32) })
	t.Logf("enabled shard claimed after %s", took)
}

// A disabled shard that an operator did not release is dropped by its owner all the same.
func TestDisabledWithoutReleaseIsDropped(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a := f.start("a")
	disabled := time.Now()
	f.exec("UPDATE opsq.shard_claims SET disabled = true WHERE shard = 7")
	pgtest.WaitFor(t, 5*time.Second, "the owner drops a disabled shard", func() string {
		if lost, _ := a.lostSince(disabled); !slices.Contains(lost, 7) {
			return "shard 7 not reported lost"
		}
		if c := f.claims()[7]; c.Claimant != nil {
			return "shard 7 still claimed by " + *c.Claimant
		}
		return ""
	})
	if n := len(a.shards()); n != 63 {
		t.Errorf("the only manager holds %d shards with one disabled; want 63", n)
	}
}

func TestAdminSetTimings(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	a, b := f.start("a"), f.start("b")
	pgtest.WaitFor(t, 10*time.Second, "2 managers split 64 shards", func() string { return balanced([]*manager{a, b}, 64, 32, 32) })

	want := timings{Renew: 50 * time.Millisecond, Soft: 1500 * time.Millisecond, Hard: 4 * time.Second, Heartbeat: 1200 * time.Millisecond, Drain: 3 * time.Second}
	f.runRecipe("set_timings.sql", map[string]string{
		"renew_interval": "50ms", "soft_expiry": "1.5s", "hard_expiry": "4s", "heartbeat_timeout": "1200ms", "drain_timeout": "3s",
	})
	changed := time.Now()
	took := pgtest.WaitFor(t, 5*time.Second, "running managers pick up new timings", func() string {
		for _, m := range []*manager{a, b} {
			s := m.Settings()
			got := timings{Renew: s.RenewInterval, Soft: s.SoftExpiry, Hard: s.HardExpiry, Heartbeat: s.HeartbeatTimeout, Drain: s.DrainTimeout}
			if got != want {
				return fmt.Sprintf("%s has %+v", m.id, got)
			}
		}
		return ""
	})
	t.Logf("new timings picked up after %s", took)
	waitCycles(t, a.Manager, 2)
	waitCycles(t, b.Manager, 2)
	for s, c := range f.claims() {
		if c.RenewedAt.Before(changed) {
			t.Errorf("shard %d last renewed at %s, before the change", s, c.RenewedAt)
			continue
		}
		if soft, hard := c.SoftExpiresAt.Sub(*c.RenewedAt), c.HardExpiresAt.Sub(*c.RenewedAt); soft != want.Soft || hard != want.Hard {
			t.Errorf("shard %d renewed with soft expiry %s and hard expiry %s; want %s and %s", s, soft, hard, want.Soft, want.Hard)
		}
	}

	// The renew interval applies too: about 20 cycles a second now.
	start := time.Now()
	waitCycles(t, a.Manager, 10)
	if took := time.Since(start); took > 10*fast.Renew {
		t.Errorf("10 cycles took %s; want about %s at the new renew interval", took, 10*want.Renew)
	}

	// Values that do not parse are refused by the database.
	if _, err := f.pool.Exec(t.Context(), "UPDATE opsq.settings SET value = '10 seconds' WHERE key = 'claim_soft_expiry'"); err == nil {
		t.Error("setting claim_soft_expiry to '10 seconds' succeeded; want the check constraint to refuse it")
	}
	// Values that break the protocol are ignored by the managers, which keep the last good ones.
	f.exec("UPDATE opsq.settings SET value = '2s' WHERE key = 'claim_renew_interval'")
	waitCycles(t, a.Manager, 3)
	if got := a.Settings().RenewInterval; got != want.Renew {
		t.Errorf("renew interval after setting it above the soft expiry = %s; want the last good %s", got, want.Renew)
	}
	if err := a.Running(); err != nil {
		t.Errorf("Running() with ignored settings = %v; want nil", err)
	}
}

func TestGoDuration(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	for _, s := range []string{"2s", "100ms", "1m30s", "1h0m0s", "1.5h", "250us", "250µs", "1500ns", ".5s", "1.s", "0"} {
		want, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ParseDuration(%q): %v", s, err)
		}
		var got time.Duration
		if err := f.pool.QueryRow(t.Context(), "SELECT opsq.go_duration($1)", s).Scan(&got); err != nil {
			t.Errorf("opsq.go_duration(%q): %v", s, err)
			continue
		}
		if got != want.Round(time.Microsecond) { // intervals hold microseconds
			t.Errorf("opsq.go_duration(%q) = %s; want %s", s, got, want)
		}
	}
	for _, s := range []string{"", "10", "10 seconds", "s", "1d", "-1s", "1s "} {
		var got *time.Duration
		if err := f.pool.QueryRow(t.Context(), "SELECT opsq.go_duration($1)", s).Scan(&got); err != nil || got != nil {
			t.Errorf("opsq.go_duration(%q) = %v, %v; want NULL", s, got, err)
		}
	}
}
