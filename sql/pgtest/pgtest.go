// Package pgtest gives each test a fresh, migrated PostgreSQL database.
//
// The server is chosen once per test binary, at the first NewDB: the one at
// OPSQ_TEST_DATABASE_URL if set (a server where the tests may CREATE DATABASE), else an
// ephemeral cluster started from the local server binaries (package pglocal), else, when
// those are missing and a Docker engine answers, a postgres:16-alpine container
// (testcontainers-go). Otherwise the test fails with what to install; it never skips.
//
// The first NewDB also migrates a template database; every NewDB then copies it, which
// takes milliseconds. A package that uses pgtest calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// or, to check for leaked goroutines after the server is gone:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
//
// pgtest is also the half of the test kit that does not know the queuer, so that every
// package's tests (queuer's own included) share it: WaitFor and Eventually poll a
// condition with a deadline, Logger writes a component's log to the test's output,
// SetTimings sets the cluster timings, Count and CompleteSubmission read and shape rows,
// Statements counts the queries a piece of work costs, and Clock is a time the test moves
// by hand (queuer.Config.Clock). The other half, which starts
// queuers and loads backlogs, is opsq/queuer/queuertest.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"opsq/migrations"
	"opsq/sql/pglocal"
)

// EnvURL names the environment variable holding the URL of a server to test against.
const EnvURL = "OPSQ_TEST_DATABASE_URL"

// Image is the Docker image used when there are no local server binaries.
const Image = "postgres:16-alpine"

// tempPrefix starts the name of every ephemeral cluster directory, followed by the pid of
// the test binary that owns it.
const tempPrefix = "opsq-pgtest-"

var (
	wrapped atomic.Bool // Main or Wrap was called
	once    sync.Once
	srv     *server
	srvErr  error
)

// server is the PostgreSQL server of this test binary.
type server struct {
	adminURL string        // a database on the server to run CREATE DATABASE from
	admin    *pgxpool.Pool // connected to adminURL
	id       string        // unique to this test binary, in every database name
	template string        // migrated with the default shard count
	strategy string        // " STRATEGY FILE_COPY" from PostgreSQL 15 on
	shared   bool          // the server outlives this binary: drop what we made
	n        atomic.Int64  // databases made
	workers  []citusNode   // the Citus workers, when the tests run on Citus (EnvCitus)
	teardown []func(context.Context) error
}

// Main runs the tests of a package, tears down what pgtest started (the ephemeral cluster
// or container, the template database on a shared server), and exits with the tests' code.
func Main(m *testing.M) {
	os.Exit(Wrap(m).Run())
}

// Runner runs a package's tests and then tears down what pgtest started; see Wrap.
type Runner struct {
	m *testing.M
}

// Wrap returns m as a Runner, for TestMain functions that do more than Main, such as
// goleak.VerifyTestMain(pgtest.Wrap(m)).
func Wrap(m *testing.M) Runner {
	wrapped.Store(true)
	return Runner{m: m}
}

// Run runs the tests, then tears down, and returns the exit code.
func (r Runner) Run() int {
	code := r.m.Run()
	if srv == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.close(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: tearing down: %v\n", err)
		return max(code, 1)
	}
	return code
}

// NewDB creates a fresh database migrated with the default shard count, drops it when the
// test ends, and returns its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	return newDB(t, migrations.ShardCountDefault)
}

// NewDBWithShards is NewDB with shards shards. Only the default count is copied from the
// template; any other is migrated from scratch, which takes longer.
func NewDBWithShards(t testing.TB, shards int) string {
	t.Helper()
	return newDB(t, shards)
}

