package claims

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"

	opsqsql "opsq/sql"
)

// errNotRunning is returned by Drain when the loop is not running.
var errNotRunning = errors.New("claims: manager is not running")

// stopTimeout bounds the final release and deregistration of Stop.
const stopTimeout = 5 * time.Second

// PoolConnsDefault is the default of Config.PoolConns.
const PoolConnsDefault = 3

// Server-side bounds of every session of the Manager's own pool (DESIGN.md §4): a claims
// statement that waits on a lock, or a transaction left open by a paused instance, cannot
// hold anything for long.
const (
	poolStatementTimeout = "5s"
	poolConnectTimeout   = 2 * time.Second
)

// Config configures a Manager.
type Config struct {
	// Pool is the database. Required. The Manager runs nothing on it once started: Start
	// opens a small pool of its own from Pool's configuration (PoolConns connections), so
	// that renewals, heartbeats and settings reads never wait behind requests for a
	// connection of the request pool (DESIGN.md §8).
	Pool *pgxpool.Pool
	// PoolConns is the size of the Manager's own pool. Defaults to 3 (PoolConnsDefault).
	PoolConns int
	// Instance names this process in opsq.instances. Instance.ID is required.
	Instance Instance
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Report is called at each renewal for each shard held, and before a draining shard is
	// released: the owner's live reservations on it, and whether it knows of reservable
	// chunks there. Written into shard_claims.inflight and .available. A draining shard is
	// released once a Report taken at least half a renew interval after it stopped being
	// reservable returns 0, so a reservation must be counted within that time of the
	// Reservable call it started from. Called like OnLost. Defaults to (0, true).
	Report func(shard int) (inflight int, available bool)
	// OnLost is called with shards that stopped being this instance's: a renewal missed them
	// (another owner or an operator took them, or they were disabled), or they were released
	// after draining or at Stop. The queuer drops their reservations. Called from the
	// goroutine running a cycle (Start's for the first, then the loop's) or from Stop's,
	// one call at a time, without Manager locks held; it may call Reservable and Lease, not
	// Stop or Drain. Optional.
	OnLost func(shards []int)
	// OnAcquired is called with newly acquired shards, and with draining shards served
	// again because the target rose (the queuer wakes waiting consumers). Called like
	// OnLost. Optional.
	OnAcquired func(shards []int)
	// Abandon is called with shards about to be released while reservations may still be
	// in flight on them (a drain that reached drain_timeout, Drain's context ending, Stop),
	// before the release and while the claims still hold: the queuer records each
	// reservation left on them as a failed attempt, as if its lease had run out, written
	// under the lease's generation. The shards are no longer reservable. Called like
	// OnLost, with a context that bounds it. Optional.
	Abandon func(ctx context.Context, leases []Lease)
	// OnNode is called after each successful heartbeat (and after Register): this
	// instance's node id and until when, by the local monotonic clock, it certainly still
	// holds it (the start of the heartbeat + NodeReuseAfter/2). When the instance was
	// forgotten (ErrForgotten) the Manager registers again and reports the new node id.
	// Called like OnLost. Optional.
	OnNode func(node int, validUntil time.Time)
	// Home, on Citus, names the worker this instance is homed on, as pg_dist_node knows it
	// (nodename:nodeport; OPSQ_CITUS_HOME). Its claims then prefer the shards whose chunks
	// are placed there, and follow a shard move (home.go). Empty: no home, claims as
	// everywhere else.
	Home string
}

// Lease is a shard this instance holds, under the fencing generation it holds it with.
type Lease struct {
	Shard      int
	Generation int64
	// Draining: the shard is being handed back; no new reservations on it.
	Draining bool
}

// lease is the local state of a held shard.
type lease struct {
	generation int64
	// deadline is the local monotonic time after which the shard must not be served until
	// a renewal succeeds: the start of the last successful renewal + the soft expiry. The
	// database's soft_expires_at is never earlier, since its now() is read after it.
	deadline      time.Time
	draining      bool
	drainingSince time.Time
	inflight      int // as last reported
}

