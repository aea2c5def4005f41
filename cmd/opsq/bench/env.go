package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
)

// How long the bench waits for its instances.
const (
	benchReadyTimeout    = 60 * time.Second // for /readyz, and for every instance to hold shards
	benchStopTimeout     = 10 * time.Second // after SIGTERM, before SIGKILL
	benchDatabaseTimeout = 30 * time.Second // to create or drop the scratch database
)

// benchEnv is where a bench runs: a scratch database on a PostgreSQL server, the opsq
// instances serving it (child processes), and a client for each instance. close stops the
// instances and drops the database.
type benchEnv struct {
	adminURL   string // the database the scratch one is created and dropped through
	dbName     string // the scratch database
	server     string // host:port of PostgreSQL
	pgVersion  string
	logDir     string // the instances' logs
	stderr     io.Writer
	instances  []*benchInstance
	clients    []*client.Client // clients[i] talks to instances[i]; each request with its route's key
	keys       benchKeys        // the keys the requests carry (keys.go); none with --auth off
	shardCount int
	// pool is the scratch database, for the engine's bulk insert and cancel, and for the
	// workloads' reads; a few connections.
	pool *pgxpool.Pool
	cost *pgCost // what the server spends
	// homes, on Citus with workers, are the workers (host:port) the instances are homed
	// on, instance i on homes[i % len(homes)] (OPSQ_CITUS_HOME); none: no home.
	homes []string
}

// openPool opens e.pool, once the instances have migrated the scratch database.
func (e *benchEnv) openPool(ctx context.Context) error {
	dbURL, err := scratchURL(e.adminURL, e.dbName)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 4
	if e.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("connecting to the scratch database %s: %w", e.dbName, err)
	}
	e.cost, err = newPGCost(ctx, e.pool)
	return err
}

// benchInstance is one "opsq serve" child process, started by the kit of the
// multi-instance tests.
type benchInstance struct {
	id, url, logPath string
	cmd              *exec.Cmd
	proc             *clustertest.Process
}

// startBenchEnv creates the scratch database and starts the instances, or undoes what it
// did and returns an error.
func startBenchEnv(ctx context.Context, cfg Config, stderr io.Writer) (*benchEnv, error) {
	if cfg.Database == nil {
		return nil, errors.New("no database: bench.Config.Database is nil")
	}
	adminURL, err := cfg.Database(ctx)
	if err != nil {
		return nil, err
	}
	e := &benchEnv{adminURL: adminURL, dbName: fmt.Sprintf("opsq_bench_%d", os.Getpid()), stderr: stderr}
	if err := e.createDatabase(ctx); err != nil {
		return nil, err
	}
	if err := e.startInstances(ctx, cfg); err != nil {
		e.close(true)
		return nil, err
	}
	return e, nil
}

// info describes the environment for the report.
func (e *benchEnv) info(cfg Config) benchInfo {
	return benchInfo{PostgreSQL: e.pgVersion, Server: e.server, Database: e.dbName, Instances: cfg.Instances, CPUs: runtime.NumCPU(),
		Auth: cmp.Or(cfg.Auth, AuthRequired)}
}

// createDatabase creates the scratch database through adminURL.
func (e *benchEnv) createDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, benchDatabaseTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL (check --database-url): %w", err)
	}
	defer conn.Close(context.Background())
	cc := conn.Config()
	e.server = net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&e.pgVersion); err != nil {
		return fmt.Errorf("reading the PostgreSQL version: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{e.dbName}.Sanitize()); err != nil {
		return fmt.Errorf("creating the scratch database %s on %s (the user of --database-url needs CREATEDB): %w", e.dbName, e.server, err)
	}
	return nil
}

// dropDatabase drops the scratch database, disconnecting whoever is still in it.
func (e *benchEnv) dropDatabase() error { return e.dropScratch(e.dbName) }

