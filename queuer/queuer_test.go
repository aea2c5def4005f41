package queuer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/claims"
	"opsq/migrations/pgtest"
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

func startQueuer(t *testing.T, pool *pgxpool.Pool) *Queuer {
	t.Helper()
	q, err := New(Config{
		Pool:     pool,
		Instance: claims.Instance{ID: fmt.Sprintf("test-%d", instanceSeq.Add(1)), AdvertiseURL: "http://127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatalf("starting queuer: %v", err)
	}
	t.Cleanup(q.Stop)
	return q
}

// count returns the result of a count(*) query.
func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
