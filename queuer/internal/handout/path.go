package handout

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/valuerates"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Availability is what the reserve path tells about where work is, and reads back: the
// router (queuer/internal/peers) satisfies it.
type Availability interface {
	// Announced counts the announcements of work so far.
	Announced() uint64
	// MarkUnavailable notes that the shards of leases had no free chunk at a scan that
	// began when Announced returned since.
	MarkUnavailable(leases []claims.Lease, since uint64)
}

// Config configures a Path.
type Config struct {
	// ShardCount is the number of shards, as the database has it (claims.Settings,
	// fixed at the first migration). Required.
	ShardCount int
	// Pool runs the statements; the candidate queries run on a pool of their own made from
	// its configuration (Start).
	Pool *pgxpool.Pool
	// ScanNode, when set (host:port), is the node the candidate pool connects to instead
	// of Pool's host, with Pool's database, user and settings: on Citus, the worker the
	// instance is homed on (queuer.Config.CitusHome). The worker plans the candidate
	// queries itself (Citus's query from any node) and reads the shards placed on it in its
	// own process (local execution), so their rows do not travel to the coordinator and
	// back. Empty: Pool's host.
	ScanNode string
	Log      *slog.Logger
	// Now tells when leases end.
	Now      func() time.Time
	Claims   *claims.Manager
	Reserver *reserver.Reserver
	Keys     *tokens.Keyring // signs the tokens
	Bus      *notify.Bus     // hears the chunks given back
	// Availability hears which shards a full scan found empty.
	Availability Availability
	// Throttles says which submissions' chunks consumers' throttles keep back; nil: none.
	Throttles Throttles
	// ValueRates counts the chunks handed out per value of the keys the strategies limit
	// (rate_limit's, weighted_fair's) and of the throttles' keys, for the dashboard. Nil:
	// nothing is counted.
	ValueRates *valuerates.Counter
	// Wake wakes up to n waiting reserves: rate_limit tokens are due for a value that had
	// none (the waiters' Wake). Nil: none is woken; they look again at their next wake-up.
	Wake func(n int)
	// RunTimeout bounds one shared run of reserves: past it they get ErrRunTimeout.
	// Defaults to RunTimeoutDefault (10s).
	RunTimeout time.Duration
}

// Throttles is what the reserve path asks of the throttles in force (queuer/internal/throttles
// satisfies it).
type Throttles interface {
	// Blocks reports whether a throttle keeps back the chunks of a submission with
	// strategic values (key -> canonical JSON text, "@tenant" included) of tenant.
	Blocks(values map[string]string, tenant string) bool
	// Keys returns the keys of the throttles held (read-only; nil for none).
	Keys() []string
}

// Path is the reserve path. It is safe for concurrent use. Its candidate pool lives from
// Start until Stop; a shared run's goroutine lives while reserves wait for it.
type Path struct {
	cfg        Config
	reserver   *reserver.Reserver
	scans      *pgxpool.Pool // candidate queries: cached generic plans (see Start)
	shardCount int
	shared     *shared
	infos      *infoCache
	tombs      *tombstones
	hints      *hints
	buffers    *buffers
	holds      *holds
	rates      *rates
	fair       *fairShares
	planStats  *planStats
	tenantSubs *tenantSubsCache
	reserved   atomic.Int64 // chunks reserved here, for Stats
}

var (
	_ startstop.Service = (*Path)(nil)
	_ notify.Handler    = (*Path)(nil)
)

// New returns the reserve path of cfg; Start it before use.
func New(cfg Config) *Path {
	p := &Path{
		cfg: cfg, shardCount: cfg.ShardCount, reserver: cfg.Reserver, shared: newShared(), infos: newInfoCache(cfg.Pool),
		tombs: newTombstones(), hints: newHints(), tenantSubs: newTenantSubsCache(),
		holds:     &holds{pool: cfg.Pool, log: cfg.Log},
		rates:     newRates(cfg.Pool, cfg.Log, cfg.Wake),
		fair:      newFairShares(),
		planStats: &planStats{pool: cfg.Pool, claims: cfg.Claims, log: cfg.Log},
	}
	p.buffers = newBuffers(p.tombs)
	return p
}

// Start connects the candidate pool. Candidate queries run on their own connections,
// which keep one generic plan per query text and stream it through the chunks'
// indexes whatever the backlog's statistics say; JIT is off on them whatever the caller's
// pool says (sql.ConfigureCandidateSession says why). Other statements keep PostgreSQL's
// default planning.
func (p *Path) Start(ctx context.Context) error {
	scanCfg := p.cfg.Pool.Config().Copy()
	opsqsql.ConfigureCandidateSession(scanCfg.ConnConfig)
	scanCfg.MaxConns = max(p.cfg.Pool.Config().MaxConns/2, 4)
	if p.cfg.ScanNode != "" {
		if err := connectTo(scanCfg.ConnConfig, p.cfg.ScanNode); err != nil {
			return err
		}
	}
	var err error
	if p.scans, err = pgxpool.NewWithConfig(ctx, scanCfg); err != nil {
		if p.cfg.ScanNode != "" {
			return fmt.Errorf("connecting the candidate pool to the home node %s (OPSQ_CITUS_HOME; it must accept the database's user as the coordinator does): %w", p.cfg.ScanNode, err)
		}
		return fmt.Errorf("connecting the candidate pool: %w", err)
	}
	return nil
}

