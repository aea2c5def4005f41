// Package queuer is the per-instance engine of opsq: it inserts submissions, answers status
// and results, reserves chunks from the shards this instance claims (an in-memory
// reserver: reserving writes nothing), records completions and failures, forwards
// consumers to instances that have work, wakes long-polls by LISTEN/NOTIFY, and runs the
// periodic jobs (robfig/cron/v3).
//
// The Queuer is a façade over parts that each own their state: submissions (the submission
// rows), completer (the completions waiting to be written), router (where work is, and
// forwarding), holds (the max_simultaneous slots), expirer (leases that ran out), planStats
// (the planner's row counts of the instance's chunk partitions), cronJobs (the periodic
// jobs), Keyring (the cluster keys) and listener (the LISTEN connection).
// Those with goroutines share one lifecycle shape, service: Queuer.Start starts them in
// order and Queuer.Stop stops them in reverse.
package queuer

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Defaults of Config.
const (
	RetentionScheduleDefault = "@every 1m"
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
	// MaxWaiters bounds the requests that wait on this instance: reserves with a wait and
	// status waits together; beyond it they get ErrTooManyWaiters. Defaults to 20 000
	// (MaxWaitersDefault).
	MaxWaiters int
	// PeerTLS is the TLS configuration of the calls to other instances (their https://
	// advertise URLs); nil uses the system's roots.
	PeerTLS *tls.Config
	// Clock tells the time of leases, retention and forwarding tips; tests move it by hand.
	// Defaults to the system's clock.
	Clock Clock
}

// Queuer is one instance's engine: a façade that starts its parts and hands each request
// to the part that owns it. It owns the reserve path (the reservations, the runs that fill
// them and the queue of reserves waiting for work) and the dispatch of notifications and
// claim changes to the parts; the submissions store, the completer, the router, the
// expirer, the cron jobs, the holds, the keyring and the listener own the rest. It is safe
// for concurrent use. Its services' goroutines (the claims loop, the NOTIFY listener, the
// keyring's refresh, the completer, the expiry loop and the cron jobs) live from Start
// until Stop.
type Queuer struct {
	cfg        Config
	pool       *pgxpool.Pool
	scans      *pgxpool.Pool // candidate queries: cached generic plans (see Start)
	log        *slog.Logger
	ids        *idGenerator
	shardCount int
	claims     *claims.Manager

	// The reserve path.
	reserver *reserver.Reserver
	work     *signal // new or released work, acquired shards
	shared   *shared // the reserves sharing a run
	infos    *infoCache
	tombs    *tombstones
	hints    *hints   // resume hints of ordered scans
	buffers  *buffers // the next candidates of the leaves scanned (buffer.go)

	// The parts.
	subs      *submissions
	completer *completer
	router    *router // where work is; forwarding
	holds     *holds
	planStats *planStats
	keys      *Keyring // signs and verifies tokens
	listener  *opsqsql.Listener
	expirer   *expirer
	jobs      *cronJobs

	draining     atomic.Bool
	count        counters
	clusterStats clusterStatsCache // ClusterStats' cache (metrics.go)

	mu struct {
		sync.Mutex
		started bool
		stopped bool
		// services are the parts started, in order; Stop stops them in reverse.
		services []service
	}
}