// Manager runs the shard-claim protocol of DESIGN.md §4 for one instance: it registers the
// instance, and every claim_renew_interval heartbeats, renews the shards it holds (fenced by
// generation), balances them against the other live instances (taking free or expired
// shards, draining its surplus) and releases what it drained. Its one loop goroutine (run
// by robfig/cron, never two cycles at once) lives from Start until Stop; canceling Start's
// ctx does not end it, so that Drain can still run after a SIGTERM canceled the root
// context. All methods are safe for concurrent use.
type Manager struct {
	cfg Config
	// pool is the Manager's own pool from Start on (Config.Pool before).
	pool *pgxpool.Pool
	// own is the pool Start opened, closed by Stop.
	own       *pgxpool.Pool
	closeOnce sync.Once
	log       *slog.Logger

	// interval is claim_renew_interval as last read, for the cron schedule.
	interval atomic.Int64
	// cycleMu serializes cycles and the final release of Stop.
	cycleMu sync.Mutex
	// publishMu is held by a cycle from its Report calls until the renewal's counts are
	// applied, and by Publish while it writes, so that a renewal never overwrites a
	// published count with a stale 0 (see Publish).
	publishMu sync.Mutex

	mu struct {
		sync.Mutex
		leases   map[int]*lease
		settings Settings
		node     int
		// opDraining: an operator drained the instance (opsq.instances.draining).
		opDraining bool
		// drainAll: Drain was called (at drainAllSince); the target is 0 for good.
		drainAll      bool
		drainAllSince time.Time
		// lastOK is when the last successful cycle began.
		lastOK   time.Time
		failures int // consecutive failed cycles
		started  bool
		stopped  bool
		cron     *cron.Cron
		cancel   context.CancelFunc
		// cycled is closed and replaced at the end of every cycle, for Drain.
		cycled chan struct{}
		// paused, when not nil, holds cycles until it is closed (test hook).
		paused chan struct{}
		// renewing: a cycle holds publishMu, between its Report calls and the renewal's
		// counts applied.
		renewing bool
		// home is the placement as last read when Config.Home is set (home.go).
		home homeMap
	}
	// stopping is closed when Stop begins; it releases a paused cycle.
	stopping chan struct{}
	// stats are the counters of Stats (stats.go).
	stats stats
}

// New returns a Manager; Start it.
func New(cfg Config) (*Manager, error) {
	if cfg.Pool == nil {
		return nil, errors.New("claims: Config.Pool is required")
	}
	if cfg.Instance.ID == "" {
		return nil, errors.New("claims: Config.Instance.ID is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.PoolConns = cmp.Or(cfg.PoolConns, PoolConnsDefault)
	if cfg.Report == nil {
		cfg.Report = func(int) (int, bool) { return 0, true }
	}
	m := &Manager{cfg: cfg, pool: cfg.Pool, log: cfg.Logger, stopping: make(chan struct{})}
	m.mu.leases = map[int]*lease{}
	m.mu.home.shunned = map[int]time.Time{}
	m.mu.cycled = make(chan struct{})
	return m, nil
}

// Start registers the instance, runs the first cycle (so that when Start returns the
// instance holds its share of whatever shards were free), and starts the loop. ctx bounds
// only this first work. If the first cycle fails, Start deregisters and returns the error.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.mu.started || m.mu.stopped {
		m.mu.Unlock()
		return errors.New("claims: manager already started")
	}
	// The pool connects lazily: opening it costs no round trip.
	own, err := pgxpool.NewWithConfig(ctx, m.poolConfig())
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("opening the claims pool: %w", err)
	}
	m.pool, m.own = own, own
	m.mu.started = true
	m.mu.Unlock()

	settings, err := m.loadSettings(ctx)
	if err != nil {
		m.markStopped()
		m.closePool()
		return err
	}
	m.setSettings(settings)
	if err := m.register(ctx); err != nil {
		m.markStopped()
		m.closePool()
		return err
	}
	if err := m.cycle(ctx); err != nil {
		m.markStopped()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if _, rerr := m.releaseAll(dctx); rerr != nil {
			m.log.WarnContext(ctx, "releasing shards after a failed start; they will expire", slog.Any("error", rerr))
		}
		if derr := Deregister(dctx, m.pool, m.cfg.Instance.ID); derr != nil {
			m.log.WarnContext(ctx, "deregistering instance", slog.Any("error", derr))
		}
		m.closePool()
		return fmt.Errorf("first claims cycle: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := cron.New(
		cron.WithLogger(cron.DiscardLogger),
		cron.WithChain(cron.Recover(cronLogger{m.log}), cron.SkipIfStillRunning(cron.DiscardLogger)),
	)
	c.Schedule(renewSchedule{m}, cron.FuncJob(func() { m.runCycle(runCtx) }))
	m.mu.Lock()
	if m.mu.stopped { // Stop ran during the first cycle
		m.mu.Unlock()
		cancel()
		return errNotRunning
	}
	m.mu.cron, m.mu.cancel = c, cancel
	m.mu.Unlock()
	c.Start()
	m.log.InfoContext(ctx, "claims manager started", slog.String("instance", m.cfg.Instance.ID),
		slog.Int("shards", len(m.Reservable())))
	return nil
}

