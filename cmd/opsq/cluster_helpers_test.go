//go:build linux

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/client"
	"opsq/migrations/pglocal"
	"opsq/migrations/pgtest"
)

// Helpers of the multi-instance tests (cluster_test.go, e2e_haproxy_test.go): real
// "opsq serve" processes on one database, consumers that record every delivery in a
// ledger, and the ledger's final check against the database.
//
// An instance is this test binary executed again with OPSQ_TEST_RUN_MAIN=1, which TestMain
// turns into "opsq serve" (see main_test.go), so no separate build is needed. These tests
// are Linux-only: they control processes with signals and have the kernel kill the
// instances if the test binary dies (Pdeathsig).

// The cluster-wide timings of the tests (opsq.settings), fast so that expiries happen
// within seconds. They obey the rules the instances check: renew < soft <= hard and
// renew < heartbeat timeout.
const (
	tcRenewInterval    = 200 * time.Millisecond
	tcSoftExpiry       = 1 * time.Second
	tcHardExpiry       = 4 * time.Second
	tcHeartbeatTimeout = 1 * time.Second
	tcDrainTimeout     = 3 * time.Second
	tcShardCount       = 64
)

// tcPoolMaxConns bounds each instance's connections, so that several tests' instances fit
// in the test server's max_connections.
const tcPoolMaxConns = 10

// setFastTimings writes the test timings into opsq.settings.
func setFastTimings(ctx context.Context, db *pgxpool.Pool) error {
	_, err := db.Exec(ctx, `UPDATE opsq.settings AS s SET value = v.value
		FROM (VALUES ('claim_renew_interval', $1::text), ('claim_soft_expiry', $2),
		             ('claim_hard_expiry', $3), ('instance_heartbeat_timeout', $4),
		             ('drain_timeout', $5)) AS v (key, value)
		WHERE s.key = v.key`,
		tcRenewInterval.String(), tcSoftExpiry.String(), tcHardExpiry.String(),
		tcHeartbeatTimeout.String(), tcDrainTimeout.String())
	if err != nil {
		return fmt.Errorf("setting the test timings in opsq.settings: %w", err)
	}
	return nil
}

// procCluster is a set of opsq instances (processes) on one database.
type procCluster struct {
	t     *testing.T
	dbURL string
	pool  *pgxpool.Pool // the test's own connections, for checks
	hc    *http.Client  // every request of the test goes through it
	dir   string        // logs
	env   []string      // added to the environment of the instances started from now on

	mu    sync.Mutex
	insts []*procInstance
	seq   int
}

// procInstance is one "opsq serve" process.
type procInstance struct {
	c       *procCluster
	id      string
	url     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
	paused  atomic.Bool   // SIGSTOPped and not yet SIGCONTed
	client  *client.Client
	// local answers reserves from this instance's own shards only: the forwarded header
	// keeps it from forwarding to the others.
	local *client.Client
}

// newProcCluster makes a fresh database with the test timings and starts n instances on
// it, the first of which migrates; it returns when all are ready and the 64 shards are
// split among them.
func newProcCluster(t *testing.T, n int) *procCluster {
	t.Helper()
	dbURL := pgtest.NewDB(t)
	c := newProcClusterOn(t, dbURL)
	c.startN(n)
	return c
}

// newProcClusterOn is newProcCluster without instances, on a migrated database.
func newProcClusterOn(t *testing.T, dbURL string) *procCluster {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dbURL, err)
	}
	if err := setFastTimings(ctx, pool); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	c := &procCluster{t: t, dbURL: dbURL, pool: pool, hc: &http.Client{Transport: tr}, dir: t.TempDir()}
	t.Cleanup(c.cleanup)
	return c
}

// within makes the helpers report to subtest t (they must not fail the parent test from
// the subtest's goroutine) until the returned function is called.
func (c *procCluster) within(t *testing.T) (restore func()) {
	parent := c.t
	c.t = t
	return func() { c.t = parent }
}