// createScratch creates another scratch database, name, through adminURL.
func (e *benchEnv) createScratch(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, benchDatabaseTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating the scratch database %s on %s: %w", name, e.server, err)
	}
	return nil
}

// dropScratch drops scratch database name, disconnecting whoever is still in it.
func (e *benchEnv) dropScratch(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), benchDatabaseTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// scratchURL returns base, a URL or a keyword/value connection string, naming database db
// instead.
func scratchURL(base, db string) (string, error) {
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return base + " dbname=" + db, nil // in keyword/value form, the last dbname wins
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parsing the database URL: %w", err)
	}
	u.Path, u.RawPath = "/"+db, ""
	return u.String(), nil
}

// startInstances starts the instances: the first one migrates the database; once it is
// ready, the bench opens its pool and makes the API keys (unless --auth off), and the
// others start. It returns when every instance holds shards.
func (e *benchEnv) startInstances(ctx context.Context, cfg Config) error {
	exe, err := clustertest.Self()
	if err != nil {
		return err
	}
	if cfg.Binary != "" {
		exe = clustertest.Binary{Path: cfg.Binary}
	}
	dbURL, err := scratchURL(e.adminURL, e.dbName)
	if err != nil {
		return err
	}
	if e.logDir, err = os.MkdirTemp("", "opsq-bench-"); err != nil {
		return err
	}
	// Consumers hold a connection each; keep them all between requests.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 0 // no limit
	transport.MaxIdleConnsPerHost = cfg.Consumers + 16
	auth := cmp.Or(cfg.Auth, AuthRequired)
	for i := range cfg.Instances {
		inst, err := e.startInstance(ctx, exe, dbURL, i, auth)
		if err != nil {
			return err
		}
		e.instances = append(e.instances, inst)
		if err := e.waitReady(ctx, inst); err != nil {
			return err
		}
		if i > 0 {
			continue
		}
		// Migrated: the bench's connections, and the keys.
		if err := e.openPool(ctx); err != nil {
			return err
		}
		if auth == AuthRequired {
			if e.keys, err = createKeys(ctx, e.pool); err != nil {
				return err
			}
		}
	}
	hc := &http.Client{Transport: e.keys.transport(transport)}
	for _, inst := range e.instances {
		e.clients = append(e.clients, client.New(inst.url, client.WithHTTPClient(hc), client.WithUserAgent("opsq-bench")))
	}
	// Through instance 0 with the admin key: once it answers, instance 0 knows the keys
	// (made in one transaction), and the others loaded them at their start.
	return e.waitBalanced(ctx)
}

// startInstance starts instance i on a held loopback port; only the first one migrates.
func (e *benchEnv) startInstance(ctx context.Context, exe clustertest.Binary, dbURL string, i int, auth string) (*benchInstance, error) {
	p, err := clustertest.Start(exe, clustertest.Spec{
		ID: fmt.Sprintf("bench-%d-%d", os.Getpid(), i), DBURL: dbURL, Migrate: i == 0,
		LogPath: filepath.Join(e.logDir, fmt.Sprintf("instance-%d.log", i)), LogLevel: "warn",
		Grace: benchStopTimeout.String(), Auth: auth, Env: e.homeEnv(i),
		ProcAttr: childProcAttr(), // its own process group: Ctrl-C is ours to handle
	})
	if err != nil {
		return nil, err
	}
	return &benchInstance{id: p.ID, url: p.URL, logPath: p.LogPath, cmd: p.Cmd, proc: p}, nil
}

// homeEnv is instance i's OPSQ_CITUS_HOME, if the instances have homes.
func (e *benchEnv) homeEnv(i int) []string {
	if len(e.homes) == 0 {
		return nil
	}
	return []string{"OPSQ_CITUS_HOME=" + e.homes[i%len(e.homes)]}
}

// waitReady waits until inst answers /readyz with 200.
func (e *benchEnv) waitReady(ctx context.Context, inst *benchInstance) error {
	return inst.proc.WaitReady(ctx, http.DefaultClient, benchReadyTimeout)
}

