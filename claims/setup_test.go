package claims

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// timings are the claim settings of a test, much shorter than the defaults.
type timings = pgtest.Timings

var fast = timings{
	Renew:     100 * time.Millisecond,
	Soft:      time.Second,
	Hard:      3 * time.Second,
	Heartbeat: time.Second,
	Drain:     2 * time.Second,
}

// fixture is one test's database with the claim timings set.
type fixture struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	tm   timings
	seq  atomic.Int64
}

func setup(t *testing.T, tm timings) *fixture {
	t.Helper()
	url := pgtest.NewDB(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	f := &fixture{t: t, url: url, pool: pool, tm: tm}
	f.setTimings(tm)
	return f
}

func (f *fixture) setTimings(tm timings) {
	f.t.Helper()
	pgtest.SetTimings(f.t, f.pool, tm)
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// claim is a row of opsq.shard_claims.
type claim struct {
	Shard         int
	Claimant      *string
	Generation    int64
	SoftExpiresAt *time.Time
	HardExpiresAt *time.Time
	Inflight      int
	AcquiredAt    *time.Time
	RenewedAt     *time.Time
	Draining      bool
	Disabled      bool
}

func (f *fixture) claims() map[int]claim {
	f.t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT shard, claimant, generation, soft_expires_at, hard_expires_at,
		inflight, acquired_at, renewed_at, draining, disabled FROM opsq.shard_claims`)
	if err != nil {
		f.t.Fatal(err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[claim])
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[int]claim{}
	for _, c := range list {
		out[c.Shard] = c
	}
	return out
}

// manager is a Manager under test with a controllable Report and a record of its callbacks.
type manager struct {
	*Manager
	id string

	mu struct {
		sync.Mutex
		inflight        map[int]int // by shard
		defaultInflight int
		lost            []event
		acquired        []event
		abandoned       []Lease
		// abandonedFree: shards Abandon was called with that the database did not show
		// held by the manager under the lease's generation at the time.
		abandonedFree []int
		node          int
	}
}

type event struct {
	at     time.Time
	shards []int
}

func (tm *manager) report(shard int) (int, bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if n, ok := tm.mu.inflight[shard]; ok {
		return n, n > 0
	}
	return tm.mu.defaultInflight, false
}

func (tm *manager) setInflight(shard, n int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.mu.inflight[shard] = n
}

func (tm *manager) setDefaultInflight(n int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.mu.defaultInflight = n
	clear(tm.mu.inflight)
}

// lostSince returns the shards reported lost after t.
func (tm *manager) lostSince(t time.Time) (shards []int, last time.Time) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	for _, e := range tm.mu.lost {
		if e.at.After(t) {
			shards = append(shards, e.shards...)
			last = e.at
		}
	}
	slices.Sort(shards)
	return shards, last
}

// abandoned returns the shards Abandon was called with, sorted, and those of them that
// were not held under the lease's generation when it was.
func (tm *manager) abandoned() (shards, free []int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	for _, l := range tm.mu.abandoned {
		shards = append(shards, l.Shard)
	}
	slices.Sort(shards)
	return shards, slices.Clone(tm.mu.abandonedFree)
}

// acquiredSince returns the shards reported acquired (or served again) after t.
func (tm *manager) acquiredSince(t time.Time) []int {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var shards []int
	for _, e := range tm.mu.acquired {
		if e.at.After(t) {
			shards = append(shards, e.shards...)
		}
	}
	slices.Sort(shards)
	return shards
}

func (tm *manager) shards() []int {
	var out []int
	for _, l := range tm.Reservable() {
		out = append(out, l.Shard)
	}
	return out
}

// newManager returns a Manager that is not started; Stop runs at cleanup.
func (f *fixture) newManager(name string) *manager {
	f.t.Helper()
	tm := &manager{id: fmt.Sprintf("%s-%d", name, f.seq.Add(1))}
	tm.mu.inflight = map[int]int{}
	m, err := New(Config{
		Pool:     f.pool,
		Instance: Instance{ID: tm.id, AdvertiseURL: "http://" + tm.id + ".invalid", Version: "test"},
		Logger:   pgtest.Logger(f.t, slog.LevelInfo).With("m", tm.id),
		Report:   tm.report,
		OnLost: func(shards []int) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.mu.lost = append(tm.mu.lost, event{time.Now(), shards})
		},
		OnAcquired: func(shards []int) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.mu.acquired = append(tm.mu.acquired, event{time.Now(), shards})
		},
		Abandon: func(ctx context.Context, leases []Lease) {
			var free []int
			for _, l := range leases {
				var held bool
				err := f.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM opsq.shard_claims
					WHERE shard = $1 AND claimant = $2 AND generation = $3)`, l.Shard, tm.id, l.Generation).Scan(&held)
				if err != nil || !held {
					free = append(free, l.Shard)
				}
			}
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.mu.abandoned = append(tm.mu.abandoned, leases...)
			tm.mu.abandonedFree = append(tm.mu.abandonedFree, free...)
		},
		OnNode: func(node int, validUntil time.Time) {
			tm.mu.Lock()
			defer tm.mu.Unlock()
			tm.mu.node = node
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	tm.Manager = m
	f.t.Cleanup(m.Stop)
	return tm
}

