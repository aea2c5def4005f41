package claims

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	opsqsql "opsq/sql"
)

// Timeouts of the claims transactions.
const (
	lockTimeout     = "1s"
	idleInTxTimeout = "2s"
)

// retrySerializable runs fn in a SERIALIZABLE transaction with short lock and idle
// timeouts, again under opsqsql.RetryClaims while it meets a conflict.
func retrySerializable(ctx context.Context, pool *pgxpool.Pool, fn func(q opsqsql.Queries) error) error {
	return opsqsql.InSerializable(ctx, pool, opsqsql.RetryClaims, func(q opsqsql.Queries) error {
		if err := q.ClaimsTimeouts(ctx, opsqsql.ClaimsTimeoutsParams{
			LockTimeout: lockTimeout, IdleInTransactionSessionTimeout: idleInTxTimeout,
		}); err != nil {
			return err
		}
		return fn(q)
	})
}