// Stop ends the loop, releases every shard still held (those with reservations in
// flight after Abandon: a stopped instance never leaves its shards to expire), calls
// OnLost with them, and deregisters the instance. Call Drain first for a graceful
// shutdown, so that the reservations in flight may end first. Stop is safe twice and
// before Start; it must not be called from the callbacks.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.mu.started || m.mu.stopped {
		m.mu.stopped = true
		m.mu.Unlock()
		m.closePool()
		return
	}
	c, cancel := m.stopLoopLocked()
	m.mu.Unlock()
	if c != nil {
		<-c.Stop().Done()
		cancel()
	}

	ctx, cancelStop := context.WithTimeout(context.Background(), stopTimeout)
	defer cancelStop()
	if _, err := m.releaseAll(ctx); err != nil {
		m.log.WarnContext(ctx, "releasing shards at stop; they will expire", slog.Any("error", err))
	}
	if err := Deregister(ctx, m.pool, m.cfg.Instance.ID); err != nil {
		m.log.WarnContext(ctx, "deregistering instance", slog.Any("error", err))
	}
	m.closePool()
	m.log.InfoContext(ctx, "claims manager stopped", slog.String("instance", m.cfg.Instance.ID))
}

// poolConfig is Config.Pool's configuration for the Manager's own pool: PoolConns
// connections, each with a statement timeout, a lock timeout and an idle-in-transaction
// timeout, JIT off (sql.ConfigureSession), and a bounded connection attempt.
func (m *Manager) poolConfig() *pgxpool.Config {
	cfg := m.cfg.Pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(m.cfg.PoolConns), 0
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > poolConnectTimeout {
		cc.ConnectTimeout = poolConnectTimeout
	}
	cc.RuntimeParams["statement_timeout"] = poolStatementTimeout
	cc.RuntimeParams["lock_timeout"] = lockTimeout
	cc.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTxTimeout
	opsqsql.ConfigureSession(cc) // JIT off, as on every connection of an instance
	// No tracer: the claims loop serves no request, and its statements must not pay for
	// the request pool's (tracing.QueryTracer).
	cc.Tracer = nil
	return cfg
}

// closePool closes the pool Start opened, once.
func (m *Manager) closePool() {
	m.closeOnce.Do(func() {
		if m.own != nil {
			m.own.Close()
		}
	})
}

// stopLoopLocked marks the manager stopped and wakes whoever waits on it. m.mu is held.
func (m *Manager) stopLoopLocked() (*cron.Cron, context.CancelFunc) {
	m.mu.stopped = true
	close(m.stopping)
	close(m.mu.cycled)
	m.mu.cycled = make(chan struct{})
	return m.mu.cron, m.mu.cancel
}

func (m *Manager) markStopped() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.stopped {
		m.stopLoopLocked()
	}
}

// releaseAll releases every shard held, Abandon first. It returns how many shards it
// released.
func (m *Manager) releaseAll(ctx context.Context) (int, error) {
	m.cycleMu.Lock()
	defer m.cycleMu.Unlock()
	return m.giveUp(ctx, m.stopServing(), func(heldShard) bool { return true })
}

// releaseEmpty releases the held shards whose in-flight count (Report, taken now) is 0.
// Every held shard must have stopped being reservable at least half a renew interval
// before, so that a reservation begun just before is counted (see Config.Report).
func (m *Manager) releaseEmpty(ctx context.Context) (int, error) {
	m.cycleMu.Lock()
	defer m.cycleMu.Unlock()
	var empty []heldShard
	for _, h := range m.stopServing() {
		if inflight, _ := m.cfg.Report(h.shard); inflight == 0 {
			empty = append(empty, h)
		}
	}
	return m.giveUp(ctx, empty, func(heldShard) bool { return false })
}

// stopServing marks every held shard draining, so that no reservation starts on it, and
// returns them.
func (m *Manager) stopServing() []heldShard {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.mu.leases {
		if !l.draining {
			l.draining, l.drainingSince = true, now
		}
	}
	return m.snapshotLocked()
}