// startN starts n instances (the first migrates if none runs yet) and waits until they
// are ready and every shard is claimed by them, evenly.
func (c *procCluster) startN(n int) []*procInstance {
	c.t.Helper()
	var out []*procInstance
	c.mu.Lock()
	first := len(c.insts) == 0
	c.mu.Unlock()
	if first {
		inst := c.spawn(true)
		inst.waitReady(30 * time.Second)
		out = append(out, inst)
		n--
	}
	for range n {
		out = append(out, c.spawn(false))
	}
	for _, inst := range out {
		inst.waitReady(30 * time.Second)
	}
	c.waitSplit(20*time.Second, c.running()...)
	return out
}

// spawn starts one instance without waiting for it, with a small pool (pool_max_conns in
// its database URL) so that several fit on the test server.
func (c *procCluster) spawn(migrate bool) *procInstance {
	c.t.Helper()
	return c.spawnWith(migrate, map[string]string{"pool_max_conns": strconv.Itoa(tcPoolMaxConns)})
}

// spawnWith is spawn with the given parameters added to the database URL.
func (c *procCluster) spawnWith(migrate bool, params map[string]string) *procInstance {
	t := c.t
	t.Helper()
	c.mu.Lock()
	c.seq++
	id := fmt.Sprintf("opsq-%d", c.seq)
	c.mu.Unlock()
	port, err := pglocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	inst := &procInstance{
		c: c, id: id, url: fmt.Sprintf("http://127.0.0.1:%d", port),
		logPath: filepath.Join(c.dir, id+".log"), exited: make(chan struct{}),
	}
	inst.client = client.New(inst.url, client.WithHTTPClient(c.hc))
	inst.local = client.New(inst.url, client.WithHTTPClient(c.hc), client.WithHeader(client.ForwardedHeader, "test"))
	params["application_name"] = id // finds its sessions in pg_stat_activity
	dbURL, err := withConnParams(c.dbURL, params)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(inst.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(envWithoutOpsq(),
		runMainEnv+"=1",
		"OPSQ_DATABASE_URL="+dbURL,
		"OPSQ_LISTEN="+fmt.Sprintf("127.0.0.1:%d", port),
		"OPSQ_ADVERTISE_URL="+inst.url,
		"OPSQ_INSTANCE_ID="+id,
		"OPSQ_MIGRATE="+strconv.FormatBool(migrate),
		"OPSQ_LOG_LEVEL=debug",
		"OPSQ_SHUTDOWN_GRACE=10s",
	)
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed by the kernel if the test binary dies, so that no instance outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", id, err)
	}
	inst.cmd = cmd
	go func() {
		inst.waitErr = cmd.Wait()
		logFile.Close()
		close(inst.exited)
	}()
	c.mu.Lock()
	c.insts = append(c.insts, inst)
	c.mu.Unlock()
	return inst
}

// runMainEnv makes the test binary run "opsq" instead of the tests (TestMain).
const runMainEnv = "OPSQ_TEST_RUN_MAIN"

func envWithoutOpsq() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSQ_") {
			env = append(env, kv)
		}
	}
	return env
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

// cleanup kills every instance (resuming the paused ones first), prints their logs if the
// test failed (or OPSQ_TEST_SHOW_LOGS is set), and closes the test's connections.
func (c *procCluster) cleanup() {
	c.mu.Lock()
	insts := slices.Clone(c.insts)
	c.mu.Unlock()
	for _, inst := range insts {
		if inst.paused.Load() {
			_ = syscall.Kill(inst.cmd.Process.Pid, syscall.SIGCONT)
		}
		_ = inst.cmd.Process.Kill()
	}
	for _, inst := range insts {
		select {
		case <-inst.exited:
		case <-time.After(10 * time.Second):
			c.t.Errorf("%s did not exit after SIGKILL", inst.id)
		}
	}
	if c.t.Failed() || os.Getenv("OPSQ_TEST_SHOW_LOGS") != "" {
		for _, inst := range insts {
			c.t.Logf("---- log of %s (%s) ----\n%s", inst.id, inst.url, tailFile(inst.logPath, 3000))
		}
	}
	c.hc.CloseIdleConnections()
	c.pool.Close()
}

