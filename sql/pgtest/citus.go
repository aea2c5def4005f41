package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pglocal"
)

// EnvCitus names the environment variable that runs a test binary's databases on Citus:
// when it is "1", pgtest starts a coordinator and CitusWorkers workers (three local
// clusters with shared_preload_libraries = citus) instead of one PostgreSQL, and every
// database NewDB returns is a database of the coordinator whose opsq tables migration
// 00017 distributed over the workers. `make test-citus` sets it.
const EnvCitus = "OPSQ_TEST_CITUS"

// CitusWorkers is the number of Citus workers of a test cluster.
const CitusWorkers = 2

// errNoCitus says what to install when the citus library is missing.
var errNoCitus = errors.New("OPSQ_TEST_CITUS=1, but the PostgreSQL server has no citus library: " +
	"install Citus 13 into it (as root: ../shared/citus/build.sh from the project's root, about 2 minutes)")

// Citus reports whether this test binary runs its databases on Citus (EnvCitus).
func Citus() bool { return os.Getenv(EnvCitus) == "1" }

// citusNode is one node of the Citus test cluster.
type citusNode struct {
	cluster *pglocal.Cluster
	admin   *pgxpool.Pool // its "postgres" database
}

// startCitus starts the coordinator (s.admin's server) and the workers, each an ephemeral
// local cluster in its own directory under one temporary directory.
func (s *server) startCitus(ctx context.Context) error {
	bin, err := pglocal.BinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pkgLibDir(bin), "citus.so")); err != nil {
		return errNoCitus
	}
	reapOrphans(ctx)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
	if err != nil {
		return fmt.Errorf("making a directory for the Citus test cluster: %w", err)
	}
	s.teardown = append(s.teardown, func(context.Context) error { return os.RemoveAll(dir) })
	for i := 0; i <= CitusWorkers; i++ {
		c := &pglocal.Cluster{Dir: filepath.Join(dir, fmt.Sprintf("node%d", i)), Settings: map[string]string{
			"shared_preload_libraries": "citus",
			// Citus's connections between nodes come out of every node's max_connections.
			"max_connections": "300",
			"jit":             "off",
			// Between nodes on loopback; the server would otherwise look for a client
			// certificate in the HOME of the user that started the tests.
			"citus.node_conninfo": "sslmode=disable",
		}}
		s.teardown = append(s.teardown, func(ctx context.Context) error { return c.Stop(ctx) })
		if err := c.Init(ctx); err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		if i == 0 {
			s.adminURL = c.URL("postgres")
			continue
		}
		admin, err := pgxpool.New(ctx, c.URL("postgres"))
		if err != nil {
			return fmt.Errorf("connecting to Citus worker %d: %w", i, err)
		}
		s.teardown = append(s.teardown, func(context.Context) error { admin.Close(); return nil })
		s.workers = append(s.workers, citusNode{cluster: c, admin: admin})
	}
	return nil
}

// pkgLibDir is where the server in bin loads its libraries from: beside bin, as Debian
// lays it out (/usr/lib/postgresql/15/bin → /usr/lib/postgresql/15/lib), through the
// symbolic links a PATH entry may be.
func pkgLibDir(bin string) string {
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		bin = filepath.Dir(real)
	}
	return filepath.Join(filepath.Dir(bin), "lib")
}

// createCitusDB creates database name on every node, from template when it is not "",
// else empty with the citus extension and the workers registered on the coordinator.
func (s *server) createCitusDB(ctx context.Context, name, template string) error {
	ident := pgx.Identifier{name}.Sanitize()
	create := "CREATE DATABASE " + ident
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize() + s.strategy
	}
	// On every node at once: a copy of a worker's template, with its hundreds of shard
	// tables, takes a second or two.
	errs := make([]error, len(s.workers)+1)
	var wg sync.WaitGroup
	for i, p := range s.nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Exec(ctx, create); err != nil {
				errs[i] = fmt.Errorf("creating database %s on Citus node %d: %w", name, i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if template != "" {
		return nil
	}
	for i, w := range s.workers {
		if err := execIn(ctx, w.cluster.URL(name), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("Citus worker %d: %w", i+1, err)
		}
	}
	coordURL, err := withDatabase(s.adminURL, name)
	if err != nil {
		return err
	}
	stmts := []string{"CREATE EXTENSION citus",
		fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d)", s.coordinatorPort())}
	for _, w := range s.workers {
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node('127.0.0.1', %d)", w.cluster.Port))
	}
	return execIn(ctx, coordURL, stmts...)
}

// sealCitusTemplate makes template copyable on every node: CREATE DATABASE … TEMPLATE
// needs a database nobody is connected to, and Citus's maintenance daemon stays connected
// to every database with the extension until connections to it are refused.
func (s *server) sealCitusTemplate(ctx context.Context, template string) error {
	lit := pgx.Identifier{template}.Sanitize()
	for _, p := range s.nodes() {
		if _, err := p.Exec(ctx, "ALTER DATABASE "+lit+" WITH ALLOW_CONNECTIONS false"); err != nil {
			return fmt.Errorf("sealing template %s: %w", template, err)
		}
		if _, err := p.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", template); err != nil {
			return fmt.Errorf("sealing template %s: %w", template, err)
		}
	}
	return nil
}

