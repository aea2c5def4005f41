package main

import (
	"cmp"
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
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api"
	"opsq/api/apikeys"
	"opsq/api/tracing"
	"opsq/api/wire"
	"opsq/claims"
	"opsq/migrations"
	"opsq/queuer"
	opsqsql "opsq/sql"
)

// serveConfig is the configuration of "opsq serve"; every field has a flag and an OPSQ_*
// environment variable.
type serveConfig struct {
	databaseURL   string
	devCluster    string
	listen        string
	advertiseURL  string
	instanceID    string
	citusHome     string
	migrate       bool
	shardCount    int
	maxBody       byteSize
	maxChunkBytes byteSize
	logLevel      string
	auth          string
	shutdownGrace time.Duration
	// Limits against slow and hostile clients (DESIGN.md §3, §8).
	maxIngests       int
	maxResultStreams int
	maxFollow        time.Duration
	bodyIdleTimeout  time.Duration
	// Slots shared by key while others wait (api/slots.go).
	slotMinRate          byteSize
	slotGrace            time.Duration
	smallSubmissionBytes byteSize

	// Bounds of what a client sends and gets (DESIGN.md §3 "Bounded by design").
	maxSubmissionChunks int
	maxReserveBytes     byteSize
	maxWaiters          int
	maxWaitersPerKey    int
	maxPauseChunks      int
	maxLease            time.Duration
	authFailuresPerSec  int
	maxInflightBytes    byteSize
	maxHeaderBytes      byteSize
	maxIngestTime       time.Duration

	tls tlsFiles // TLS (tls.go)
}

// Defaults of the HTTP server's own timeouts.
const (
	readHeaderTimeout = 10 * time.Second  // a request's line and headers
	idleTimeout       = 120 * time.Second // a keep-alive connection between requests
)