// tailFile returns the last lines of a file.
func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		return fmt.Sprintf("[%d earlier lines in %s]\n", len(all)-lines, path) + strings.Join(all[len(all)-lines:], "\n")
	}
	return strings.Join(all, "\n")
}

// running lists the instances whose process has not exited.
func (c *procCluster) running() []*procInstance {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*procInstance
	for _, inst := range c.insts {
		select {
		case <-inst.exited:
		default:
			out = append(out, inst)
		}
	}
	return out
}

// urls returns the instances' URLs.
func urls(insts ...*procInstance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.url
	}
	return out
}

// waitReady waits until GET /readyz answers 200; it fails the test if the process exits.
func (inst *procInstance) waitReady(timeout time.Duration) {
	t := inst.c.t
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		select {
		case <-inst.exited:
			t.Fatalf("%s exited before it was ready (%v); its log:\n%s", inst.id, inst.waitErr, tailFile(inst.logPath, 60))
		default:
		}
		code, body := inst.readyz()
		if code == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%d %s", code, body)
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s; last /readyz: %s", inst.id, timeout, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// readyz returns the status and body of GET /readyz (status 0 when unreachable).
func (inst *procInstance) readyz() (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, inst.url+"/readyz", nil)
	resp, err := inst.c.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, strings.TrimSpace(b.String())
}