// dropCitusDB drops database name on every node, the workers first (the coordinator's
// sessions are what connects to them). FORCE does not end Citus's maintenance daemon,
// which DROP DATABASE would wait 5 s for and then refuse: connections are refused first,
// and every session of the database ended, the daemon's included. A worker's daemon
// sometimes comes back all the same: a worker's copy left behind is only reported, since
// it goes with the cluster when the test binary ends, and the coordinator's (where the
// tests look) is dropped.
func (s *server) dropCitusDB(ctx context.Context, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	var errs []error
	nodes := s.nodes()
	for i := len(nodes) - 1; i >= 0; i-- { // the workers first: they connect to the coordinator
		p := nodes[i]
		_, err := p.Exec(ctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false")
		// A maintenance daemon may come back between the two statements: then again.
		for attempt := 1; err == nil; attempt++ {
			_, err = p.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
			if err == nil {
				_, err = p.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)")
			}
			var pgErr *pgconn.PgError
			if attempt == 20 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
				break
			}
			// A session still ending (a worker's connection back, Citus's daemon) on a
			// busy machine: wait for it a little, up to about 4 s in all.
			time.Sleep(200 * time.Millisecond)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Detail != "" {
			err = fmt.Errorf("%w (%s)", err, pgErr.Detail)
		}
		if err != nil && i == 0 {
			errs = append(errs, fmt.Errorf("dropping database %s on the Citus coordinator: %w", name, err))
		} else if err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: database %s stays on Citus worker %d until the test cluster ends: %v\n", name, i, err)
		}
	}
	return errors.Join(errs...)
}

// nodes returns the admin pools of the coordinator (node 0) and the workers.
func (s *server) nodes() []*pgxpool.Pool {
	pools := []*pgxpool.Pool{s.admin}
	for _, w := range s.workers {
		pools = append(pools, w.admin)
	}
	return pools
}

func (s *server) coordinatorPort() int {
	cfg, err := pgxpool.ParseConfig(s.adminURL)
	if err != nil {
		return 0
	}
	return int(cfg.ConnConfig.Port)
}

// CitusWorkerURLs returns the URLs of database dbURL's database on each Citus worker, for
// tests that look at where rows landed; nil when the tests do not run on Citus.
func CitusWorkerURLs(t interface{ Fatalf(string, ...any) }, dbURL string) []string {
	if srv == nil || len(srv.workers) == 0 {
		return nil
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	var urls []string
	for _, w := range srv.workers {
		urls = append(urls, w.cluster.URL(cfg.ConnConfig.Database))
	}
	return urls
}

func execIn(ctx context.Context, dbURL string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", dbURL, err)
	}
	defer conn.Close(ctx)
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// StopCitusWorker stops Citus worker i (0 or 1) of the test cluster, for a test of what the
// engine does while a worker is away, and returns the function that starts it again (on
// the same port; the test's cleanup starts it too, if the test did not). The cluster is
// shared by the package's tests: only a test that runs alone (no t.Parallel, so no other
// test runs meanwhile) may stop a worker.
func StopCitusWorker(t testing.TB, i int) (start func()) {
	t.Helper()
	if srv == nil || i < 0 || i >= len(srv.workers) {
		t.Fatalf("pgtest: no Citus worker %d (the tests run on Citus with %s=1)", i, EnvCitus)
	}
	c := srv.workers[i].cluster
	if err := c.Stop(t.Context()); err != nil {
		t.Fatalf("pgtest: stopping Citus worker %d: %v", i, err)
	}
	var once sync.Once
	start = func() {
		once.Do(func() {
			if err := c.Start(context.Background()); err != nil {
				t.Errorf("pgtest: starting Citus worker %d again: %v", i, err)
			}
		})
	}
	t.Cleanup(start)
	return start
}