// waitBalanced waits until GET /v1/cluster shows every instance holding active shards and
// no shard unclaimed.
func (e *benchEnv) waitBalanced(ctx context.Context) error {
	deadline := time.Now().Add(benchReadyTimeout)
	for {
		cl, err := e.clients[0].Cluster(ctx)
		if err == nil {
			e.shardCount = cl.ShardCount
			if allHoldShards(cl, e.instances) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the instances do not all hold shards after %s (last answer: %s, %v); their logs: %s",
				benchReadyTimeout, describeShards(cl), err, e.logDir)
		}
		if err := clustertest.SleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// allHoldShards reports whether every instance holds shards, none draining, and no shard is
// unclaimed.
func allHoldShards(cl wire.Cluster, instances []*benchInstance) bool {
	if len(cl.Unclaimed) > 0 {
		return false
	}
	held := map[string]bool{}
	for _, ci := range cl.Instances {
		for _, s := range ci.Shards {
			if s.State != wire.ClaimActive {
				return false
			}
		}
		held[ci.ID] = len(ci.Shards) > 0
	}
	for _, inst := range instances {
		if !held[inst.id] {
			return false
		}
	}
	return true
}

// describeShards writes how many shards each instance holds: "bench-1-0: 32, bench-1-1: 32".
func describeShards(cl wire.Cluster) string {
	var parts []string
	for _, ci := range cl.Instances {
		parts = append(parts, fmt.Sprintf("%s: %d", ci.ID, len(ci.Shards)))
	}
	if len(cl.Unclaimed) > 0 {
		parts = append(parts, fmt.Sprintf("unclaimed: %d", len(cl.Unclaimed)))
	}
	return strings.Join(parts, ", ")
}

// shardsHeld returns how many shards instance id holds, and the sum of their in-flight
// counts (as of the last renewal).
func shardsHeld(cl wire.Cluster, id string) (shards, inflight int) {
	for _, ci := range cl.Instances {
		if ci.ID == id {
			for _, s := range ci.Shards {
				inflight += s.Inflight
			}
			return len(ci.Shards), inflight
		}
	}
	return 0, 0
}

// exited describes the instances that have exited, or returns nil.
func (e *benchEnv) exited() error {
	var errs []error
	for _, inst := range e.instances {
		select {
		case <-inst.proc.Exited():
			errs = append(errs, fmt.Errorf("instance %s exited (%v); its log: %s", inst.id, inst.proc.Err(), inst.logPath))
		default:
		}
	}
	return errors.Join(errs...)
}

// close stops the instances (SIGTERM, then SIGKILL after benchStopTimeout) and drops the
// scratch database. It keeps the instances' logs, and says where they are, when failed.
func (e *benchEnv) close(failed bool) {
	var wg sync.WaitGroup
	for _, inst := range e.instances {
		wg.Go(func() {
			defer inst.proc.Release()
			_ = inst.proc.Signal(syscall.SIGTERM)
			select {
			case <-inst.proc.Exited():
			case <-time.After(benchStopTimeout):
				fmt.Fprintf(e.stderr, "instance %s did not stop %s after SIGTERM: killing it\n", inst.id, benchStopTimeout)
				_ = inst.proc.Signal(syscall.SIGKILL)
				<-inst.proc.Exited()
			}
		})
	}
	wg.Wait()
	if e.pool != nil {
		e.pool.Close()
	}
	if err := e.dropDatabase(); err != nil {
		fmt.Fprintf(e.stderr, "dropping the scratch database %s: %v; drop it yourself: DROP DATABASE %s WITH (FORCE)\n", e.dbName, err, e.dbName)
	}
	switch {
	case e.logDir == "":
	case failed:
		fmt.Fprintf(e.stderr, "the instances' logs are in %s\n", e.logDir)
	default:
		os.RemoveAll(e.logDir)
	}
}