// signal sends sig to the process and records whether it is paused.
func (inst *procInstance) signal(sig syscall.Signal) {
	t := inst.c.t
	t.Helper()
	if err := syscall.Kill(inst.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("sending %v to %s: %v", sig, inst.id, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		inst.paused.Store(true)
	case syscall.SIGCONT:
		inst.paused.Store(false)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (inst *procInstance) kill() {
	inst.c.t.Helper()
	inst.signal(syscall.SIGKILL)
	inst.waitExit(10 * time.Second)
}

// waitExit waits for the process to exit and returns its exit code.
func (inst *procInstance) waitExit(timeout time.Duration) int {
	t := inst.c.t
	t.Helper()
	select {
	case <-inst.exited:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", inst.id, timeout)
	}
	return inst.cmd.ProcessState.ExitCode()
}

// logLines returns the lines of the instance's log that contain s.
func (inst *procInstance) logLines(s string) []string {
	b, _ := os.ReadFile(inst.logPath)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// pollUntil calls check every interval until it returns "" and returns how long that
// took; at the deadline it fails the test with what was awaited and check's last answer.
func pollUntil(t *testing.T, timeout time.Duration, what string, check func() string) time.Duration {
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

// view is GET /v1/cluster as answered by inst.
func (inst *procInstance) view(ctx context.Context) (client.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return inst.client.Cluster(ctx)
}

// splitState describes how the shards are split; "" when each of insts holds between lo
// and hi active shards (no draining ones), and together they hold all of them.
func splitState(cl client.Cluster, insts []*procInstance, lo, hi int) string {
	want := map[string]bool{}
	for _, inst := range insts {
		want[inst.id] = true
	}
	ok := len(cl.Unclaimed) == 0 && cl.ShardCount == tcShardCount
	total := 0
	var parts []string
	seen := map[string]bool{}
	for _, ci := range cl.Instances {
		active, draining := 0, 0
		for _, s := range ci.Shards {
			if s.State == "draining" {
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
	if ok && total == tcShardCount {
		return ""
	}
	return fmt.Sprintf("%s; unclaimed %v", strings.Join(parts, "; "), cl.Unclaimed)
}

// evenSplit is the range of shards each of n instances holds when balanced: the target
// ceil(S/n), and what is left for the others.
func evenSplit(n int) (lo, hi int) {
	hi = (tcShardCount + n - 1) / n
	return tcShardCount - (n-1)*hi, hi
}

// waitSplit waits until insts share the shards evenly, as seen by the first of them.
func (c *procCluster) waitSplit(timeout time.Duration, insts ...*procInstance) time.Duration {
	c.t.Helper()
	lo, hi := evenSplit(len(insts))
	return c.waitSplitRange(timeout, insts[0], insts, lo, hi)
}

// waitSplitRange waits until each of insts holds lo to hi shards, as seen by from.
func (c *procCluster) waitSplitRange(timeout time.Duration, from *procInstance, insts []*procInstance, lo, hi int) time.Duration {
	c.t.Helper()
	what := fmt.Sprintf("%s to see the shards split %d–%d over %v", from.id, lo, hi, ids(insts))
	return pollUntil(c.t, timeout, what, func() string {
		cl, err := from.view(c.t.Context())
		if err != nil {
			return err.Error()
		}
		return splitState(cl, insts, lo, hi)
	})
}

func ids(insts []*procInstance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.id
	}
	return out
}

// claimRow is a row of opsq.shard_claims, with the database's now().
type claimRow struct {
	Shard         int        `db:"shard"`
	Claimant      *string    `db:"claimant"`
	Generation    int64      `db:"generation"`
	SoftExpiresAt *time.Time `db:"soft_expires_at"`
	HardExpiresAt *time.Time `db:"hard_expires_at"`
	Inflight      int        `db:"inflight"`
	AcquiredAt    *time.Time `db:"acquired_at"`
	RenewedAt     *time.Time `db:"renewed_at"`
	Now           time.Time  `db:"now"`
}

func (r claimRow) claimant() string {
	if r.Claimant == nil {
		return ""
	}
	return *r.Claimant
}

// claims reads opsq.shard_claims, by shard.
func (c *procCluster) claims(ctx context.Context) (map[int]claimRow, error) {
	rows, err := c.pool.Query(ctx, `SELECT shard, claimant, generation, soft_expires_at, hard_expires_at,
		       inflight, acquired_at, renewed_at, now() AS now
		FROM opsq.shard_claims ORDER BY shard`)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[claimRow])
	if err != nil {
		return nil, err
	}
	out := make(map[int]claimRow, len(list))
	for _, r := range list {
		out[r.Shard] = r
	}
	return out, nil
}

// claimsOf returns the rows of the shards inst holds.
func (c *procCluster) claimsOf(ctx context.Context, inst *procInstance) map[int]claimRow {
	c.t.Helper()
	all, err := c.claims(ctx)
	if err != nil {
		c.t.Fatalf("reading opsq.shard_claims: %v", err)
	}
	out := map[int]claimRow{}
	for s, r := range all {
		if r.claimant() == inst.id {
			out[s] = r
		}
	}
	return out
}

// watchTakeover polls opsq.shard_claims until every shard of before has a new claimant
// (another instance, under a higher generation) and returns each shard's first row seen
// with the new claimant.
func (c *procCluster) watchTakeover(timeout time.Duration, before map[int]claimRow) map[int]claimRow {
	c.t.Helper()
	after := map[int]claimRow{}
	pollUntil(c.t, timeout, "the shards to be taken over", func() string {
		all, err := c.claims(c.t.Context())
		if err != nil {
			return err.Error()
		}
		var waiting []int
		for s, old := range before {
			if _, ok := after[s]; ok {
				continue
			}
			r := all[s]
			if r.Generation != old.Generation && r.claimant() != "" {
				after[s] = r
				continue
			}
			waiting = append(waiting, s)
		}
		if len(waiting) == 0 {
			return ""
		}
		slices.Sort(waiting)
		return fmt.Sprintf("%d shards not taken yet: %v", len(waiting), waiting)
	})
	return after
}

// dbNow returns the database's clock.
func (c *procCluster) dbNow(ctx context.Context) time.Time {
	c.t.Helper()
	var now time.Time
	if err := c.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		c.t.Fatalf("reading now(): %v", err)
	}
	return now
}

// tokenClaim decodes the shard and the claim generation a token was issued under. The
// token is opaque to consumers; the test reads it to check fencing. Its layout (queuer's
// token.go): version 2, submission id (8 bytes), chunk index (4), shard (2), generation
// (8), retries (4), nonce (8), key id (4), MAC (16), big-endian, base64url without padding.
func tokenClaim(tok string) (shard int, generation int64, err error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != 55 || b[0] != 2 {
		return 0, 0, fmt.Errorf("token %q: not a version 2 token (has its layout changed?)", tok)
	}
	return int(binary.BigEndian.Uint16(b[13:15])), int64(binary.BigEndian.Uint64(b[15:23])), nil
}

// chunkKey names a chunk.
type chunkKey struct {
	sub int64
	idx int64
}

func (k chunkKey) String() string { return fmt.Sprintf("%d/%d", k.sub, k.idx) }

// delivery is one reservation of a chunk handed to a consumer.
type delivery struct {
	token    string
	via      string // the URL the consumer asked
	consumer string
}

// ledger records every delivery and completion answer, and checks at the end that every
// chunk was completed exactly once and every submission completed. Safe for concurrent use.
type ledger struct {
	mu         sync.Mutex
	totals     map[int64]int64 // submission -> chunks_total
	deliveries map[chunkKey][]delivery
	completed  map[chunkKey][]string // tokens whose completion answered "completed"
	problems   []string
	delivered  atomic.Int64
	done       atomic.Int64 // "completed" answers
}

func newLedger() *ledger {
	return &ledger{totals: map[int64]int64{}, deliveries: map[chunkKey][]delivery{}, completed: map[chunkKey][]string{}}
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *ledger) addSubmission(id string, total int64) {
	sid, _ := strconv.ParseInt(id, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.totals[sid] = total
}

func (l *ledger) submissionIDs() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.totals))
	for id := range l.totals {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// deliver records a reserved chunk and checks its input (submit makes chunk i's input "i").
func (l *ledger) deliver(ch client.ReservedChunk, via, consumer string) chunkKey {
	sid, err := strconv.ParseInt(ch.SubmissionID, 10, 64)
	if err != nil {
		l.problem("chunk with submission id %q", ch.SubmissionID)
	}
	k := chunkKey{sid, ch.ChunkIndex}
	if ch.Input == nil || *ch.Input != strconv.FormatInt(ch.ChunkIndex, 10) {
		l.problem("chunk %s delivered with input %v; want %q", k, ch.Input, strconv.FormatInt(ch.ChunkIndex, 10))
	}
	l.delivered.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries[k] = append(l.deliveries[k], delivery{token: ch.Token, via: via, consumer: consumer})
	return k
}

// answered records the answer to a completion.
func (l *ledger) answered(k chunkKey, token string, status client.TokenStatus) {
	switch status {
	case client.StatusCompleted:
		l.done.Add(1)
		l.mu.Lock()
		l.completed[k] = append(l.completed[k], token)
		l.mu.Unlock()
	case client.StatusAlreadyFinished:
	default:
		l.problem("completing chunk %s answered %q", k, status)
	}
}

// ledgerStats sums up a ledger.
type ledgerStats struct {
	deliveries int
	duplicates int // deliveries of a chunk after its first
	chunks     int // chunks delivered more than once
}

// check compares the ledger with the database: every submission completed; for each,
// chunks_total rows in chunks_completed, one per index, each with the output of a token
// delivered for that chunk; nothing left in chunks or chunks_failed; no chunk answered
// "completed" twice; no chunk completed without a delivery. It logs the duplicates.
func (l *ledger) check(t *testing.T, ctx context.Context, pool *pgxpool.Pool) ledgerStats {
	t.Helper()
	ids := l.submissionIDs()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []string
	errs = append(errs, l.problems...)

	completedSubs := map[int64]bool{}
	rows, err := pool.Query(ctx, `SELECT id FROM opsq.submissions_completed WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatalf("reading submissions_completed: %v", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("reading submissions_completed: %v", err)
	}
	for _, id := range done {
		completedSubs[id] = true
	}
	for _, id := range ids {
		if !completedSubs[id] {
			var state string
			_ = pool.QueryRow(ctx, `SELECT state FROM opsq.submission_status WHERE id = $1`, id).Scan(&state)
			errs = append(errs, fmt.Sprintf("submission %d is %q; want completed", id, state))
		}
	}

	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM opsq.chunks WHERE submission_id = ANY($1)`, ids).Scan(&left); err != nil {
		t.Fatalf("counting opsq.chunks: %v", err)
	}
	if left > 0 {
		errs = append(errs, fmt.Sprintf("%d chunks left in opsq.chunks; want 0", left))
	}
	var failed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = ANY($1)`, ids).Scan(&failed); err != nil {
		t.Fatalf("counting opsq.chunks_failed: %v", err)
	}
	if failed > 0 {
		errs = append(errs, fmt.Sprintf("%d chunks in opsq.chunks_failed; want 0", failed))
	}

	perSub := map[int64]map[int64]bool{}
	rows, err = pool.Query(ctx, `SELECT submission_id, chunk_index, output FROM opsq.chunks_completed WHERE submission_id = ANY($1)`, ids)
	if err != nil {
		t.Fatalf("reading chunks_completed: %v", err)
	}
	var k chunkKey
	var output []byte
	_, err = pgx.ForEachRow(rows, []any{&k.sub, &k.idx, &output}, func() error {
		if perSub[k.sub] == nil {
			perSub[k.sub] = map[int64]bool{}
		}
		if perSub[k.sub][k.idx] {
			errs = append(errs, fmt.Sprintf("chunk %s completed twice in chunks_completed", k))
		}
		perSub[k.sub][k.idx] = true
		if k.idx < 0 || k.idx >= l.totals[k.sub] {
			errs = append(errs, fmt.Sprintf("chunk %s completed but the submission has %d chunks", k, l.totals[k.sub]))
		}
		ds := l.deliveries[k]
		if len(ds) == 0 {
			errs = append(errs, fmt.Sprintf("chunk %s completed but never delivered to a consumer of the test", k))
		} else if !slices.ContainsFunc(ds, func(d delivery) bool { return d.token == string(output) }) {
			errs = append(errs, fmt.Sprintf("chunk %s completed with output %q, which is none of its delivered tokens", k, output))
		}
		if n := len(l.completed[k]); n > 1 {
			errs = append(errs, fmt.Sprintf("chunk %s: %d completions answered %q; want 1", k, n, client.StatusCompleted))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading chunks_completed: %v", err)
	}
	for _, id := range ids {
		if got := int64(len(perSub[id])); got != l.totals[id] {
			errs = append(errs, fmt.Sprintf("submission %d: %d chunks in chunks_completed; want %d (lost %d)", id, got, l.totals[id], l.totals[id]-got))
		}
	}

	var st ledgerStats
	var dupExamples []string
	for k, ds := range l.deliveries {
		st.deliveries += len(ds)
		if len(ds) > 1 {
			st.duplicates += len(ds) - 1
			st.chunks++
			if len(dupExamples) < 5 {
				var vias []string
				for _, d := range ds {
					vias = append(vias, d.consumer+"@"+d.via)
				}
				dupExamples = append(dupExamples, fmt.Sprintf("%s ×%d (%s)", k, len(ds), strings.Join(vias, ", ")))
			}
		}
	}
	var total int64
	for _, n := range l.totals {
		total += n
	}
	t.Logf("ledger: %d submissions, %d chunks, %d deliveries, %d duplicate deliveries (%d chunks handed out more than once)%s",
		len(ids), total, st.deliveries, st.duplicates, st.chunks, examples(dupExamples))
	if len(errs) > 0 {
		if len(errs) > 30 {
			errs = append(errs[:30], fmt.Sprintf("… and %d more", len(errs)-30))
		}
		t.Errorf("ledger check failed:\n  %s", strings.Join(errs, "\n  "))
	}
	return st
}

func examples(ex []string) string {
	if len(ex) == 0 {
		return ""
	}
	return "; e.g. " + strings.Join(ex, "; ")
}

// submitChunksN submits a submission of n chunks ("0", "1", …) and records it.
func submitChunksN(ctx context.Context, t *testing.T, c *client.Client, l *ledger, n int) string {
	t.Helper()
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	created, err := c.Submit(ctx, client.Submission{Chunks: chunks})
	if err != nil {
		t.Fatalf("submitting %d chunks: %v", n, err)
	}
	if created.ChunksTotal != int64(n) {
		t.Fatalf("submitted %d chunks; the answer says %d", n, created.ChunksTotal)
	}
	l.addSubmission(created.ID, int64(n))
	return created.ID
}

// waitCompleted waits until every submission of the ledger is completed; on timeout it
// describes where the remaining chunks are.
func (c *procCluster) waitCompleted(timeout time.Duration, l *ledger) time.Duration {
	c.t.Helper()
	ids := l.submissionIDs()
	return pollUntil(c.t, timeout, fmt.Sprintf("%d submissions to complete", len(ids)), func() string {
		var n int
		if err := c.pool.QueryRow(c.t.Context(), `SELECT count(*) FROM opsq.submissions_completed WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
			return err.Error()
		}
		if n == len(ids) {
			return ""
		}
		return fmt.Sprintf("%d of %d completed; %d deliveries, %d completions; %s", n, len(ids),
			l.delivered.Load(), l.done.Load(), c.describeBacklog(ids))
	})
}

// describeBacklog says which shards, held by whom, still have chunks of ids.
func (c *procCluster) describeBacklog(ids []int64) string {
	rows, err := c.pool.Query(c.t.Context(), `
		SELECT k.shard, count(*), coalesce(c.claimant, '-'), c.generation, c.inflight, c.available
		FROM opsq.chunks k JOIN opsq.shard_claims c ON c.shard = k.shard
		WHERE k.submission_id = ANY($1)
		GROUP BY k.shard, c.claimant, c.generation, c.inflight, c.available
		ORDER BY k.shard`, ids)
	if err != nil {
		return err.Error()
	}
	var parts []string
	var shard, n, inflight int
	var claimant string
	var gen int64
	var avail bool
	_, err = pgx.ForEachRow(rows, []any{&shard, &n, &claimant, &gen, &inflight, &avail}, func() error {
		parts = append(parts, fmt.Sprintf("shard %d: %d chunks, %s gen %d inflight %d available %t", shard, n, claimant, gen, inflight, avail))
		return nil
	})
	if err != nil {
		return err.Error()
	}
	if len(parts) > 20 {
		parts = append(parts[:20], fmt.Sprintf("… %d more shards", len(parts)-20))
	}
	return "chunks left: " + strings.Join(parts, "; ")
}

// targets is a round-robin list of URLs that may change while consumers run.
type targets struct {
	mu   sync.Mutex
	urls []string
	next int
}

func newTargets(urls ...string) *targets { return &targets{urls: urls} }

func (tg *targets) set(urls ...string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.urls = urls
}

func (tg *targets) pick() string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.next++
	return tg.urls[tg.next%len(tg.urls)]
}

// consumerConfig configures runConsumers.
type consumerConfig struct {
	n       int      // consumers
	targets *targets // where each request goes, round-robin
	max     int      // chunks per reserve; defaults to 5
	lease   string   // defaults to "10s"
	wait    string   // defaults to "1s"
	work    time.Duration
}

// consumers are goroutines that reserve and complete chunks until stopped.
type consumers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errors atomic.Int64 // failed requests (instances killed, paused, restarting)
	once   sync.Once
}