// NewPool returns a pool connected to a fresh database from NewDB; the pool is closed and the
// database dropped when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", dbURL, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newDB(t testing.TB, shards int) string {
	t.Helper()
	if !wrapped.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) or pgtest.Wrap(m) from TestMain, so that the test server is torn down")
	}
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		srv, srvErr = start(ctx)
	})
	if srvErr != nil {
		t.Fatalf("pgtest: %v", srvErr)
	}
	name := fmt.Sprintf("opsq_t_%s_%d", srv.id, srv.n.Add(1))
	dbURL, err := withDatabase(srv.adminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx := t.Context()
	template := srv.template
	if shards != migrations.ShardCountDefault {
		template = "" // migrated below
	}
	if err := srv.createDB(ctx, name, template); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.dropDB(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	if shards != migrations.ShardCountDefault {
		if err := migrate(ctx, dbURL, shards); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	return dbURL
}

// createDB creates database name, a copy of template unless that is "".
func (s *server) createDB(ctx context.Context, name, template string) error {
	if Citus() {
		return s.createCitusDB(ctx, name, template)
	}
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize() + s.strategy
	}
	if _, err := s.admin.Exec(ctx, create); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// dropDB drops database name, whoever is still connected to it.
func (s *server) dropDB(ctx context.Context, name string) error {
	if Citus() {
		return s.dropCitusDB(ctx, name)
	}
	if _, err := s.admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// start finds a server and migrates the template database on it.
func start(ctx context.Context) (*server, error) {
	s := &server{id: fmt.Sprintf("%d_%08x", os.Getpid(), rand.Uint32())}
	s.template = "opsq_tmpl_" + s.id
	if err := s.connect(ctx); err != nil {
		return nil, errors.Join(err, s.close(ctx))
	}
	if err := s.makeTemplate(ctx); err != nil {
		return nil, errors.Join(err, s.close(ctx))
	}
	return s, nil
}

// connect finds a server, starting one if needed, and connects s.admin to it.
func (s *server) connect(ctx context.Context) error {
	if Citus() {
		if err := s.startCitus(ctx); err != nil {
			return err
		}
	} else if envURL := os.Getenv(EnvURL); envURL != "" {
		s.adminURL, s.shared = envURL, true
	} else if err := s.startLocal(ctx); errors.Is(err, pglocal.ErrNotInstalled) {
		if dockerErr := s.startContainer(ctx); dockerErr != nil {
			return fmt.Errorf("no PostgreSQL server to test against. Install the PostgreSQL server "+
				"binaries (apt-get install postgresql), or start a Docker engine, or set %s to the URL "+
				"of a server where the tests may CREATE DATABASE.\nlocal binaries: %v\ndocker: %v",
				EnvURL, err, dockerErr)
		}
	} else if err != nil {
		return err
	}
	admin, err := pgxpool.New(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", s.adminURL, err)
	}
	s.admin = admin
	var version int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("connecting to %s: %w", s.adminURL, err)
	}
	if version >= 150000 {
		s.strategy = " STRATEGY FILE_COPY"
	}
	return nil
}

// startLocal starts an ephemeral cluster in a temporary directory.
func (s *server) startLocal(ctx context.Context) error {
	if _, err := pglocal.BinDir(); err != nil {
		return err
	}
	reapOrphans(ctx)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
	if err != nil {
		return fmt.Errorf("making a directory for the test cluster: %w", err)
	}
	c := &pglocal.Cluster{Dir: dir}
	s.teardown = append(s.teardown, func(ctx context.Context) error {
		return errors.Join(c.Stop(ctx), os.RemoveAll(dir))
	})
	if err := c.Init(ctx); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	s.adminURL = c.URL("postgres")
	return nil
}

// reapOrphans stops and removes the clusters of test binaries that died before their
// teardown (killed, or timed out).
func reapOrphans(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), tempPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // not ours, or its owner lives
		}
		if err := (&pglocal.Cluster{Dir: dir}).Stop(ctx); err == nil {
			os.RemoveAll(dir)
		}
	}
}

// startContainer starts a PostgreSQL container, if a Docker engine answers.
func (s *server) startContainer(ctx context.Context) (err error) {
	defer func() { // testcontainers panics in some broken Docker setups
		if r := recover(); r != nil {
			err = fmt.Errorf("docker: %v", r)
		}
	}()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	if err := provider.Health(ctx); err != nil {
		return err
	}
	ctr, err := tcpostgres.Run(ctx, Image,
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=200"),
	)
	if ctr != nil {
		s.teardown = append(s.teardown, func(context.Context) error { return testcontainers.TerminateContainer(ctr) })
	}
	if err != nil {
		return fmt.Errorf("starting container %s: %w", Image, err)
	}
	s.adminURL, err = ctr.ConnectionString(ctx, "sslmode=disable")
	return err
}

// makeTemplate creates and migrates the template database.
func (s *server) makeTemplate(ctx context.Context) error {
	ident := pgx.Identifier{s.template}.Sanitize()
	if Citus() {
		if err := s.createCitusDB(ctx, s.template, ""); err != nil {
			return err
		}
		tmplURL, err := withDatabase(s.adminURL, s.template)
		if err != nil {
			return err
		}
		if err := migrate(ctx, tmplURL, migrations.ShardCountDefault); err != nil {
			return err
		}
		return s.sealCitusTemplate(ctx, s.template)
	}
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("creating template database %s: %w", s.template, err)
	}
	if s.shared {
		s.teardown = append(s.teardown, func(ctx context.Context) error {
			if _, err := s.admin.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("dropping template database %s: %w", s.template, err)
			}
			return nil
		})
	}
	tmplURL, err := withDatabase(s.adminURL, s.template)
	if err != nil {
		return err
	}
	return migrate(ctx, tmplURL, migrations.ShardCountDefault)
}

// close undoes what start did, in reverse order.
func (s *server) close(ctx context.Context) error {
	var errs []error
	for i := len(s.teardown) - 1; i >= 0; i-- {
		errs = append(errs, s.teardown[i](ctx))
	}
	if s.admin != nil {
		s.admin.Close()
	}
	return errors.Join(errs...)
}

func migrate(ctx context.Context, dbURL string, shards int) error {
	m, err := migrations.New(ctx, dbURL, migrations.Options{
		ShardCount: shards,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("migrating %s: %w", dbURL, err)
	}
	defer m.Close()
	if err := m.Up(ctx); err != nil {
		return fmt.Errorf("migrating %s: %w", dbURL, err)
	}
	return m.Close()
}

// withDatabase returns serverURL with its database replaced by name.
func withDatabase(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL", EnvURL)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}