// connectTo points cc at node (host:port) alone: its fallbacks (other hosts, or sslmode
// prefer's try without TLS) keep their TLS choice but name node too, and TLS, where used,
// checks node's name.
func connectTo(cc *pgx.ConnConfig, node string) error {
	host, port, err := net.SplitHostPort(node)
	if err != nil {
		return fmt.Errorf("the home node %q: want host:port: %w", node, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("the home node %q: the port must be a number from 1 to 65535", node)
	}
	point := func(h *string, p *uint16, t **tls.Config) {
		*h, *p = host, uint16(n)
		if *t != nil && (*t).ServerName != "" {
			*t = (*t).Clone()
			(*t).ServerName = host
		}
	}
	point(&cc.Host, &cc.Port, &cc.TLSConfig)
	seen := map[bool]bool{cc.TLSConfig != nil: true}
	var fallbacks []*pgconn.FallbackConfig
	for _, fb := range cc.Fallbacks {
		if seen[fb.TLSConfig != nil] {
			continue
		}
		seen[fb.TLSConfig != nil] = true
		fb := *fb
		point(&fb.Host, &fb.Port, &fb.TLSConfig)
		fallbacks = append(fallbacks, &fb)
	}
	cc.Fallbacks = fallbacks
	return nil
}

// Stop drops the buffers and closes the candidate pool. Safe twice and before Start.
func (p *Path) Stop() {
	p.buffers.stop()
	if p.scans != nil {
		p.scans.Close()
	}
}

// AfterIngest refreshes the planner's statistics of the chunk table, when they lag far
// behind, after a commit that added ingested chunks (submissions.Config.Ingested): a
// submit waits for it (planstats.go).
func (p *Path) AfterIngest(ctx context.Context, ingested int64) {
	p.planStats.afterIngest(ctx, ingested)
}

// Jobs are the path's periodic jobs: the collection of max_simultaneous holds that stopped
// counting, and the planner's statistics of the chunk table.
func (p *Path) Jobs() []startstop.Job {
	return []startstop.Job{
		{What: "the collection of max_simultaneous holds", Schedule: holdsCollectSchedule, Run: p.holds.collect},
		{What: "the collection of full rate_limit buckets", Schedule: rateCollectSchedule, Run: p.rates.collect},
		{What: "the planner's statistics of the chunk table", Schedule: planStatsSchedule, Run: func(ctx context.Context) { p.planStats.refresh(ctx) }},
	}
}

// ReleaseHolds frees the max_simultaneous slots of reservations that ended. A failure
// only delays the slots until the collection job frees them.
func (p *Path) ReleaseHolds(ctx context.Context, tokens []string) { p.holds.release(ctx, tokens) }

// Reserved is how many chunks were reserved here.
func (p *Path) Reserved() int64 { return p.reserved.Load() }

// Handle updates what the path caches about chunks — reservations, tombstones, buffers,
// resume hints, submission infos — for an event, wherever the change was made.
func (p *Path) Handle(e notify.Event) {
	switch e := e.(type) {
	case notify.NewWork:
		// New chunks may sort before what the ordered scans kept, and be of a new
		// submission of a tenant.
		p.hints.clearNewWork()
		p.buffers.dropNewWork()
		p.tenantSubs.clear()
		p.fair.newWork() // a value that had nothing to do may have some now
	case notify.ChunksFreed:
		for _, c := range e.Chunks {
			if c.Retries != notify.NotRetried {
				p.tombs.addRetried(c.Key, c.Retries) // before the reservation is released
			}
			if c.Token != "" {
				p.reserver.Release(c.Token)
			}
		}
		// The chunks are free again, wherever they sort.
		p.hints.clear()
		p.buffers.dropFreed()
		p.fair.newWork()
	case notify.ChunksFinished:
		p.tombs.add(e.Keys...) // before the reservations are released
		for _, k := range e.Keys {
			p.reserver.ReleaseKey(k)
		}
	case notify.SubmissionDropped:
		// Its info too, now: a cancel raises this here at once, and the SubmissionFinished
		// that also forgets it comes only with the NOTIFY; until then a scan would take the
		// chunks not yet moved out (a cancel by slices) as in progress.
		p.infos.forget(e.ID)
		p.buffers.dropSubmission(e.ID)
		p.reserver.DropSubmission(e.ID)
	case notify.SubmissionPaused:
		// Its chunks wait now: candidates read before are stale. Its reservations in
		// flight stay, and finish as usual.
		p.buffers.dropSubmission(e.ID)
	case notify.SubmissionFinished:
		p.infos.forget(e.ID)
	case notify.ShardsChanged:
		p.hints.clear()
		p.buffers.dropAll()
		n := 0
		for _, s := range e.Lost {
			n += len(p.reserver.DropShard(s))
		}
		if n > 0 {
			p.cfg.Log.Warn("shards lost with reservations in flight; their chunks go to the new owners",
				slog.Any("shards", e.Lost), slog.Int("reservations", n))
		}
	case notify.Resync:
		p.hints.clear()
		p.buffers.dropAll()
	}
}
