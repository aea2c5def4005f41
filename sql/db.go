package sql

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what a statement runs on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. SendBatch is
// for the methods that send one statement many times in one round trip (SubmissionsCancel),
// CopyFrom for the chunks' COPY (ChunksCopy).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

// Queries runs the engine's statements on one DB, each with its own parameter struct
// (…Params) and, when it returns rows, its own row struct (…Row), in the way of River's
// riverdriver: no caller builds arguments by name or scans columns by position, and the
// errors come back translated (errors.go). The zero value is not usable; use New. A
// Queries is as safe for concurrent use as its DB (a pool is, a transaction is not).
//
// Every statement is reached through its method only; its text is unexported, beside the
// method (Source gives it to tests). The candidate queries, which strategy compiles, run
// through CandidatesStream. statements.go lists the methods.
type Queries struct {
	db DB
}

// New returns the statements run on db.
func New(db DB) Queries { return Queries{db: db} }

//go:embed notify.sql
var notify string

// NotifyParams are notify.sql's.
type NotifyParams struct {
	Channel string
	Payload string
}

// Notify sends p.Payload on p.Channel (pg_notify), at the commit of db's transaction when
// db is one.
func (q Queries) Notify(ctx context.Context, p NotifyParams) error {
	_, err := q.db.Exec(ctx, notify, pgx.NamedArgs{"channel": p.Channel, "payload": p.Payload})
	return err
}
