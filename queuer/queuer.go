// Package queuer is the per-instance engine of opsq, and its one door: the API, the
// dashboard, the CLI and the bench reach the engine through this package alone. It is a
// façade that wires the parts, owns the instance's lifecycle (Start, Stop, Ready, Drain),
// orchestrates a reserve (look here, then forward, then wait: reserve.go) and hands each
// other request to the part that owns it, by a verb named for what the caller asks
// (produce.go, consume.go, operate.go, throttle.go). The parts live under queuer/internal,
// so Go keeps every other package out; each owns its state and never imports this one:
//
//   - submissions: the submission rows — submit, status, waits, list, cancel, results,
//     failures, retry, pause, retention, the moves by slices, ids, and the promotion of
//     waiting chunks;
//   - handout: the reserve path — the strategy walk, the candidate scans, the take and its
//     admission checks, buffers, resume hints, tombstones, shared runs, the submission-info
//     cache, max_simultaneous holds, rate_limit tokens, weighted_fair rings, preview;
//   - peers: where other instances have work, and the peer transport (forwarded reserves,
//     extends and give-backs, signed) and the check of a forwarded request;
//   - outcome: the batched completer, fail, extend, and the leases that ran out;
//   - waiters: the queue of waiting reserves and the waits on a submission, under one
//     admission bound;
//   - tokens: reservation tokens and the cluster keys that sign them;
//   - notify: the event protocol (what changed, raised once and handed to every part that
//     caches something about it), the NOTIFY channels and their payloads, and the one
//     LISTEN connection, shared with the API keys;
//   - admin: the cluster as an operator reads and administers it;
//   - valuerates: the chunks handed out per value of the keys limited, over the last
//     minute, for the dashboard.
//
// Beside them, usable by every layer: opsqtype (the vocabulary the engine, the wire and
// the clients share), startstop (the one Start/Stop shape of every background part, and
// the cron jobs), identity (who a request is served for) and panics. The claims protocol
// (claims), the in-memory reservations (reserver), the strategies (strategy) and the
// statements (sql) are packages of their own. layering_test.go holds these rules.
package queuer

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	"opsq/queuer/identity"
	"opsq/queuer/internal/admin"
	"opsq/queuer/internal/handout"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/peers"
	"opsq/queuer/internal/schedules"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/throttles"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/valuerates"
	"opsq/queuer/internal/waiters"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Defaults of Config.
const (
	RetentionScheduleDefault = "@every 1m"
	// MaxWaitersDefault is the default of Config.MaxWaiters.
	MaxWaitersDefault = waiters.MaxDefault
	// MaxPauseChunksPerMinuteDefault is the default of Config.MaxPauseChunksPerMinute.
	MaxPauseChunksPerMinuteDefault = submissions.MaxMovesPerMinuteDefault
)

// Config configures a Queuer.
type Config struct {
	// Pool is the database, for every statement but the candidate queries and the claims
	// protocol, which run on pools of their own made from its configuration. Configure its
	// connections with sql.ConfigureSession, as opsq serve does. Required.
	Pool *pgxpool.Pool
	// Instance names this process in opsq.instances. Instance.ID is required.
	Instance claims.Instance
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// RetentionSchedule is the cron schedule of the retention job. Defaults to "@every 1m".
	RetentionSchedule string
	// ThrottleAckWait bounds how long POST /v1/throttle waits for every other instance that
	// holds shards to have the throttle in force (throttles.AckWaitDefault, 2 s, when 0).
	ThrottleAckWait time.Duration
	// MaxWaiters bounds the requests that wait on this instance: reserves with a wait and
	// status waits together; beyond it they get ErrTooManyWaiters. Defaults to 20 000
	// (MaxWaitersDefault).
	MaxWaiters int
	// MaxWaitersPerKey bounds the waiting requests of one API key (by its name), so that
	// no key takes every slot; beyond it its requests get ErrTooManyWaiters. 0 or less:
	// half of MaxWaiters (DESIGN.md §8). Requests without a key (OPSQ_AUTH=off) count
	// against MaxWaiters only.
	MaxWaitersPerKey int
	// MaxPauseChunksPerMinute bounds the chunks one API key (by its name; the requests
	// without a key together) moves by pauses and resumes in any minute on this instance;
	// beyond, a pause or resume gets a *MoveBusyError. Defaults to 2 000 000
	// (MaxPauseChunksPerMinuteDefault).
	MaxPauseChunksPerMinute int64
	// CitusHome, on Citus, names the worker this instance is homed on (pg_dist_node's
	// nodename:nodeport; OPSQ_CITUS_HOME): its claims prefer the shards placed there and
	// follow their moves (claims.Config.Home), and its candidate queries run on that
	// worker's connections (handout.Config.ScanNode). Empty: no home.
	CitusHome string
	// PeerTLS is the TLS configuration of the calls to other instances (their https://
	// advertise URLs); nil uses the system's roots.
	PeerTLS *tls.Config
	// Clock tells the time of leases, retention and forwarding tips; tests move it by hand.
	// Defaults to the system's clock.
	Clock Clock
	// Notified are other parts' channels that the instance's one LISTEN connection listens
	// on too (the API keys'), each with the function that hears its payloads; it is called
	// with "" after a reconnection, when notifications may have been missed.
	Notified map[string]func(payload string)
}