// runConsumers starts cfg.n consumers; each loops reserve → (work) → complete, recording
// every delivery and answer in l. Errors (an instance gone, the database restarting) are
// counted and retried; a completion is retried until it is answered, since a repeated
// completion is harmless. Stop them with stop (also called at cleanup).
func runConsumers(t *testing.T, hc *http.Client, l *ledger, cfg consumerConfig) *consumers {
	cfg.max = cmp.Or(cfg.max, 5)
	cfg.lease = cmp.Or(cfg.lease, "10s")
	cfg.wait = cmp.Or(cfg.wait, "1s")
	ctx, cancel := context.WithCancel(context.Background())
	cs := &consumers{cancel: cancel}
	for i := range cfg.n {
		name := fmt.Sprintf("consumer-%d", i+1)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for ctx.Err() == nil {
				via := cfg.targets.pick()
				c := client.New(via, client.WithHTTPClient(hc))
				chunks, err := c.Reserve(ctx, client.ReserveRequest{Max: cfg.max, Lease: cfg.lease, Wait: cfg.wait, Consumer: name})
				if err != nil {
					if ctx.Err() == nil {
						cs.errors.Add(1)
						sleepCtx(ctx, 50*time.Millisecond)
					}
					continue
				}
				if len(chunks) == 0 {
					continue
				}
				keys := make([]chunkKey, len(chunks))
				comps := make([]client.Completion, len(chunks))
				for i, ch := range chunks {
					keys[i] = l.deliver(ch, via, name)
					comps[i] = client.Completion{Token: ch.Token, Output: ch.Token}
				}
				sleepCtx(ctx, cfg.work)
				completeAll(ctx, hc, cfg.targets, l, keys, comps, &cs.errors)
			}
		}()
	}
	cs.start(t)
	return cs
}

