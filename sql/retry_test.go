package sql

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRetry(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Codes: []string{"40001"}, Attempts: 4, Base: time.Millisecond, Max: 2 * time.Millisecond}
	conflict := fmt.Errorf("committing: %w", &pgconn.PgError{Code: "40001"})
	other := &pgconn.PgError{Code: "23505"}

	runs := 0
	err := Retry(t.Context(), p, func() error {
		runs++
		if runs < 3 {
			return conflict
		}
		return nil
	})
	if err != nil || runs != 3 {
		t.Errorf("two conflicts then success: %v after %d runs; want nil after 3", err, runs)
	}

	runs = 0
	err = Retry(t.Context(), p, func() error { runs++; return conflict })
	if !errors.Is(err, conflict) || runs != p.Attempts {
		t.Errorf("always a conflict: %v after %d runs; want the conflict after %d", err, runs, p.Attempts)
	}

	runs = 0
	err = Retry(t.Context(), p, func() error { runs++; return other })
	if !errors.Is(err, other) || runs != 1 {
		t.Errorf("a code the policy does not retry: %v after %d runs; want it after 1", err, runs)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	runs = 0
	err = Retry(ctx, RetryPolicy{Codes: []string{"40001"}, Attempts: 10, Base: time.Hour, Max: time.Hour}, func() error { runs++; return conflict })
	if !errors.Is(err, context.Canceled) || runs != 1 {
		t.Errorf("a conflict with the context ended: %v after %d runs; want context.Canceled after 1", err, runs)
	}
}