// Queuer is one instance's engine. It is safe for concurrent use. Its services' goroutines
// (the NOTIFY listener, the keyring's refresh, the completer, the expiry loop, the claims
// loop and the cron jobs) live from Start until Stop.
type Queuer struct {
	cfg        Config
	log        *slog.Logger
	shardCount int
	claims     *claims.Manager
	reserver   *reserver.Reserver
	bus        notify.Bus
	ids        *submissions.IDs
	waiting    *waiters.Queue // the reserves waiting for work, and the admission bound

	subs      *submissions.Store
	reserve   *handout.Path
	router    *peers.Router
	outcomes  *outcome.Recorder
	keys      *tokens.Keyring
	forwards  *peers.Verifier // checks forwarded requests, each once
	admin     *admin.Admin
	listener  *notify.Listener
	promoter  *submissions.Promoter   // waiting chunks that are due become reservable
	deps      *submissions.Dependents // children start (or are cancelled) when their parents finish
	throttle  *throttles.Throttles    // consumers' back-pressure in force
	schedules *schedules.Store        // the tenants' schedules, whose due runs firer makes
	firer     *schedules.Firer
	// scheduleRuns counts the runs recorded here, by outcome, for metrics.
	scheduleRuns runCounter
	jobs         *startstop.Cron
	seen         *admin.Seen           // when each consumer name last asked for work here
	activity     *admin.ActivityWriter // completions per minute and who is working, for the dashboard
	// valueRates counts the chunks handed out per value of the keys limited, for the
	// dashboard (published by activity).
	valueRates *valuerates.Counter

	draining atomic.Bool

	mu struct {
		sync.Mutex
		started bool
		stopped bool
		// services are the parts started, in order; Stop stops them in reverse.
		services []startstop.Service
	}
}

// Every background part has the one lifecycle shape.
var (
	_ startstop.Service = (*claims.Manager)(nil)
	_ startstop.Service = (*notify.Listener)(nil)
	_ startstop.Service = (*tokens.Keyring)(nil)
	_ startstop.Service = (*handout.Path)(nil)
	_ startstop.Service = (*outcome.Recorder)(nil)
	_ startstop.Service = (*startstop.Cron)(nil)
	_ startstop.Service = (*admin.ActivityWriter)(nil)
	_ startstop.Service = (*schedules.Firer)(nil)

	// The submissions store moves the chunks of a large submission that a fail failed.
	_ outcome.Slicer = (*submissions.Store)(nil)
)

