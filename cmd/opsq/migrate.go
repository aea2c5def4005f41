package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"opsq/migrations"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: opsq migrate [flags] up|down|status\n\nup applies every pending migration, down rolls back the latest one, status lists them.\n\nflags:")
		fs.PrintDefaults()
	}
	var url, devDir, logLevel string
	var shards int
	envString(fs, &url, "database-url", "OPSQ_DATABASE_URL", "", "PostgreSQL URL")
	envString(fs, &devDir, "dev-cluster", "OPSQ_DEV_CLUSTER", "", "use the local development cluster in this directory when no URL is set")
	envString(fs, &logLevel, "log-level", "OPSQ_LOG_LEVEL", "info", "debug, info, warn or error")
	if err := envInt(fs, &shards, "shard-count", "OPSQ_SHARD_COUNT", migrations.ShardCountDefault, "number of shards, used only by the first migration"); err != nil {
		return err
	}
	// Flags may come before or after the subcommand: "migrate up --database-url …".
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return parseError(err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fs.Usage()
		return errUsage
	}
	action := positional[0]
	log, err := newLogger(logLevel, stderr)
	if err != nil {
		return err
	}
	dbURL, err := databaseURL(ctx, url, devDir, log)
	if err != nil {
		return err
	}
	switch action {
	case "up":
		return migrateUp(ctx, dbURL, shards, log)
	case "down", "status":
	default:
		fs.Usage()
		return errUsage
	}
	m, err := migrations.New(ctx, dbURL, migrations.Options{ShardCount: shards, Logger: log})
	if err != nil {
		return err
	}
	defer m.Close()
	if action == "down" {
		return m.Down(ctx)
	}
	list, err := m.Status(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		applied := "pending"
		if !s.AppliedAt.IsZero() {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(stdout, "%05d  %-40s %s\n", s.Source.Version, s.Source.Path, applied)
	}
	return nil
}

func migrateUp(ctx context.Context, url string, shards int, log *slog.Logger) error {
	m, err := migrations.New(ctx, url, migrations.Options{ShardCount: shards, Logger: log})
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up(ctx)
}