// giveUp releases shards this instance holds, fenced by generation: Abandon first with
// those on which reservations may be left (abandon says which), then the release, then
// OnLost. cycleMu is held. It returns how many shards it released.
func (m *Manager) giveUp(ctx context.Context, hs []heldShard, abandon func(heldShard) bool) (int, error) {
	if len(hs) == 0 {
		return 0, nil
	}
	var leases []Lease
	for _, h := range hs {
		if abandon(h) {
			leases = append(leases, Lease{Shard: h.shard, Generation: h.generation, Draining: true})
		}
	}
	if len(leases) > 0 && m.cfg.Abandon != nil {
		m.cfg.Abandon(ctx, leases)
	}
	released, err := m.release(ctx, hs)
	if err != nil {
		return 0, fmt.Errorf("releasing %d shards: %w", len(hs), err)
	}
	m.forget(hs)
	m.stats.released.Add(int64(len(released)))
	if len(released) > 0 {
		m.log.InfoContext(ctx, "released shards", slog.Any("shards", released))
	}
	m.notifyLost(heldShards(hs))
	return len(released), nil
}

// Drain starts a graceful shutdown (DESIGN.md §4): from now on no shard is reservable,
// the instance is marked draining in opsq.instances (so the others take over its shards)
// and claims nothing more. Half a renew interval later (once a reservation begun before
// is counted) it releases every shard with nothing in flight, and each cycle releases
// those whose in-flight count has reached 0 since. Drain returns nil when every shard is
// released. When ctx ends first (pass a context bounded by drain_timeout, and cancel it to
// skip the wait), it releases every shard still held, Abandon first, and returns an error
// wrapping ctx's. Call Stop afterwards.
func (m *Manager) Drain(ctx context.Context) error {
	m.mu.Lock()
	if !m.mu.started || m.mu.stopped {
		m.mu.Unlock()
		return errNotRunning
	}
	if !m.mu.drainAll {
		m.mu.drainAll = true
		m.mu.drainAllSince = time.Now()
		m.log.InfoContext(ctx, "draining all shards", slog.Int("shards", len(m.mu.leases)))
	}
	settledAt := m.mu.drainAllSince.Add(m.mu.settings.RenewInterval / 2)
	m.mu.Unlock()
	m.stopServing()
	settled := time.NewTimer(time.Until(settledAt))
	defer settled.Stop()
	for {
		m.mu.Lock()
		left, stopped, cycled := len(m.mu.leases), m.mu.stopped, m.mu.cycled
		m.mu.Unlock()
		switch {
		case left == 0:
			return nil
		case stopped:
			return errNotRunning
		}
		select {
		case <-ctx.Done():
			return m.abandonRest(ctx, left)
		case <-settled.C:
			if _, err := m.releaseEmpty(ctx); err != nil && ctx.Err() == nil {
				m.log.WarnContext(ctx, "releasing the drained shards with nothing in flight; the next cycles try again", slog.Any("error", err))
			}
		case <-cycled:
		}
	}
}

// abandonRest releases what a Drain whose ctx ended leaves: every shard, Abandon first.
func (m *Manager) abandonRest(ctx context.Context, left int) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	n, err := m.releaseAll(rctx)
	if err != nil {
		return fmt.Errorf("draining: %d shards still held; releasing them: %w (%w)", left, err, ctx.Err())
	}
	m.log.InfoContext(ctx, "drain ended with reservations in flight: released the shards they were on",
		slog.Int("shards", n), slog.Any("cause", ctx.Err()))
	return fmt.Errorf("draining: released %d shards with reservations in flight: %w", n, ctx.Err())
}

// Reservable returns the shards to reserve chunks from now, ordered by shard: held, not
// draining, and within the local deadline (the last successful renewal's start + the soft
// expiry). When renewals fail, shards drop out as their deadlines pass and come back only
// after a successful renewal.
func (m *Manager) Reservable() []Lease {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, 0, len(m.mu.leases))
	for shard, l := range m.mu.leases {
		if !l.draining && now.Before(l.deadline) {
			out = append(out, Lease{Shard: shard, Generation: l.generation})
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.Shard, b.Shard) })
	return out
}

// Lease reports whether the instance holds shard (active or draining) within the local
// deadline, and under which generation: the check before completing or extending a
// reservation on it.
func (m *Manager) Lease(shard int) (Lease, bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.mu.leases[shard]
	if !ok || !now.Before(l.deadline) {
		return Lease{}, false
	}
	return Lease{Shard: shard, Generation: l.generation, Draining: l.draining}, true
}