// New returns a Queuer; Start it before use. It reads the cluster's settings (the number
// of shards, fixed at the first migration, which every part is built with).
func New(ctx context.Context, cfg Config) (*Queuer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("queuer: Config.Pool is required")
	}
	if cfg.Instance.ID == "" {
		return nil, errors.New("queuer: Config.Instance.ID is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.RetentionSchedule = cmp.Or(cfg.RetentionSchedule, RetentionScheduleDefault)
	// A schedule's runs are counted by the database's clock, unless a test moves a clock.
	var scheduleNow func() time.Time
	if cfg.Clock != nil {
		scheduleNow = cfg.Clock.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	settings, err := claims.LoadSettings(ctx, cfg.Pool)
	if err != nil {
		return nil, err
	}
	if citus, err := opsqsql.DetectLayout(ctx, cfg.Pool); err != nil {
		return nil, fmt.Errorf("queuer: reading the layout of opsq's tables: %w", err)
	} else if citus {
		cfg.Logger.Info("opsq's tables are Citus tables: the statements Citus needs in another shape run in that shape")
	}
	pool, log, now, shards := cfg.Pool, cfg.Logger, cfg.Clock.Now, settings.ShardCount
	scanNode := "" // the candidate queries' node: on Citus, the home worker's
	if opsqsql.OnCitus() {
		scanNode = cfg.CitusHome
	}
	q := &Queuer{
		cfg: cfg, log: log, shardCount: shards, ids: submissions.NewIDs(), reserver: reserver.New(reserver.Config{}),
		waiting: waiters.New(cfg.MaxWaiters, cfg.MaxWaitersPerKey), keys: tokens.NewKeyring(pool, log),
	}
	q.forwards = peers.NewVerifier(q.keys, cfg.Instance.ID, 0)
	manager, err := claims.New(claims.Config{
		Pool:     pool,
		Instance: cfg.Instance,
		Logger:   log,
		Report: func(shard int) (int, bool) {
			return q.reserver.InflightShard(shard), q.router.Available(shard)
		},
		OnLost:     func(shards []int) { q.bus.Raise(notify.ShardsChanged{Lost: shards}) },
		OnAcquired: func(shards []int) { q.bus.Raise(notify.ShardsChanged{Acquired: shards}) },
		Abandon:    q.abandon,
		OnNode:     q.ids.SetNode,
		Home:       cfg.CitusHome,
	})
	if err != nil {
		return nil, err
	}
	q.claims = manager
	q.router = peers.New(peers.Config{Pool: pool, ShardCount: shards, Instance: cfg.Instance.ID, Log: log, Now: now, Claims: manager, Keys: q.keys, PeerTLS: cfg.PeerTLS})
	q.throttle = throttles.New(throttles.Config{Pool: pool, Log: log, Bus: &q.bus, Instance: cfg.Instance.ID, AckWait: cfg.ThrottleAckWait})
	q.valueRates = valuerates.New(nil)
	q.reserve = handout.New(handout.Config{Pool: pool, ScanNode: scanNode, ShardCount: shards, Log: log, Now: now, Claims: manager, Reserver: q.reserver,
		Keys: q.keys, Bus: &q.bus, Availability: q.router, Throttles: q.throttle, ValueRates: q.valueRates, Wake: q.waiting.Wake})
	q.subs = submissions.New(submissions.Config{Pool: pool, ShardCount: shards, Log: log, Now: now, IDs: q.ids, Admission: q.waiting, Bus: &q.bus,
		Instance: cfg.Instance.ID, MaxMovesPerMinute: cfg.MaxPauseChunksPerMinute, Ingested: q.reserve.AfterIngest})
	q.outcomes = outcome.New(outcome.Config{Pool: pool, ShardCount: shards, Log: log, Now: now, Instance: cfg.Instance.ID, Claims: manager,
		Reserver: q.reserver, Keys: q.keys, Router: q.router, Holds: q.reserve, Bus: &q.bus, Slicer: q.subs})
	q.admin = admin.New(pool, manager)
	q.seen = admin.NewSeen()
	q.activity = admin.NewActivityWriter(admin.ActivityConfig{Pool: pool, Instance: cfg.Instance.ID, Log: log, Now: now,
		Counts: func() (int64, int64) {
			completed, failed, expired := q.outcomes.Counts()
			return completed, failed + expired
		},
		Consumers: q.reserver.Consumers, Seen: q.seen, ValueRates: q.valueRates})
	// Every event goes to every part that caches something it changes; the waiters last,
	// so that a waiter woken finds the caches up to date.
	q.deps = submissions.NewDependents(q.subs)
	q.bus.Subscribe(q.reserve, q.router, q.subs, q.deps, notify.HandlerFunc(q.keysChanged), q.throttle, q.waiting)
	q.listener = notify.NewListener(pool, log, &q.bus, cfg.Notified, freedByToken)
	q.promoter = submissions.NewPromoter(pool, log, q.heldShards)
	q.schedules = schedules.New(schedules.Config{Pool: pool, Log: log, Submitter: q.subs, Now: scheduleNow, OnRun: q.scheduleRuns.add,
		Ready: func() bool { return !q.draining.Load() && q.ids.Valid(time.Now()) }})
	q.firer = q.schedules.Firer()
	q.jobs = startstop.NewCron(append([]startstop.Job{
		{What: fmt.Sprintf("retention %q", cfg.RetentionSchedule), Schedule: cfg.RetentionSchedule, Run: q.subs.RunRetention},
		{What: "the deletion of the throttles that ended", Schedule: throttles.CollectSchedule, Run: q.throttle.Collect},
		{What: "the resumption of cancels and fails whose move by slices was cut", Schedule: submissions.ResumeSchedule, Run: q.subs.ResumeSlices},
	}, q.reserve.Jobs()...)...)
	return q, nil
}

// freedByToken reads the token of a chunk released, as a NOTIFY names it
// (notify.TokenReader).
func freedByToken(tok string) (notify.Freed, bool) {
	t, err := tokens.Parse(tok)
	return notify.Freed{Key: t.Key, Shard: t.Shard, Retries: t.Retries, Token: tok}, err == nil
}

// keysChanged reloads the cluster keys soon after a rotation was announced, or after
// notifications may have been missed.
func (q *Queuer) keysChanged(e notify.Event) {
	switch e.(type) {
	case notify.ClusterKeysChanged, notify.Resync:
		q.keys.Refresh()
	}
}

// Start claims shards and starts the goroutines.
func (q *Queuer) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.started {
		return errors.New("queuer: already started")
	}
	if err := q.keys.Load(ctx); err != nil {
		return err
	}
	// The listener first, so that no NOTIFY about shards acquired by the claims manager is
	// missed; the cron jobs last. Stop stops them in reverse: the activity writer after the
	// completer, so that its last write counts the completer's last batch.
	services := []startstop.Service{q.listener, q.keys, q.throttle, q.activity, q.reserve, q.outcomes, q.claims, q.promoter, q.deps, q.firer, q.jobs}
	if err := startstop.StartAll(ctx, services); err != nil {
		return err
	}
	q.mu.started, q.mu.services = true, services
	return nil
}

// Settings returns the cluster-wide settings as last read.
func (q *Queuer) Settings() claims.Settings { return q.claims.Settings() }

// Drain is the graceful shutdown of DESIGN.md §4, up to the exit: reserve nothing more
// (the reserves waiting here answer no chunks at once, and new ones do not wait), answer
// the status waits with the state as it is, release each shard once its reservations are
// completed, failed or expired, and when ctx ends (drain_timeout, or a second signal)
// release the shards still held, their reservations abandoned: each counts one failed
// attempt, as if its lease had run out, and its chunk is reservable elsewhere after its
// backoff. Complete, fail and extend keep working meanwhile. It returns nil when every
// reservation ended before ctx did.
func (q *Queuer) Drain(ctx context.Context) error {
	q.draining.Store(true)
	q.waiting.Broadcast() // waiting reserves see the drain and answer no chunks
	q.subs.EndWaits()
	return q.claims.Drain(ctx)
}

// abandon records the reservations still held on shards about to be released
// (claims.Config.Abandon): those made under the lease's generation, each a failed attempt
// as an expired lease is.
func (q *Queuer) abandon(ctx context.Context, leases []claims.Lease) {
	var rs []reserver.Reservation
	shards := 0
	for _, l := range leases {
		before := len(rs)
		for _, r := range q.reserver.ShardReservations(l.Shard) {
			if r.Generation == l.Generation {
				rs = append(rs, r)
			}
		}
		if len(rs) > before {
			shards++
		}
	}
	if len(rs) == 0 {
		return
	}
	n := q.outcomes.Abandon(ctx, rs)
	q.log.Warn("shards released with reservations in flight: each counts a failed attempt, and its chunk is reservable again after its backoff",
		slog.Int("shards", shards), slog.Int("reservations", len(rs)), slog.Int("recorded", n))
}

// Stop ends the goroutines, releases the shards (the reservations still held on them
// abandoned, as in Drain) and deregisters the instance. It is safe twice and before Start.
func (q *Queuer) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.mu.started || q.mu.stopped {
		return
	}
	q.mu.stopped = true
	q.draining.Store(true)
	q.waiting.Broadcast()
	q.subs.EndWaits()
	startstop.StopAll(q.mu.services)
}

