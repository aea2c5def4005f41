package sql

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Transactions: a part that needs several statements to commit together runs them in a
// function that gets the statements bound to the transaction, and never holds the
// transaction itself. The function's error rolls the transaction back and is returned as
// it is; nil commits.

// Beginner is what a transaction begins on: a *pgxpool.Pool or a *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Pool is the database as the engine's parts use it: statements run on it (New) and
// transactions begin on it (InTx). A *pgxpool.Pool is one.
type Pool interface {
	DB
	Beginner
}

// InTx runs fn in a transaction on db (READ COMMITTED, read-write).
func InTx(ctx context.Context, db Beginner, fn func(q Queries) error) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(New(tx)) })
}

// InSnapshot runs fn in a read-only REPEATABLE READ transaction: every statement of fn
// reads the database as it was at its first.
func InSnapshot(ctx context.Context, db Beginner, fn func(q Queries) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, db, opts, func(tx pgx.Tx) error { return fn(New(tx)) })
}

// InSerializable runs fn in a SERIALIZABLE transaction on db, and again under p while it
// meets one of p's conflicts (Retry).
func InSerializable(ctx context.Context, db Beginner, p RetryPolicy, fn func(q Queries) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.Serializable}
	return Retry(ctx, p, func() error {
		return pgx.BeginTxFunc(ctx, db, opts, func(tx pgx.Tx) error { return fn(New(tx)) })
	})
}