// start starts a new Manager.
func (f *fixture) start(name string) *manager {
	f.t.Helper()
	tm := f.newManager(name)
	if err := tm.Start(f.t.Context()); err != nil {
		f.t.Fatalf("starting %s: %v", tm.id, err)
	}
	return tm
}

// waitCycles waits until m has ended n more cycles.
func waitCycles(t *testing.T, m *Manager, n int) {
	t.Helper()
	for range n {
		m.mu.Lock()
		ch := m.mu.cycled
		m.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no claims cycle within 10s")
		}
	}
}

// balanced reports why the managers do not hold every shard exactly once, each between lo
// and hi shards, according to their Reservable views.
func balanced(ms []*manager, total, lo, hi int) string {
	seen := map[int]string{}
	var problems []string
	for _, m := range ms {
		shards := m.shards()
		if len(shards) < lo || len(shards) > hi {
			problems = append(problems, fmt.Sprintf("%s holds %d shards; want %d to %d", m.id, len(shards), lo, hi))
		}
		for _, s := range shards {
			if other, ok := seen[s]; ok {
				problems = append(problems, fmt.Sprintf("shard %d held by %s and %s", s, other, m.id))
			}
			seen[s] = m.id
		}
	}
	if len(seen) != total {
		problems = append(problems, fmt.Sprintf("%d shards held; want %d", len(seen), total))
	}
	return strings.Join(problems, "; ")
}

// sampler checks continuously that no shard is reservable at two managers at once.
type sampler struct {
	mu struct {
		sync.Mutex
		ms []*manager
	}
	stop     chan struct{}
	done     chan struct{}
	rounds   atomic.Int64
	problems []string
}

func startSampler(ms ...*manager) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.ms = ms
	go s.run()
	return s
}

func (s *sampler) add(m *manager) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.ms = append(s.mu.ms, m)
}

func (s *sampler) run() {
	defer close(s.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		ms := slices.Clone(s.mu.ms)
		s.mu.Unlock()
		// One round reads every manager within microseconds; a shard moves from one to
		// another in no less than a renew interval, so two views of the same shard in one
		// round mean two owners at the same instant.
		start := time.Now()
		owner := map[int]string{}
		var round []string
		for _, m := range ms {
			for _, l := range m.Reservable() {
				if other, ok := owner[l.Shard]; ok {
					round = append(round, fmt.Sprintf("shard %d reservable at %s and %s (generation %d)", l.Shard, other, m.id, l.Generation))
				}
				owner[l.Shard] = fmt.Sprintf("%s (generation %d)", m.id, l.Generation)
			}
		}
		if time.Since(start) > 20*time.Millisecond {
			continue // descheduled in the middle: not one instant
		}
		s.rounds.Add(1)
		if len(round) > 0 && len(s.problems) < 20 {
			s.problems = append(s.problems, round...)
		}
	}
}

// finish stops the sampler and fails t if two managers ever served the same shard.
func (s *sampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	if len(s.problems) > 0 {
		t.Errorf("a shard was reservable at two managers at the same instant:\n%s", strings.Join(s.problems, "\n"))
	}
	t.Logf("sampled %d rounds", s.rounds.Load())
}

// control is a connection to the server's "postgres" database, to act on the test
// database from outside.
type control struct {
	t    *testing.T
	conn *pgx.Conn
	db   string // the test database, quoted
}

func (f *fixture) control() *control {
	f.t.Helper()
	u, err := url.Parse(f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	conn, err := pgx.Connect(f.t.Context(), u.String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close(context.Background()) })
	return &control{t: f.t, conn: conn, db: db}
}

func (c *control) exec(sql string, args ...any) {
	c.t.Helper()
	if _, err := c.conn.Exec(context.Background(), sql, args...); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
}

// cut makes the test database refuse connections and ends those it has.
func (c *control) cut() {
	c.t.Helper()
	c.exec("ALTER DATABASE " + pgx.Identifier{c.db}.Sanitize() + " ALLOW_CONNECTIONS false")
	c.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", c.db)
}

// restore lets the test database accept connections again.
func (c *control) restore() {
	c.t.Helper()
	c.exec("ALTER DATABASE " + pgx.Identifier{c.db}.Sanitize() + " ALLOW_CONNECTIONS true")
}
