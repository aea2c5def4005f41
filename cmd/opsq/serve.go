package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api"
	"opsq/claims"
	"opsq/migrations"
	"opsq/queuer"
)

// serveConfig is the configuration of "opsq serve"; every field has a flag and an OPSQ_*
// environment variable.
type serveConfig struct {
	databaseURL   string
	devCluster    string
	listen        string
	advertiseURL  string
	instanceID    string
	migrate       bool
	shardCount    int
	maxBody       byteSize
	maxChunkBytes byteSize
	logLevel      string
	shutdownGrace time.Duration
	maxWaiters    int
}

func serveFlags(fs *flag.FlagSet, cfg *serveConfig) error {
	envString(fs, &cfg.databaseURL, "database-url", "OPSQ_DATABASE_URL", "", "PostgreSQL URL; pool size with ?pool_max_conns=N (default 32)")
	envString(fs, &cfg.devCluster, "dev-cluster", "OPSQ_DEV_CLUSTER", "", "when no database URL is set, start or reuse a local development PostgreSQL cluster in this directory (make run uses .data/pg)")
	envString(fs, &cfg.listen, "listen", "OPSQ_LISTEN", ":3999", "address to serve HTTP on")
	envString(fs, &cfg.advertiseURL, "advertise-url", "OPSQ_ADVERTISE_URL", "", "URL other instances use to reach this one (default http://<hostname>:<port>)")
	envString(fs, &cfg.instanceID, "instance-id", "OPSQ_INSTANCE_ID", "", "instance id (default: random, new at each start)")
	envString(fs, &cfg.logLevel, "log-level", "OPSQ_LOG_LEVEL", "info", "debug, info, warn or error")
	return errors.Join(
		envBool(fs, &cfg.migrate, "migrate", "OPSQ_MIGRATE", true, "run database migrations at start"),
		envInt(fs, &cfg.shardCount, "shard-count", "OPSQ_SHARD_COUNT", migrations.ShardCountDefault, "number of shards, used only when the database is first migrated"),
		envBytes(fs, &cfg.maxBody, "max-body", "OPSQ_MAX_BODY", api.MaxBodyDefault, "largest JSON request body in bytes (NDJSON has no total limit)"),
		envBytes(fs, &cfg.maxChunkBytes, "max-chunk-bytes", "OPSQ_MAX_CHUNK_BYTES", api.MaxChunkBytesDefault, "largest chunk in bytes"),
		envInt(fs, &cfg.maxWaiters, "max-waiters", "OPSQ_MAX_WAITERS", queuer.MaxWaitersDefault, "most requests waiting on this instance (reserves with a wait and status waits together); beyond, 503 with Retry-After"),
		envDuration(fs, &cfg.shutdownGrace, "shutdown-grace", "OPSQ_SHUTDOWN_GRACE", 60*time.Second, "how long SIGTERM waits for requests in flight"),
	)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: opsq serve [flags]\n\nServes the opsq REST API. Every flag can also be set by the environment variable named beside it.\n\nflags:")
		fs.PrintDefaults()
	}
	var cfg serveConfig
	if err := serveFlags(fs, &cfg); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	log, err := newLogger(cfg.logLevel, stderr)
	if err != nil {
		return err
	}
	if cfg.instanceID == "" {
		cfg.instanceID = randomID()
	}
	if cfg.advertiseURL == "" {
		if cfg.advertiseURL, err = defaultAdvertiseURL(cfg.listen); err != nil {
			return err
		}
	}
	dbURL, err := databaseURL(ctx, cfg.databaseURL, cfg.devCluster, log)
	if err != nil {
		return err
	}
	if cfg.migrate {
		if err := migrateUp(ctx, dbURL, cfg.shardCount, log); err != nil {
			return err
		}
	}
	pool, err := newPool(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	q, err := queuer.New(queuer.Config{
		Pool:       pool,
		Logger:     log,
		Instance:   claims.Instance{ID: cfg.instanceID, AdvertiseURL: cfg.advertiseURL, Version: version()},
		MaxWaiters: cfg.maxWaiters,
	})
	if err != nil {
		return err
	}
	if err := q.Start(ctx); err != nil {
		return err
	}
	defer q.Stop()

	handler := api.New(api.Config{
		Queuer:        q,
		Logger:        log,
		MaxBody:       int64(cfg.maxBody),
		MaxChunkBytes: int(cfg.maxChunkBytes),
		Ready: func(ctx context.Context) error {
			return errors.Join(q.Ready(ctx), migrations.CheckCurrent(ctx, pool))
		},
	})
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listening on %s (is another opsq running? set --listen or OPSQ_LISTEN): %w", cfg.listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", slog.String("listen", ln.Addr().String()), slog.String("instance", cfg.instanceID),
		slog.String("advertise_url", cfg.advertiseURL), slog.String("version", version()))

	select {
	case err := <-served:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	// Graceful shutdown (DESIGN.md §4): stop reserving at once (readyz turns 503, so a
	// load balancer stops sending work here), keep serving complete, fail and extend while
	// the reservations handed out here finish, releasing each shard as it empties, up to
	// drain_timeout; then finish the requests in flight and release what is left.
	drainTimeout := q.Settings().DrainTimeout
	log.Info("draining: no more reservations here; waiting for those in flight", slog.Duration("drain_timeout", drainTimeout))
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), drainTimeout)
	defer cancelDrain()
	if err := q.Drain(drainCtx); err != nil {
		log.Warn("drain timeout: shards with reservations in flight stay claimed until they expire", slog.Any("error", err))
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still in flight at the end of the grace period", slog.Any("error", err))
	}
	log.Info("stopped")
	return nil
}

// databaseURL returns the configured URL or, with a development cluster directory, the URL
// of a local cluster it starts (or reuses) there.
func databaseURL(ctx context.Context, url, devDir string, log *slog.Logger) (string, error) {
	if url != "" {
		return url, nil
	}
	if devDir == "" {
		return "", errors.New("no database: set --database-url or OPSQ_DATABASE_URL (postgres://user@host:5432/db), or run \"make run\" for a local development database")
	}
	return devDatabase(ctx, devDir, log)
}

func newPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 32
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to the database at %s (is PostgreSQL running and the URL right?): %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: must be debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func defaultAdvertiseURL(listen string) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", listen, err)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "dev"
}

// parseError turns a flag parse error into errUsage (the flag package printed it) or
// flag.ErrHelp.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errUsage
}
