package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/client"
	"opsq/queuer"
)

// The cluster-wide timings of the tests (opsq.settings), fast so that expiries happen
// within seconds. They obey the rules the instances check: renew < soft <= hard and
// renew < heartbeat timeout.
const (
	RenewInterval    = 200 * time.Millisecond
	SoftExpiry       = 1 * time.Second
	HardExpiry       = 4 * time.Second
	HeartbeatTimeout = 1 * time.Second
	DrainTimeout     = 3 * time.Second
	ShardCount       = 64 // the default of opsq.settings, which the tests keep
)

// PoolMaxConns bounds each instance's connections, so that several tests' instances fit
// in the test server's max_connections.
const PoolMaxConns = 10

// setFastTimings writes the test timings into opsq.settings.
func setFastTimings(ctx context.Context, db *pgxpool.Pool) error {
	_, err := db.Exec(ctx, `UPDATE opsq.settings AS s SET value = v.value
		FROM (VALUES ('claim_renew_interval', $1::text), ('claim_soft_expiry', $2),
		             ('claim_hard_expiry', $3), ('instance_heartbeat_timeout', $4),
		             ('drain_timeout', $5)) AS v (key, value)
		WHERE s.key = v.key`,
		RenewInterval.String(), SoftExpiry.String(), HardExpiry.String(),
		HeartbeatTimeout.String(), DrainTimeout.String())
	if err != nil {
		return fmt.Errorf("setting the test timings in opsq.settings: %w", err)
	}
	return nil
}

// Cluster is a set of opsq instances (processes of Binary) on one database, for a test.
// It owns the instances, their logs (in a temporary directory), the test's connection
// pool and its HTTP client; at the test's cleanup it kills every instance, prints their
// logs if the test failed (or OPSQ_TEST_SHOW_LOGS is set), and closes the pool. Its
// methods that can fail the test they report to (see Within) must be called from that
// test's goroutine; Running, Claims and Instance.Readyz, which return what they see, are
// safe for concurrent use. Set Env before starting the instances it is for.
type Cluster struct {
	DBURL string
	Pool  *pgxpool.Pool // the test's own connections, for checks
	HTTP  *http.Client  // every request of the test goes through it
	Env   []string      // added to the environment of the instances started from now on
	// Key is the API key the clients of the instances started from now on send: an admin
	// key, for instances run with OPSQ_AUTH=required (in Env). "" sends none: the kit runs
	// instances with OPSQ_AUTH=off unless Env says otherwise.
	Key string
	// HTTPS: the instances started from now on serve TLS (Env names their OPSQ_TLS_
	// files; HTTP's transport must trust their CA).
	HTTPS bool
	// local signs the requests of the Instances' Local clients as forwarded with the
	// cluster key, as an instance forwards them (each Local client names its instance as
	// the destination: localTo).
	local http.RoundTripper

	t   testing.TB
	bin Binary
	dir string // logs

	mu    sync.Mutex
	insts []*Instance
	seq   int
}

// Instance is one instance of a Cluster: its Process, and clients to it. The Cluster owns
// it (and kills it at cleanup). Its methods that can fail the test the Cluster reports to
// must be called from that test's goroutine; the others are safe for concurrent use.
type Instance struct {
	ID, URL string
	Proc    *Process
	Client  *client.Client
	// Local answers reserves from this instance's own shards only: its requests are
	// signed as forwarded by another instance, which keeps it from forwarding them on.
	Local *client.Client

	c *Cluster
}

// New returns a Cluster of bin on a migrated database (pgtest.NewDB makes a fresh one),
// with the test timings set, and no instance yet: StartN starts them.
func New(t testing.TB, bin Binary, dbURL string) *Cluster {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dbURL, err)
	}
	if err := setFastTimings(t.Context(), pool); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	signing, err := queuer.SigningTransport(t.Context(), pool, "test", tr)
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	c := &Cluster{DBURL: dbURL, Pool: pool, HTTP: &http.Client{Transport: tr}, t: t, bin: bin, dir: t.TempDir(),
		local: signing}
	t.Cleanup(c.cleanup)
	return c
}

// Within makes the helpers report to subtest t (they must not fail the parent test from
// the subtest's goroutine) until the returned function is called.
func (c *Cluster) Within(t testing.TB) (restore func()) {
	parent := c.t
	c.t = t
	return func() { c.t = parent }
}