// New returns a Queuer; Start it before use.
func New(cfg Config) (*Queuer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("queuer: Config.Pool is required")
	}
	if cfg.Instance.ID == "" {
		return nil, errors.New("queuer: Config.Instance.ID is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.RetentionSchedule = cmp.Or(cfg.RetentionSchedule, RetentionScheduleDefault)
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	q := &Queuer{
		cfg: cfg, pool: cfg.Pool, log: cfg.Logger, ids: newIDGenerator(),
		reserver: reserver.New(reserver.Config{}), work: newSignal(cfg.MaxWaiters), shared: newShared(),
		keys: NewKeyring(cfg.Pool, cfg.Logger), infos: newInfoCache(cfg.Pool), tombs: newTombstones(), hints: newHints(),
	}
	q.buffers = newBuffers(q.tombs)
	q.router = newRouter(cfg.Pool, cfg.Instance.ID, q.keys, cfg.PeerTLS, cfg.Logger)
	q.router.clock = cfg.Clock
	q.holds = &holds{pool: cfg.Pool, log: cfg.Logger}
	q.subs = newSubmissions(cfg.Pool, cfg.Logger, q.ids, q.work)
	q.subs.clock = cfg.Clock
	q.completer = newCompleter(cfg.Pool, q.reserver, q.tombs, q.readToken)
	q.expirer = newExpirer(q.reserver, cfg.Clock, q.expire)
	q.jobs = &cronJobs{jobs: []cronJob{
		{what: fmt.Sprintf("retention %q", cfg.RetentionSchedule), schedule: cfg.RetentionSchedule, run: q.subs.runRetention},
		{what: "the collection of max_simultaneous holds", schedule: holdsCollectSchedule, run: q.holds.collect},
		{what: "the planner's statistics of the chunk partitions", schedule: planStatsSchedule, run: func(ctx context.Context) { q.planStats.refresh(ctx) }},
	}}
	manager, err := claims.New(claims.Config{
		Pool:     cfg.Pool,
		Instance: cfg.Instance,
		Logger:   cfg.Logger,
		Report: func(shard int) (int, bool) {
			return q.reserver.InflightShard(shard), q.router.available(shard)
		},
		OnLost:     q.onLost,
		OnAcquired: q.onAcquired,
		OnNode:     q.ids.setNode,
	})
	if err != nil {
		return nil, err
	}
	q.claims = manager
	q.router.claims = manager
	q.planStats = &planStats{pool: cfg.Pool, claims: manager, log: cfg.Logger}
	q.listener = opsqsql.NewListener(cfg.Pool, cfg.Logger, q.onNotification, ChannelFinished, ChannelWork, ChannelReleased, ChannelClusterKeys)
	return q, nil
}

// Start claims shards and starts the goroutines.
func (q *Queuer) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.started {
		return errors.New("queuer: already started")
	}
	settings, err := claims.LoadSettings(ctx, q.pool)
	if err != nil {
		return err
	}
	q.shardCount = settings.ShardCount
	q.subs.shardCount = settings.ShardCount
	if err := q.keys.Load(ctx); err != nil {
		return err
	}
	// Candidate queries run on their own connections, which keep one generic plan per
	// query text and stream it through the partitions' indexes whatever the backlog's
	// statistics say; JIT is off on them whatever the caller's pool says
	// (sql.ConfigureCandidateSession says why). Other statements keep PostgreSQL's default
	// planning.
	scanCfg := q.pool.Config().Copy()
	opsqsql.ConfigureCandidateSession(scanCfg.ConnConfig)
	scanCfg.MaxConns = max(q.pool.Config().MaxConns/2, 4)
	if q.scans, err = pgxpool.NewWithConfig(ctx, scanCfg); err != nil {
		return fmt.Errorf("connecting the candidate pool: %w", err)
	}
	// The listener first, so that no NOTIFY about shards acquired by the claims manager is
	// missed; the cron jobs last. Stop stops them in reverse.
	services := []service{q.listener, q.keys, q.completer, q.expirer, q.claims, q.jobs}
	if err := startAll(ctx, services); err != nil {
		q.scans.Close()
		return err
	}
	q.mu.started, q.mu.services = true, services
	return nil
}

// Settings returns the cluster-wide settings as last read.
func (q *Queuer) Settings() claims.Settings { return q.claims.Settings() }

// Drain is the first step of a graceful shutdown: reserve nothing more, and release each
// shard once its reservations are completed, failed or expired, until ctx ends. Complete
// and fail keep working meanwhile.
func (q *Queuer) Drain(ctx context.Context) error {
	q.draining.Store(true)
	q.work.broadcast() // waiting reserves look again, and find nothing here
	return q.claims.Drain(ctx)
}

// Stop ends the goroutines, releases the shards without reservations and deregisters the
// instance. It is safe twice and before Start.
func (q *Queuer) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.mu.started || q.mu.stopped {
		return
	}
	q.mu.stopped = true
	stopAll(q.mu.services)
	q.buffers.stop()
	q.scans.Close()
	q.subs.finished.wakeAll()
	q.work.broadcast()
}