// Ready reports whether the instance can serve: the database answers, the claims loop
// runs, and the instance holds a confirmed node id.
func (q *Queuer) Ready(ctx context.Context) error {
	if err := q.cfg.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if q.draining.Load() {
		return errors.New("draining: shutting down")
	}
	if err := q.claims.Running(); err != nil {
		return err
	}
	if !q.ids.Valid(time.Now()) {
		return submissions.ErrNodeLease
	}
	return nil
}

// VerifyForwarded checks the signature of a request that another instance says it
// forwarded here (once: a replay of it is refused) and returns the caller's identity it
// carries (ok false: none), or an error wrapping ErrForwardedSignature.
func (q *Queuer) VerifyForwarded(method, uri string, f Forwarded, body []byte) (id identity.Caller, ok bool, err error) {
	return q.forwards.Verify(method, uri, f, body, time.Now())
}

// VerifyForwardedHead is VerifyForwarded on the headers alone, before the body is read:
// the signature covers f.Digest, which the body read afterwards must match
// (ForwardedDigest).
func (q *Queuer) VerifyForwardedHead(method, uri string, f Forwarded) (id identity.Caller, ok bool, err error) {
	return q.forwards.VerifyHead(method, uri, f, time.Now())
}

// ForwardedDigest is the digest header a forwarded request with body carries.
func ForwardedDigest(body []byte) string { return peers.Digest(body) }

// heldShards are the shards this instance reserves from now (claims.Manager.Reservable).
func (q *Queuer) heldShards() []int32 {
	leases := q.claims.Reservable()
	shards := make([]int32, len(leases))
	for i, l := range leases {
		shards[i] = int32(l.Shard)
	}
	return shards
}