// StartN starts n instances (the first migrates if none runs yet) and waits until they
// are ready and every shard is claimed by the running instances, evenly.
func (c *Cluster) StartN(n int) []*Instance {
	c.t.Helper()
	var out []*Instance
	c.mu.Lock()
	first := len(c.insts) == 0
	c.mu.Unlock()
	if first {
		inst := c.Spawn(true)
		inst.WaitReady(30 * time.Second)
		out = append(out, inst)
		n--
	}
	for range n {
		out = append(out, c.Spawn(false))
	}
	for _, inst := range out {
		inst.WaitReady(30 * time.Second)
	}
	c.WaitSplit(20*time.Second, c.Running()...)
	return out
}

// Spawn starts one instance without waiting for it, with a small pool (pool_max_conns in
// its database URL) so that several fit on the test server.
func (c *Cluster) Spawn(migrate bool) *Instance {
	c.t.Helper()
	return c.SpawnWith(migrate, map[string]string{"pool_max_conns": strconv.Itoa(PoolMaxConns)})
}

// SpawnWith is Spawn with the given parameters added to the database URL.
func (c *Cluster) SpawnWith(migrate bool, params map[string]string) *Instance {
	t := c.t
	t.Helper()
	c.mu.Lock()
	c.seq++
	id := fmt.Sprintf("opsq-%d", c.seq)
	c.mu.Unlock()
	params["application_name"] = id // finds its sessions in pg_stat_activity
	dbURL, err := withConnParams(c.DBURL, params)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(c.bin, Spec{ID: id, DBURL: dbURL, Migrate: migrate, LogPath: filepath.Join(c.dir, id+".log"), Env: c.Env, HTTPS: c.HTTPS})
	if err != nil {
		t.Fatal(err)
	}
	opts := []client.Option{client.WithHTTPClient(c.HTTP)}
	if c.Key != "" {
		opts = append(opts, client.WithKey(c.Key))
	}
	inst := &Instance{ID: id, URL: p.URL, Proc: p, c: c,
		Client: client.New(p.URL, opts...),
		Local:  client.New(p.URL, append(opts, client.WithHTTPClient(&http.Client{Transport: localTo{id, c.local}}))...),
	}
	c.mu.Lock()
	c.insts = append(c.insts, inst)
	c.mu.Unlock()
	return inst
}

// localTo names instance id as the destination of each request it sends through signing,
// which signs it for that instance alone.
type localTo struct {
	id      string
	signing http.RoundTripper
}

func (l localTo) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change the request it is given
	r.Header.Set(wire.ForwardedToHeader, l.id)
	return l.signing.RoundTrip(r)
}

// withConnParams adds query parameters to a PostgreSQL URL.
func withConnParams(dbURL string, params map[string]string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", dbURL, err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// cleanup kills every instance, prints their logs if the test failed (or
// OPSQ_TEST_SHOW_LOGS is set), releases their ports and closes the test's connections.
func (c *Cluster) cleanup() {
	c.mu.Lock()
	insts := slices.Clone(c.insts)
	c.mu.Unlock()
	for _, inst := range insts {
		_ = inst.Proc.Signal(syscall.SIGKILL)
	}
	for _, inst := range insts {
		if err := inst.Proc.Kill(10 * time.Second); err != nil {
			c.t.Errorf("%s did not exit after SIGKILL: %v", inst.ID, err)
		}
		inst.Proc.Release()
	}
	if c.t.Failed() || os.Getenv("OPSQ_TEST_SHOW_LOGS") != "" {
		for _, inst := range insts {
			c.t.Logf("---- log of %s (%s) ----\n%s", inst.ID, inst.URL, Tail(inst.Proc.LogPath, 3000))
		}
	}
	c.HTTP.CloseIdleConnections()
	c.Pool.Close()
}

// Running lists the instances whose process has not exited, in the order they started.
func (c *Cluster) Running() []*Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Instance
	for _, inst := range c.insts {
		if inst.Proc.Running() {
			out = append(out, inst)
		}
	}
	return out
}

// URLs returns the instances' URLs.
func URLs(insts ...*Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.URL
	}
	return out
}

// ids returns the instances' ids.
func ids(insts []*Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.ID
	}
	return out
}

// WaitReady waits until GET /readyz answers 200; it fails the test if the process exits
// or timeout passes.
func (inst *Instance) WaitReady(timeout time.Duration) {
	t := inst.c.t
	t.Helper()
	if err := inst.Proc.WaitReady(t.Context(), inst.c.HTTP, timeout); err != nil {
		t.Fatal(err)
	}
}

// Readyz returns the status and body of GET /readyz (status 0 when unreachable).
func (inst *Instance) Readyz() (int, string) {
	return inst.Proc.Readyz(context.Background(), inst.c.HTTP)
}

