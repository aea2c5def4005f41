package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"opsq/sql/pglocal"
)

// devDatabaseName is the database "make run" uses in its development cluster.
const devDatabaseName = "opsq"

// devDatabase starts (or reuses) the development cluster in dir and returns the URL of its
// opsq database, creating the database the first time.
func devDatabase(ctx context.Context, dir string, log *slog.Logger) (string, error) {
	c, err := pglocal.EnsureDev(ctx, dir, 0)
	if err != nil {
		return "", fmt.Errorf("starting the development PostgreSQL in %s (set OPSQ_DATABASE_URL to use another server): %w", dir, err)
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connecting to the development PostgreSQL (log: %s): %w", c.LogFile(), err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+devDatabaseName)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // 42P04: it exists
		return "", fmt.Errorf("creating database %s: %w", devDatabaseName, err)
	}
	url := c.URL(devDatabaseName)
	log.Info("using the development PostgreSQL", slog.String("dir", dir), slog.String("url", url), slog.String("log", c.LogFile()))
	return url, nil
}
