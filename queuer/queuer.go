// Package queuer is the per-instance engine of opsq: it inserts submissions, answers status
// and results, cancels, waits for submissions to finish (woken by LISTEN/NOTIFY), keeps the
// instance registered, and runs the periodic jobs (robfig/cron/v3).
package queuer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"

	"opsq/claims"
)

// Defaults of Config.
const (
	HeartbeatIntervalDefault = 2 * time.Second
	RetentionScheduleDefault = "@every 1m"
)

// Config configures a Queuer.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// Instance names this process in opsq.instances. Instance.ID is required.
	Instance claims.Instance
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// HeartbeatInterval is how often the instance marks itself alive. Defaults to 2s.
	HeartbeatInterval time.Duration
	// RetentionSchedule is the cron schedule of the retention job. Defaults to "@every 1m".
	RetentionSchedule string
}

// Queuer is one instance's engine. It is safe for concurrent use. Its goroutines (the
// NOTIFY listener and the cron jobs) live from Start until Stop.
type Queuer struct {
	cfg        Config
	pool       *pgxpool.Pool
	log        *slog.Logger
	ids        *idGenerator
	shardCount int
	listener   *listener
	finished   *waiters

	mu struct {
		sync.Mutex
		node    int
		started bool
		stopped bool
		cancel  context.CancelFunc
		cron    *cron.Cron
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
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, HeartbeatIntervalDefault)
	cfg.RetentionSchedule = cmp.Or(cfg.RetentionSchedule, RetentionScheduleDefault)
	q := &Queuer{cfg: cfg, pool: cfg.Pool, log: cfg.Logger, ids: newIDGenerator(), finished: newWaiters()}
	q.listener = newListener(cfg.Pool, cfg.Logger, q.onNotification, ChannelFinished)
	return q, nil
}

// Start registers the instance and starts the listener and the periodic jobs.
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
	if err := q.register(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := q.listener.Start(runCtx); err != nil {
		cancel()
		return err
	}
	c := cron.New(cron.WithLocation(time.UTC))
	if _, err := c.AddFunc(fmt.Sprintf("@every %s", q.cfg.HeartbeatInterval), func() { q.heartbeat(runCtx) }); err != nil {
		cancel()
		return fmt.Errorf("scheduling heartbeat: %w", err)
	}
	if _, err := c.AddFunc(q.cfg.RetentionSchedule, func() { q.runRetention(runCtx) }); err != nil {
		cancel()
		return fmt.Errorf("scheduling retention %q: %w", q.cfg.RetentionSchedule, err)
	}
	c.Start()
	q.mu.started, q.mu.cancel, q.mu.cron = true, cancel, c
	return nil
}

// Stop ends the goroutines and deregisters the instance. It is safe twice and before Start.
func (q *Queuer) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.mu.started || q.mu.stopped {
		return
	}
	q.mu.stopped = true
	<-q.mu.cron.Stop().Done()
	q.mu.cancel()
	q.listener.Stop()
	q.finished.wakeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := claims.Deregister(ctx, q.pool, q.cfg.Instance.ID); err != nil {
		q.log.Warn("deregistering instance", slog.Any("error", err))
	}
}

// ShardCount is the number of shards of the database.
func (q *Queuer) ShardCount() int { return q.shardCount }

// register takes a node id for the id generator.
func (q *Queuer) register(ctx context.Context) error {
	started := time.Now()
	node, err := claims.Register(ctx, q.pool, q.cfg.Instance)
	if err != nil {
		return err
	}
	q.mu.node = node
	q.ids.setNode(node, started.Add(claims.NodeReuseAfter/2))
	q.log.Info("instance registered", slog.String("instance", q.cfg.Instance.ID), slog.Int("node_id", node))
	return nil
}

// heartbeat keeps the instance's node id; a forgotten instance registers again.
func (q *Queuer) heartbeat(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	started := time.Now()
	_, err := claims.Heartbeat(ctx, q.pool, q.cfg.Instance.ID, q.mu.node)
	switch {
	case err == nil:
		q.ids.setNode(q.mu.node, started.Add(claims.NodeReuseAfter/2))
	case errors.Is(err, claims.ErrForgotten):
		q.log.Warn("instance was forgotten by the cluster; registering again", slog.String("instance", q.cfg.Instance.ID))
		if err := q.register(ctx); err != nil {
			q.log.Error("registering instance", slog.Any("error", err))
		}
	case ctx.Err() == nil:
		q.log.Warn("heartbeat failed", slog.Any("error", err))
	}
}

// Ready reports whether the instance can serve: the database answers and the instance
// holds a confirmed node id.
func (q *Queuer) Ready(ctx context.Context) error {
	if err := q.pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	q.ids.mu.Lock()
	valid := !q.ids.mu.validUntil.IsZero() && time.Now().Before(q.ids.mu.validUntil)
	q.ids.mu.Unlock()
	if !valid {
		return errNodeLease
	}
	return nil
}
