package sql

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// RetryPolicy says which failures of a database operation are worth running it again for,
// how many times, and how long to wait between runs: Base at first, doubling up to Max,
// each wait jittered to between half and one and a half of it.
type RetryPolicy struct {
	// Codes are the SQLSTATE codes retried; any other error ends the retries.
	Codes    []string
	Attempts int // runs in all, the first included
	Base     time.Duration
	Max      time.Duration
}

// The policies of opsq's transactions.
var (
	// RetryConflicts is for the engine's batched writes (completions) that concurrent
	// batches on several instances can make conflict: a serialization failure (40001) or
	// a deadlock (40P01).
	RetryConflicts = RetryPolicy{Codes: []string{"40001", "40P01"}, Attempts: 8, Base: 2 * time.Millisecond, Max: 200 * time.Millisecond}
	// RetryClaims is for the claims protocol's SERIALIZABLE transactions, which also meet a
	// concurrent insert of the same row (23505) when instances start together.
	RetryClaims = RetryPolicy{Codes: []string{"40001", "40P01", "23505"}, Attempts: 10, Base: 5 * time.Millisecond, Max: 500 * time.Millisecond}
)

// Retry runs fn, and runs it again under p while it fails with one of p's codes. It returns
// fn's last error, or ctx's error when ctx ends during a wait.
func Retry(ctx context.Context, p RetryPolicy, fn func() error) error {
	delay := p.Base
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= p.Attempts || !p.retries(err) {
			return err
		}
		t := time.NewTimer(delay/2 + rand.N(delay+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, p.Max)
	}
}

// retries reports whether err is one of p's codes.
func (p RetryPolicy) retries(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && slices.Contains(p.Codes, pgErr.Code)
}
