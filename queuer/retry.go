package queuer

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// withRetry runs fn again when it fails on a serialization failure (40001) or a deadlock
// (40P01), which concurrent batches on several instances can meet, with jittered backoff.
func withRetry(ctx context.Context, fn func() error) error {
	delay := 2 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		var pgErr *pgconn.PgError
		if err == nil || attempt == 8 || !errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay/2 + rand.N(delay)):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
