// Package migrations holds opsq's goose/v3 SQL migrations, embedded in the binary, and runs
// them. Every object lives in the PostgreSQL schema "opsq", goose's own version table
// included, so opsq can share a database with other applications.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS

// VersionTable is goose's version table.
const VersionTable = "opsq.goose_db_version"

// ShardCountDefault is the number of shards of a newly migrated database.
const ShardCountDefault = 64

// Options tune a migration run.
type Options struct {
	// ShardCount is the number of shards the first migration creates; it is ignored once
	// the database has been migrated. Defaults to 64.
	ShardCount int
	// Logger receives one line per applied migration. Defaults to slog.Default().
	Logger *slog.Logger
}

// Migrator applies and inspects migrations. It holds one database/sql handle; Close it.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
}

// New connects to databaseURL and prepares a migrator. Several instances may migrate at the
// same moment: goose takes a PostgreSQL advisory lock around every run.
func New(ctx context.Context, databaseURL string, opts Options) (*Migrator, error) {
	// pgxpool's parser knows the pool_* parameters of a URL meant for a pool; pgx's alone
	// would send them to PostgreSQL as session settings, which it refuses.
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	cfg := poolCfg.ConnConfig
	shards := opts.ShardCount
	if shards == 0 {
		shards = ShardCountDefault
	}
	if shards < 1 || shards > 4096 {
		return nil, fmt.Errorf("shard count %d: must be between 1 and 4096", shards)
	}
	// The first migration reads the shard count from this session setting.
	cfg.RuntimeParams["opsq.shard_count"] = strconv.Itoa(shards)
	db := stdlib.OpenDB(*cfg)
	if err := checkCitus(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS opsq"); err != nil {
		db.Close()
		return nil, fmt.Errorf("creating schema opsq: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(logger),
	)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("preparing migrations: %w", err)
	}
	return &Migrator{db: db, provider: provider}, nil
}

// CitusVersionMin is the oldest Citus major version opsq's tables are made for.
const CitusVersionMin = 12

// checkCitus refuses, before any migration changes anything, a database that opsq cannot
// lay out on Citus: a Citus worker (opsq migrates on the coordinator, which distributes
// the tables to the workers) or a Citus older than CitusVersionMin. On one PostgreSQL it
// does nothing. Migration 00017 does the layout.
func checkCitus(ctx context.Context, db *sql.DB) error {
	var version sql.NullString
	err := db.QueryRowContext(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'citus'").Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking for the citus extension: %w", err)
	}
	major, _, _ := strings.Cut(version.String, ".")
	if v, err := strconv.Atoi(major); err != nil || v < CitusVersionMin {
		return fmt.Errorf("this database has Citus %s; opsq needs Citus %d or newer: upgrade the extension (ALTER EXTENSION citus UPDATE) on every node; nothing was changed",
			version.String, CitusVersionMin)
	}
	var group int
	if err := db.QueryRowContext(ctx, "SELECT groupid FROM pg_dist_local_group").Scan(&group); err != nil {
		return fmt.Errorf("reading the Citus node group: %w", err)
	}
	if group != 0 {
		return fmt.Errorf("this database is a Citus worker (node group %d): run \"opsq migrate up\" against the coordinator, which lays out opsq's tables on its workers; nothing was changed", group)
	}
	return nil
}

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) error {
	if _, err := m.provider.Up(ctx); err != nil {
		return fmt.Errorf("migrating up: %w", err)
	}
	return nil
}

// UpTo applies the pending migrations up to version.
func (m *Migrator) UpTo(ctx context.Context, version int64) error {
	if _, err := m.provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrating up to %d: %w", version, err)
	}
	return nil
}

// Down rolls back the most recent migration.
func (m *Migrator) Down(ctx context.Context) error {
	if _, err := m.provider.Down(ctx); err != nil {
		return fmt.Errorf("migrating down: %w", err)
	}
	return nil
}

// DownTo rolls back every migration newer than version.
func (m *Migrator) DownTo(ctx context.Context, version int64) error {
	if _, err := m.provider.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrating down to %d: %w", version, err)
	}
	return nil
}

// Status reports every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	return m.provider.Status(ctx)
}

// Current reports whether the database has every migration this binary knows.
func (m *Migrator) Current(ctx context.Context) (bool, error) {
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return false, err
	}
	return !pending, nil
}

// Close releases the database handle.
func (m *Migrator) Close() error {
	return m.db.Close()
}

// Latest is the version of the newest migration this binary holds.
func Latest() (int64, error) {
	entries, err := FS.ReadDir(".")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}

// CheckCurrent returns nil when the database has every migration this binary holds, and an
// error saying what to run otherwise. It costs one small query, for readiness checks.
func CheckCurrent(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	latest, err := Latest()
	if err != nil {
		return err
	}
	var version int64
	err = db.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+VersionTable+" WHERE is_applied").Scan(&version)
	if err != nil {
		return fmt.Errorf("reading schema version (run \"opsq migrate up\"): %w", err)
	}
	if version < latest {
		return fmt.Errorf("schema version %d is behind this binary's %d: run \"opsq migrate up\"", version, latest)
	}
	return nil
}