func serveFlags(fs *flag.FlagSet, cfg *serveConfig) error {
	envString(fs, &cfg.databaseURL, "database-url", "OPSQ_DATABASE_URL", "", "PostgreSQL URL; pool size with ?pool_max_conns=N (default 32)")
	envString(fs, &cfg.devCluster, "dev-cluster", "OPSQ_DEV_CLUSTER", "", "when no database URL is set, start or reuse a local development PostgreSQL cluster in this directory (make run uses .data/pg)")
	envString(fs, &cfg.listen, "listen", "OPSQ_LISTEN", ":3999", "address to serve HTTP on")
	envString(fs, &cfg.advertiseURL, "advertise-url", "OPSQ_ADVERTISE_URL", "", "URL other instances use to reach this one (default http://<hostname>:<port>, https:// with --tls-cert)")
	envString(fs, &cfg.instanceID, "instance-id", "OPSQ_INSTANCE_ID", "", "instance id (default: random, new at each start)")
	envString(fs, &cfg.citusHome, "citus-home", "OPSQ_CITUS_HOME", "", "on Citus, the worker this instance is homed on, as pg_dist_node names it (host:port): its claims prefer the shards placed there and follow their moves")
	envString(fs, &cfg.logLevel, "log-level", "OPSQ_LOG_LEVEL", "info", "debug, info, warn or error")
	envString(fs, &cfg.auth, "auth", "OPSQ_AUTH", "required", `"required": every request but /healthz and /readyz needs an API key (opsq keys create); "off": none does (development only)`)
	envString(fs, &cfg.tls.cert, "tls-cert", "OPSQ_TLS_CERT", "", "PEM certificate (chain) to serve HTTPS with, with --tls-key")
	envString(fs, &cfg.tls.key, "tls-key", "OPSQ_TLS_KEY", "", "PEM private key of --tls-cert")
	envString(fs, &cfg.tls.ca, "tls-ca", "OPSQ_TLS_CA", "", "PEM CA certificate(s) trusted when calling other instances (default: the system's roots)")
	return errors.Join(
		envBool(fs, &cfg.migrate, "migrate", "OPSQ_MIGRATE", true, "run database migrations at start"),
		envInt(fs, &cfg.shardCount, "shard-count", "OPSQ_SHARD_COUNT", migrations.ShardCountDefault, "number of shards, used only when the database is first migrated"),
		envBytes(fs, &cfg.maxBody, "max-body", "OPSQ_MAX_BODY", api.MaxBodyDefault, "largest JSON request body in bytes (NDJSON has no total limit)"),
		envBytes(fs, &cfg.maxChunkBytes, "max-chunk-bytes", "OPSQ_MAX_CHUNK_BYTES", api.MaxChunkBytesDefault, "largest chunk in bytes"),
		envInt(fs, &cfg.maxSubmissionChunks, "max-submission-chunks", "OPSQ_MAX_SUBMISSION_CHUNKS", api.MaxSubmissionChunksDefault, "most chunks in one submission"),
		envBytes(fs, &cfg.maxReserveBytes, "max-reserve-bytes", "OPSQ_MAX_RESERVE_BYTES", api.MaxReserveBytesDefault, "a reserve answer stops adding chunks once it is this many bytes of JSON (it always holds one); at most 16 MiB"),
		envInt(fs, &cfg.maxWaiters, "max-waiters", "OPSQ_MAX_WAITERS", queuer.MaxWaitersDefault, "most requests waiting on this instance (reserves with a wait and status waits together); beyond, 503 with Retry-After"),
		envInt(fs, &cfg.maxWaitersPerKey, "max-waiters-per-key", "OPSQ_MAX_WAITERS_PER_KEY", 0, "most waiting requests of one API key (default 0: half of --max-waiters); beyond, 503 with Retry-After"),
		envInt(fs, &cfg.maxPauseChunks, "max-pause-chunks-per-minute", "OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE", queuer.MaxPauseChunksPerMinuteDefault, "most chunks one API key moves by pauses and resumes in a minute on this instance; beyond, 429 with Retry-After"),
		envInt(fs, &cfg.authFailuresPerSec, "auth-failures-per-second", "OPSQ_AUTH_FAILURES_PER_SECOND", api.AuthFailuresPerSecondDefault, "failed authentications one client address may have in a second; beyond, its failures get 429 for 5s"),
		envDuration(fs, &cfg.maxLease, "max-lease", "OPSQ_MAX_LEASE", wire.MaxLease, "longest lease a reserve or extend may ask for (1s to 24h); beyond, 400"),
		envDuration(fs, &cfg.shutdownGrace, "shutdown-grace", "OPSQ_SHUTDOWN_GRACE", 60*time.Second, "how long SIGTERM waits for requests in flight"),
		envInt(fs, &cfg.maxIngests, "max-ingests", "OPSQ_MAX_INGESTS", 0, "submissions served at once; beyond, 503 with Retry-After (default 0: a quarter of the pool's connections, 8 with the default pool of 32)"),
		envInt(fs, &cfg.maxResultStreams, "max-result-streams", "OPSQ_MAX_RESULT_STREAMS", 0, "results streams served at once; beyond, 503 with Retry-After (default 0: a quarter of the pool's connections, 8 with the default pool of 32)"),
		envDuration(fs, &cfg.maxFollow, "max-follow", "OPSQ_MAX_FOLLOW", api.MaxFollowDefault, "a results stream with ?follow=true ends after this long (the Go client follows again)"),
		envDuration(fs, &cfg.bodyIdleTimeout, "body-idle-timeout", "OPSQ_BODY_IDLE_TIMEOUT", api.BodyIdleTimeoutDefault, "cut a request body that sends nothing, or less than 16 KiB, in this long of waiting, or a results reader that reads nothing for this long (408)"),
		envBytes(fs, &cfg.maxInflightBytes, "max-inflight-bytes", "OPSQ_MAX_INFLIGHT_BYTES", api.MaxInflightBytesDefault, "most bytes held for request bodies (counted as decoded) and answers being built, over all requests; beyond, 503 with Retry-After"),
		envBytes(fs, &cfg.maxHeaderBytes, "max-header-bytes", "OPSQ_MAX_HEADER_BYTES", api.MaxHeaderBytesDefault, "most bytes of a request's line and headers (431 beyond)"),
		envBytes(fs, &cfg.slotMinRate, "slot-min-rate", "OPSQ_SLOT_MIN_RATE", api.SlotMinRateDefault, "bytes a second under which an upload gives its ingest slot up (408) to a waiting client, once --slot-grace has passed"),
		envDuration(fs, &cfg.slotGrace, "slot-grace", "OPSQ_SLOT_GRACE", api.SlotGraceDefault, "how long an upload runs before --slot-min-rate applies, and how long a follow with nothing to send, or a stream whose reader reads nothing, keeps its slot while another client waits"),
		envBytes(fs, &cfg.smallSubmissionBytes, "small-submission-bytes", "OPSQ_SMALL_SUBMISSION_BYTES", api.SmallSubmissionBytesDefault, "a JSON submission of at most this many bytes (Content-Length given) is read whole before it takes an ingest slot"),
		envDuration(fs, &cfg.maxIngestTime, "max-ingest-time", "OPSQ_MAX_INGEST_TIME", api.MaxIngestTimeDefault, "a submission (its body and its insert) is cut after this long (408, nothing kept)"),
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
	switch {
	case cfg.auth != "required" && cfg.auth != "off":
		return fmt.Errorf("--auth (OPSQ_AUTH) = %q: must be required or off", cfg.auth)
	case cfg.maxIngests < 0:
		return fmt.Errorf("--max-ingests (OPSQ_MAX_INGESTS) = %d: must be 0 (a quarter of the pool) or more", cfg.maxIngests)
	case cfg.maxResultStreams < 0:
		return fmt.Errorf("--max-result-streams (OPSQ_MAX_RESULT_STREAMS) = %d: must be 0 (a quarter of the pool) or more", cfg.maxResultStreams)
	case cfg.maxFollow <= 0:
		return fmt.Errorf("--max-follow (OPSQ_MAX_FOLLOW) = %s: must be positive", cfg.maxFollow)
	case cfg.bodyIdleTimeout <= 0:
		return fmt.Errorf("--body-idle-timeout (OPSQ_BODY_IDLE_TIMEOUT) = %s: must be positive", cfg.bodyIdleTimeout)
	case cfg.authFailuresPerSec < 1:
		return fmt.Errorf("--auth-failures-per-second (OPSQ_AUTH_FAILURES_PER_SECOND) = %d: must be 1 or more", cfg.authFailuresPerSec)
	case cfg.citusHome != "" && !isHostPort(cfg.citusHome):
		return fmt.Errorf("--citus-home (OPSQ_CITUS_HOME) = %q: must be host:port, as pg_dist_node names the worker", cfg.citusHome)
	case cfg.maxPauseChunks < 1:
		return fmt.Errorf("--max-pause-chunks-per-minute (OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE) = %d: must be 1 or more", cfg.maxPauseChunks)
	case cfg.maxWaitersPerKey < 0:
		return fmt.Errorf("--max-waiters-per-key (OPSQ_MAX_WAITERS_PER_KEY) = %d: must be 0 (half of --max-waiters) or more", cfg.maxWaitersPerKey)
	case cfg.maxLease < wire.MinLease || cfg.maxLease > wire.MaxLease:
		return fmt.Errorf("--max-lease (OPSQ_MAX_LEASE) = %s: must be between %s and %s", cfg.maxLease, wire.MinLease, wire.MaxLease)
	case cfg.slotGrace <= 0:
		return fmt.Errorf("--slot-grace (OPSQ_SLOT_GRACE) = %s: must be positive", cfg.slotGrace)
	case cfg.maxIngestTime <= 0:
		return fmt.Errorf("--max-ingest-time (OPSQ_MAX_INGEST_TIME) = %s: must be positive", cfg.maxIngestTime)
	case cfg.maxBody > 1<<30:
		return fmt.Errorf("--max-body (OPSQ_MAX_BODY) = %d: must be at most 1 GiB; send large submissions as NDJSON or in object storage", cfg.maxBody)
	case 4*cfg.maxBody > cfg.maxInflightBytes:
		// A JSON body is counted 4 times its bytes as it is decoded (api/budget.go).
		return fmt.Errorf("--max-inflight-bytes (OPSQ_MAX_INFLIGHT_BYTES) = %d: must be at least 4 times --max-body (OPSQ_MAX_BODY, %d), what one largest JSON body is counted as while it is decoded", cfg.maxInflightBytes, cfg.maxBody)
	case cfg.maxReserveBytes < 1 || cfg.maxReserveBytes > api.MaxReserveBytesDefault:
		// An instance reads at most that much of an answer it forwarded a reserve for.
		return fmt.Errorf("--max-reserve-bytes (OPSQ_MAX_RESERVE_BYTES) = %d: must be between 1 and %d (16 MiB, what an instance reads of a forwarded answer)", cfg.maxReserveBytes, api.MaxReserveBytesDefault)
	case 6*cfg.maxChunkBytes+1<<20 > cfg.maxReserveBytes:
		// A chunk written as JSON takes up to 6 times its bytes (\u escapes), and its
		// metadata up to 1 MiB more: every single chunk must fit in an answer, or it could
		// not be forwarded from one instance to another.
		return fmt.Errorf("--max-chunk-bytes (OPSQ_MAX_CHUNK_BYTES) = %d: one chunk written as JSON (up to 6 times its bytes, plus 1 MiB of metadata) must fit in a reserve answer of %d bytes (OPSQ_MAX_RESERVE_BYTES): use at most %d, or put large chunks in object storage", cfg.maxChunkBytes, cfg.maxReserveBytes, (cfg.maxReserveBytes-1<<20)/6)
	}
	log, err := newLogger(cfg.logLevel, stderr)
	if err != nil {
		return err
	}
	if !gcFloor() {
		log.Info("GOGC or GOMEMLIMIT is set: the Go runtime's collector is paced by them, not by opsq's floor")
	}
	// SIGTERM or SIGINT ends ctx (main); a second one, counted here from now on, skips the
	// shutdown's waits.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if cfg.instanceID == "" {
		cfg.instanceID = randomID()
	}
	if cfg.advertiseURL == "" {
		if cfg.advertiseURL, err = defaultAdvertiseURL(cfg.listen, cfg.tls.on()); err != nil {
			return err
		}
	}
	if err := checkAdvertiseURL(cfg.advertiseURL); err != nil {
		return err
	}
	if err := cfg.tls.check(cfg.advertiseURL); err != nil {
		return err
	}
	serverTLS, err := cfg.tls.server()
	if err != nil {
		return err
	}
	peerTLS, err := cfg.tls.peers()
	if err != nil {
		return err
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
	// Tracing only when OTEL_EXPORTER_OTLP_ENDPOINT is set: else spans is nil, and neither
	// the request pool nor the API gets a tracer.
	spans, err := tracing.FromEnv(ctx)
	if err != nil {
		return err
	}
	if spans != nil {
		log.Info("exporting traces over OTLP", slog.String("endpoint", os.Getenv(tracing.EnvEndpoint)))
		defer func() {
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := spans.Shutdown(flushCtx); err != nil {
				log.Warn("sending the last spans", slog.Any("error", err))
			}
		}()
	}
	pool, err := newPool(ctx, dbURL, spans.QueryTracer())
	if err != nil {
		return err
	}
	defer pool.Close()

	// The API keys are loaded before the address is bound: an instance serves no request
	// it cannot check.
	var keys *apikeys.Set
	if cfg.auth == "required" {
		keys = apikeys.NewSet(pool, log)
		if err := keys.Start(ctx); err != nil {
			return fmt.Errorf("loading the API keys: %w", err)
		}
		defer keys.Stop()
	} else {
		log.Warn("OPSQ_AUTH=off: serving without API keys; anyone who can reach this instance may submit, reserve, cancel and read everything. Use it for development only")
	}

	// Bind the address before claiming shards: an instance that cannot serve must not
	// take shards from the others (DESIGN.md §4).
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listening on %s (is another opsq running? set --listen or OPSQ_LISTEN): %w", cfg.listen, err)
	}
	defer ln.Close() // Serve closes it too; this is for the returns before Serve
	// The API keys hear their changes on the instance's one LISTEN connection.
	var notified map[string]func(string)
	if keys != nil {
		notified = map[string]func(string){apikeys.Channel: keys.Notified}
	}
	q, err := queuer.New(ctx, queuer.Config{
		Pool:                    pool,
		Logger:                  log,
		Instance:                claims.Instance{ID: cfg.instanceID, AdvertiseURL: cfg.advertiseURL, Version: version()},
		MaxWaiters:              cfg.maxWaiters,
		MaxWaitersPerKey:        cfg.maxWaitersPerKey,
		MaxPauseChunksPerMinute: int64(cfg.maxPauseChunks),
		CitusHome:               cfg.citusHome,
		PeerTLS:                 peerTLS,
		Notified:                notified,
	})
	if err != nil {
		return err
	}
	if err := q.Start(ctx); err != nil {
		return err
	}
	defer q.Stop()

	// Ingests and results streams hold a connection of the pool each: by default each
	// kind may take a quarter of it, so that they never starve the other requests.
	quarter := max(int(pool.Config().MaxConns)/4, 1)
	handler := api.New(api.Config{
		Queuer:           q,
		Keys:             keys,
		Tracing:          spans,
		Logger:           log,
		MaxBody:          int64(cfg.maxBody),
		MaxChunkBytes:    int(cfg.maxChunkBytes),
		MaxIngests:       cmp.Or(cfg.maxIngests, quarter),
		MaxResultStreams: cmp.Or(cfg.maxResultStreams, quarter),
		MaxFollow:        cfg.maxFollow,
		BodyIdleTimeout:  cfg.bodyIdleTimeout,
		Ready: func(ctx context.Context) error {
			return errors.Join(q.Ready(ctx), migrations.CheckCurrent(ctx, pool))
		},

		MaxSubmissionChunks:   int64(cfg.maxSubmissionChunks),
		MaxReserveBytes:       int(cfg.maxReserveBytes),
		MaxLease:              cfg.maxLease,
		AuthFailuresPerSecond: cfg.authFailuresPerSec,
		MaxInflightBytes:      int64(cfg.maxInflightBytes),
		MaxIngestTime:         cfg.maxIngestTime,
		SlotMinRate:           int64(cfg.slotMinRate),
		SlotGrace:             cfg.slotGrace,
		SmallSubmissionBytes:  int64(cfg.smallSubmissionBytes),
		AdvertiseURL:          cfg.advertiseURL,
	})
	// No ReadTimeout or WriteTimeout: they would bound whole requests, and long polls,
	// NDJSON uploads and results streams may take long. The API bounds each read of a body
	// and each write of a results stream instead (OPSQ_BODY_IDLE_TIMEOUT).
	srv := newHTTPServer(handler, int(cfg.maxHeaderBytes), log)
	served := make(chan error, 1)
	if serverTLS != nil {
		srv.TLSConfig = serverTLS
		serveHTTP1Only(srv)
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	log.Info("serving", slog.String("listen", ln.Addr().String()), slog.String("instance", cfg.instanceID),
		slog.String("advertise_url", cfg.advertiseURL), slog.String("version", version()), slog.String("auth", cfg.auth))

	select {
	case err := <-served:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	// Graceful shutdown (DESIGN.md §4): stop reserving at once (readyz turns 503, so a
	// load balancer stops sending work here; parked reserves answer no chunks, status
	// waits the state as it is), release the shards with nothing in flight, keep serving
	// complete, fail and extend while the reservations handed out here finish, releasing
	// each shard as it empties, up to drain_timeout; then release every shard still held
	// (their reservations count a failed attempt each, as expired leases do), finish the
	// requests in flight, and exit. A second signal skips the waits.
	hurry, cancelHurry := context.WithCancel(context.Background())
	defer cancelHurry()
	go secondSignal(sigs, hurry, cancelHurry, log)
	drainTimeout := q.Settings().DrainTimeout
	log.Info("draining: no more reservations here; waiting for those in flight (a second signal stops at once)",
		slog.Duration("drain_timeout", drainTimeout))
	drainCtx, cancelDrain := context.WithTimeout(hurry, drainTimeout)
	defer cancelDrain()
	if err := q.Drain(drainCtx); err != nil {
		log.Warn("drain ended with reservations in flight; their shards are released", slog.Any("error", err))
	}
	shutdownCtx, cancel := context.WithTimeout(hurry, cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still in flight at the end of the grace period", slog.Any("error", err))
	}
	if err := handler.Shutdown(shutdownCtx); err != nil {
		log.Warn("parked reserves answered with no chunks at the end of the grace period", slog.Any("error", err))
	}
	q.Stop()
	log.Info("stopped")
	return nil
}

// newHTTPServer is the HTTP server of "opsq serve": handler, with the server's own bounds
// of a request's line and headers (maxHeaderBytes, OPSQ_MAX_HEADER_BYTES; net/http allows
// 4 KiB more before its 431, and holds a connection's headers only while it reads them),
// of the time they take, and of a keep-alive connection's idle time.
func newHTTPServer(handler http.Handler, maxHeaderBytes int, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler: handler, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ConnContext:    api.ConnContext, // a reserve tells whether its client left before it answers
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// secondSignal cancels the shutdown's waits (hurry) at the second signal on sigs, which
// hears every signal, the first (that ended serve's context) included; it returns when
// hurry ends.
func secondSignal(sigs <-chan os.Signal, hurry context.Context, cancel context.CancelFunc, log *slog.Logger) {
	n := 0
	for {
		select {
		case <-hurry.Done():
			return
		case sig := <-sigs:
			if n++; n >= 2 {
				log.Warn("second signal: releasing every shard and stopping now", slog.String("signal", sig.String()))
				cancel()
				return
			}
		}
	}
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

// newPool connects the request pool; tracer, when not nil, traces its statements (the
// claims manager's pool, made from a copy of its configuration, drops it).
func newPool(ctx context.Context, url string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 32
	}
	// JIT off on every connection: it costs a reserve tens of milliseconds once the
	// backlog's size pushes a plan's estimate past jit_above_cost (sql.ConfigureSession).
	opsqsql.ConfigureSession(cfg.ConnConfig)
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
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

// defaultAdvertiseURL is http(s)://<hostname>:<port of listen>.
func defaultAdvertiseURL(listen string, https bool) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", listen, err)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port), nil
}

// checkAdvertiseURL checks that other instances can use u as it is (DESIGN.md §8): an
// absolute http or https URL with a host, and nothing a peer would have to guess about.
func checkAdvertiseURL(u string) error {
	parsed, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): %w", u, err)
	case parsed.Scheme != "http" && parsed.Scheme != "https":
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): want an absolute http:// or https:// URL, such as http://opsq-1.internal:3999", u)
	case parsed.Host == "" || parsed.Hostname() == "":
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): no host; want such as http://opsq-1.internal:3999", u)
	case parsed.User != nil || parsed.RawQuery != "" || parsed.Fragment != "":
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): want no user, query or fragment", u)
	}
	return nil
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

// isHostPort reports whether s is host:port.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}
