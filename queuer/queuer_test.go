package queuer

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/claims"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

var instanceSeq atomic.Int64

// setup returns a started Queuer on a fresh database, stopped when the test ends.
func setup(t *testing.T) (*Queuer, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	return startQueuer(t, pool), pool
}

// setupClock is setup with a clock the test moves by hand.
func setupClock(t *testing.T) (*Queuer, *pgxpool.Pool, *pgtest.Clock) {
	t.Helper()
	pool := pgtest.NewPool(t)
	clock := pgtest.NewClock()
	return startQueuerClock(t, pool, clock), pool, clock
}

// startQueuer starts a Queuer on pool, stopped when the test ends. It is
// queuertest.Start for queuer's own tests, which cannot import queuertest (it imports
// queuer).
func startQueuer(t *testing.T, pool *pgxpool.Pool) *Queuer {
	t.Helper()
	return startQueuerClock(t, pool, nil)
}

// startQueuerClock is startQueuer with clock (nil: the system's).
func startQueuerClock(t *testing.T, pool *pgxpool.Pool, clock Clock) *Queuer {
	t.Helper()
	return startQueuerWith(t, pool, func(cfg *Config) {
		if clock != nil {
			cfg.Clock = clock
		}
	})
}

// startQueuerWith is startQueuer with the test's changes to its Config.
func startQueuerWith(t *testing.T, pool *pgxpool.Pool, change func(*Config)) *Queuer {
	t.Helper()
	cfg := Config{
		Pool:     pool,
		Instance: claims.Instance{ID: fmt.Sprintf("test-%d", instanceSeq.Add(1)), AdvertiseURL: "http://127.0.0.1:1"},
		Logger:   pgtest.Logger(t, slog.LevelWarn),
	}
	change(&cfg)
	q, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatalf("starting queuer: %v", err)
	}
	t.Cleanup(q.Stop)
	return q
}