// Signal sends sig to the process (SIGSTOP pauses it, SIGCONT resumes it).
func (inst *Instance) Signal(sig syscall.Signal) {
	inst.c.t.Helper()
	if err := inst.Proc.Signal(sig); err != nil {
		inst.c.t.Fatal(err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (inst *Instance) Kill() {
	inst.c.t.Helper()
	if err := inst.Proc.Kill(10 * time.Second); err != nil {
		inst.c.t.Fatal(err)
	}
}

// WaitExit waits for the process to exit and returns its exit code.
func (inst *Instance) WaitExit(timeout time.Duration) int {
	inst.c.t.Helper()
	code, err := inst.Proc.WaitExit(timeout)
	if err != nil {
		inst.c.t.Fatal(err)
	}
	return code
}

// LogLines returns the lines of the instance's log that contain s.
func (inst *Instance) LogLines(s string) []string { return inst.Proc.LogLines(s) }

// View is GET /v1/cluster as answered by inst.
func (inst *Instance) View(ctx context.Context) (wire.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return inst.Client.Cluster(ctx)
}

// splitState describes how the shards are split; "" when each of insts holds between lo
// and hi active shards (no draining ones), and together they hold all of them.
func splitState(cl wire.Cluster, insts []*Instance, lo, hi int) string {
	want := map[string]bool{}
	for _, inst := range insts {
		want[inst.ID] = true
	}
	ok := len(cl.Unclaimed) == 0 && cl.ShardCount == ShardCount
	total := 0
	var parts []string
	seen := map[string]bool{}
	for _, ci := range cl.Instances {
		active, draining := 0, 0
		for _, s := range ci.Shards {
			if s.State == wire.ClaimDraining {
				draining++
			} else {
				active++
			}
		}
		total += len(ci.Shards)
		parts = append(parts, fmt.Sprintf("%s: %d active, %d draining (live %t)", ci.ID, active, draining, ci.Live))
		switch {
		case !want[ci.ID]:
			ok = ok && len(ci.Shards) == 0
		case draining > 0 || active < lo || active > hi:
			ok = false
		}
		seen[ci.ID] = true
	}
	for id := range want {
		if !seen[id] {
			ok = false
			parts = append(parts, id+": missing")
		}
	}
	if ok && total == ShardCount {
		return ""
	}
	return fmt.Sprintf("%s; unclaimed %v", strings.Join(parts, "; "), cl.Unclaimed)
}

// evenSplit is the range of shards each of n instances holds when balanced: the target
// ceil(S/n), and what is left for the others.
func evenSplit(n int) (lo, hi int) {
	hi = (ShardCount + n - 1) / n
	return ShardCount - (n-1)*hi, hi
}

// WaitSplit waits until insts share the shards evenly, as seen by the first of them.
func (c *Cluster) WaitSplit(timeout time.Duration, insts ...*Instance) time.Duration {
	c.t.Helper()
	lo, hi := evenSplit(len(insts))
	return c.WaitSplitRange(timeout, insts[0], insts, lo, hi)
}

// WaitSplitRange waits until each of insts holds lo to hi shards, as seen by from.
func (c *Cluster) WaitSplitRange(timeout time.Duration, from *Instance, insts []*Instance, lo, hi int) time.Duration {
	c.t.Helper()
	what := fmt.Sprintf("%s to see the shards split %d–%d over %v", from.ID, lo, hi, ids(insts))
	return PollUntil(c.t, timeout, what, func() string {
		cl, err := from.View(c.t.Context())
		if err != nil {
			return err.Error()
		}
		return splitState(cl, insts, lo, hi)
	})
}

// PollUntil calls check every 25 ms until it returns "" and returns how long that took;
// at the deadline it fails the test with what was awaited and check's last answer.
func PollUntil(t testing.TB, timeout time.Duration, what string, check func() string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		state := check()
		if state == "" {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// RequireKeys makes the instances started from now on require API keys
// (OPSQ_AUTH=required) and creates an admin, a producer and a consumer key named
// prefix-<role>, which it returns by role; the kit's own clients send the admin key.
func (c *Cluster) RequireKeys(t testing.TB, prefix string) map[apikeys.Role]string {
	t.Helper()
	keys := map[apikeys.Role]string{}
	for _, role := range []apikeys.Role{apikeys.Admin, apikeys.Producer, apikeys.Consumer} {
		_, k, err := apikeys.Create(context.Background(), c.Pool, prefix+"-"+string(role), role, 0)
		if err != nil {
			t.Fatalf("creating the %s key: %v", role, err)
		}
		keys[role] = k
	}
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = keys[apikeys.Admin]
	return keys
}