// VerifyForwarded checks the signature of a request that another instance says it
// forwarded here (forwardsig.go): nil, or an error wrapping ErrForwardedSignature.
func (q *Queuer) VerifyForwarded(method, uri, from string, body []byte, sig string) error {
	return q.keys.VerifyForwarded(method, uri, from, body, sig, time.Now())
}

// Ready reports whether the instance can serve: the database answers, the claims loop
// runs, and the instance holds a confirmed node id.
func (q *Queuer) Ready(ctx context.Context) error {
	if err := q.pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if q.draining.Load() {
		return errors.New("draining: shutting down")
	}
	if err := q.claims.Running(); err != nil {
		return err
	}
	if !q.ids.valid(time.Now()) {
		return errNodeLease
	}
	return nil
}

// Cluster describes the instances and their claims, for GET /v1/cluster.
func (q *Queuer) Cluster(ctx context.Context) (claims.Cluster, error) {
	return claims.LoadCluster(ctx, q.pool)
}

// onLost drops the reservations of shards that are no longer ours.
func (q *Queuer) onLost(shards []int) {
	q.hints.clear()
	q.buffers.dropAll()
	n := 0
	for _, s := range shards {
		n += len(q.reserver.DropShard(s))
	}
	if n > 0 {
		q.log.Warn("shards lost with reservations in flight; their chunks go to the new owners",
			slog.Any("shards", shards), slog.Int("reservations", n))
	}
}

// onAcquired wakes the waiting consumers: new shards may hold work.
func (q *Queuer) onAcquired(shards []int) {
	q.buffers.dropAll()
	for _, s := range shards {
		q.markAvailable(s)
	}
	q.work.broadcast()
}

// markAvailable notes that an own shard may have free chunks again (acquired, or a chunk
// of it released): the resume hints may skip them, and the router tells other instances.
func (q *Queuer) markAvailable(shard int) {
	q.hints.clear()
	q.buffers.dropFreed()
	q.router.markAvailable(shard)
}

// onWork handles a NOTIFY of new or released chunks (workPayload): the router notes where
// they are, and as many waiting reserves wake as there are new chunks, wherever they are:
// a waiter here takes those of this instance's shards and forwards for the others'.
func (q *Queuer) onWork(payload string) {
	n := q.router.noteWork(payload, q.shardCount)
	q.hints.clearNewWork()
	q.buffers.dropNewWork()
	if n < 0 {
		q.work.broadcast()
	} else {
		q.work.wake(n)
	}
}

// onNotification dispatches the listener's notifications.
func (q *Queuer) onNotification(channel, payload string) {
	switch channel {
	case "": // the listener reconnected: anything may have been missed
		q.buffers.dropAll()
		q.subs.finished.wakeAll()
		q.onWork("all")
		q.keys.Refresh()
	case ChannelFinished:
		if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
			q.subs.finished.wake(id)
			q.infos.forget(id)
		}
	case ChannelWork:
		q.onWork(payload)
	case ChannelReleased:
		q.onReleased(payload)
	case ChannelClusterKeys:
		q.keys.Refresh()
	}
}

// onReleased drops the reservations of chunks another instance completed or failed
// ("submission_id:chunk_index"), retried (a token), or of a whole submission that failed or
// was cancelled ("*submission_id").
func (q *Queuer) onReleased(payload string) {
	for _, item := range strings.Split(payload, ",") {
		if sid, ok := strings.CutPrefix(item, "*"); ok {
			if id, err := strconv.ParseInt(sid, 10, 64); err == nil {
				q.buffers.dropSubmission(id)
				q.reserver.DropSubmission(id)
			}
			continue
		}
		sid, idx, isKey := strings.Cut(item, ":")
		if !isKey {
			if t, err := parseToken(item); err == nil {
				q.tombs.addRetried(t.key, t.retries)
			}
			q.reserver.Release(item)
			q.hints.clear() // the chunk is free again, wherever it sorts
			q.buffers.dropFreed()
			continue
		}
		s, err1 := strconv.ParseInt(sid, 10, 64)
		i, err2 := strconv.ParseInt(idx, 10, 32)
		if err1 == nil && err2 == nil {
			k := reserver.Key{SubmissionID: s, ChunkIndex: int32(i)}
			q.tombs.add(k)
			q.reserver.ReleaseKey(k)
		}
	}
}