// Running returns nil while the loop runs and its last successful cycle began less than a
// soft expiry ago; for /readyz.
func (m *Manager) Running() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.mu.started:
		return errors.New("claims loop not started")
	case m.mu.stopped:
		return errors.New("claims loop stopped")
	}
	if since := time.Since(m.mu.lastOK); since >= m.mu.settings.SoftExpiry {
		return fmt.Errorf("claims loop: no successful renewal for %s (%d failed cycles)",
			since.Round(time.Millisecond), m.mu.failures)
	}
	return nil
}

// Settings returns opsq.settings as last read (at Start, then at every cycle).
func (m *Manager) Settings() Settings {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.settings
}

func (m *Manager) setSettings(s Settings) {
	m.mu.Lock()
	m.mu.settings = s
	m.mu.Unlock()
	m.interval.Store(int64(s.RenewInterval))
}

// loadSettings reads opsq.settings and checks the claim timings against each other.
func (m *Manager) loadSettings(ctx context.Context) (Settings, error) {
	s, err := LoadSettings(ctx, m.pool)
	if err != nil {
		return Settings{}, err
	}
	return s, s.checkClaims()
}

// checkClaims reports claim timings that would break the protocol.
func (s Settings) checkClaims() error {
	switch {
	case s.RenewInterval >= s.SoftExpiry:
		return fmt.Errorf("opsq.settings: claim_renew_interval (%s) must be shorter than claim_soft_expiry (%s)",
			s.RenewInterval, s.SoftExpiry)
	case s.SoftExpiry > s.HardExpiry:
		return fmt.Errorf("opsq.settings: claim_soft_expiry (%s) must not be longer than claim_hard_expiry (%s)",
			s.SoftExpiry, s.HardExpiry)
	case s.RenewInterval >= s.HeartbeatTimeout:
		return fmt.Errorf("opsq.settings: claim_renew_interval (%s) must be shorter than instance_heartbeat_timeout (%s)",
			s.RenewInterval, s.HeartbeatTimeout)
	}
	return nil
}

// renewSchedule is the cron schedule of the loop: the next cycle one claim_renew_interval
// (as last read) after the previous one began, so that a changed interval applies at once.
type renewSchedule struct{ m *Manager }

func (s renewSchedule) Next(t time.Time) time.Time {
	return t.Add(time.Duration(s.m.interval.Load()))
}

// cronLogger reports a recovered panic of a cycle.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(string, ...any) {}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("claims cycle: "+msg, append([]any{slog.Any("error", err)}, kv...)...)
}

// runCycle is the cron job: one cycle, its failure logged.
func (m *Manager) runCycle(ctx context.Context) {
	m.mu.Lock()
	paused := m.mu.paused
	m.mu.Unlock()
	if paused != nil {
		select {
		case <-paused:
		case <-m.stopping:
			return
		}
	}
	select {
	case <-m.stopping:
		return
	default:
	}
	// A cycle longer than the soft expiry is useless: everything it renews has expired.
	cctx, cancel := context.WithTimeout(ctx, max(m.Settings().SoftExpiry, time.Second))
	defer cancel()
	if err := m.cycle(cctx); err != nil {
		m.mu.Lock()
		m.mu.failures++
		failures := m.mu.failures
		m.mu.Unlock()
		level := slog.LevelWarn
		if failures > 1 {
			level = slog.LevelDebug // logged once per outage
		}
		m.log.Log(ctx, level, "claims cycle failed; shards stay held until their local deadlines",
			slog.Any("error", err), slog.Int("failed_cycles", failures))
	}
}

// register adds the instance to opsq.instances and reports its node id.
func (m *Manager) register(ctx context.Context) error {
	started := time.Now()
	node, err := Register(ctx, m.pool, m.cfg.Instance)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.mu.node = node
	m.mu.Unlock()
	m.log.InfoContext(ctx, "instance registered", slog.String("instance", m.cfg.Instance.ID), slog.Int("node_id", node))
	if m.cfg.OnNode != nil {
		m.cfg.OnNode(node, started.Add(NodeReuseAfter/2))
	}
	return nil
}

func (m *Manager) notifyLost(shards []int) {
	if len(shards) > 0 && m.cfg.OnLost != nil {
		m.cfg.OnLost(shards)
	}
}
