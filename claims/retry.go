package claims

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Retry bounds for serializable transactions.
const (
	retryAttempts   = 10
	retryBaseDelay  = 5 * time.Millisecond
	retryMaxDelay   = 500 * time.Millisecond
	lockTimeout     = "1s"
	idleInTxTimeout = "2s"
)

// retrySerializable runs fn in a SERIALIZABLE transaction with short lock and idle
// timeouts, retrying on serialization failures (40001), deadlocks (40P01) and unique
// violations of a concurrent insert (23505) with jittered, capped exponential backoff.
func retrySerializable(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	delay := retryBaseDelay
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+lockTimeout+"'; SET LOCAL idle_in_transaction_session_timeout = '"+idleInTxTimeout+"'"); err != nil {
				return err
			}
			return fn(tx)
		})
		if err == nil || !retryable(err) || attempt == retryAttempts {
			return err
		}
		sleep := delay/2 + rand.N(delay/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sleep):
		}
		delay = min(2*delay, retryMaxDelay)
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", "40P01", "23505":
		return true
	}
	return false
}