func (cs *consumers) start(t *testing.T) { t.Cleanup(cs.stop) }

// stop cancels the consumers and waits for them.
func (cs *consumers) stop() {
	cs.once.Do(func() {
		cs.cancel()
		cs.wg.Wait()
	})
}

// completeAll completes chunks through any of tg, retrying until answered or ctx ends.
func completeAll(ctx context.Context, hc *http.Client, tg *targets, l *ledger, keys []chunkKey, comps []client.Completion, errCount *atomic.Int64) {
	for ctx.Err() == nil {
		c := client.New(tg.pick(), client.WithHTTPClient(hc))
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := c.Complete(cctx, comps...)
		cancel()
		if err != nil {
			errCount.Add(1)
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if len(res) != len(comps) {
			l.problem("complete of %d tokens answered %d results", len(comps), len(res))
			return
		}
		for i, r := range res {
			l.answered(keys[i], comps[i].Token, r.Status)
		}
		return
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter returns a random duration in [lo, hi).
func jitter(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo)
}

// reserveHeld reserves up to max chunks through c with a long lease and does not complete
// them: they stay in flight. They are recorded in l.
func reserveHeld(ctx context.Context, t *testing.T, c *client.Client, l *ledger, via string, max int) []client.ReservedChunk {
	t.Helper()
	chunks, err := c.Reserve(ctx, client.ReserveRequest{Max: max, Lease: "2m", Consumer: "holder"})
	if err != nil {
		t.Fatalf("reserving chunks to hold through %s: %v", via, err)
	}
	for _, ch := range chunks {
		l.deliver(ch, via, "holder")
	}
	return chunks
}

// shardsOfChunks returns the shards of chunks (read from their tokens).
func shardsOfChunks(t *testing.T, chunks []client.ReservedChunk) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, ch := range chunks {
		s, _, err := tokenClaim(ch.Token)
		if err != nil {
			t.Fatal(err)
		}
		out[s]++
	}
	return out
}

// deliveriesOf returns how many times chunk k was delivered.
func (l *ledger) deliveriesOf(k chunkKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.deliveries[k])
}

// keyOf returns the chunk a reserved chunk names.
func keyOf(ch client.ReservedChunk) chunkKey {
	sid, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	return chunkKey{sid, ch.ChunkIndex}
}

// sessionsIdle waits until none of inst's database sessions is running a statement: after
// SIGKILL or SIGSTOP, whatever it had sent has been executed, and nothing more will be
// until it resumes.
func (c *procCluster) sessionsIdle(inst *procInstance) {
	c.t.Helper()
	pollUntil(c.t, 5*time.Second, inst.id+"'s sessions to be idle", func() string {
		var active int
		err := c.pool.QueryRow(c.t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'active'`, inst.id).Scan(&active)
		if err != nil {
			return err.Error()
		}
		if active > 0 {
			return fmt.Sprintf("%d active sessions", active)
		}
		return ""
	})
}
