package api

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// env is one API server on a fresh database.
type env struct {
	URL   string // the server's base URL, without a trailing slash
	Q     *queuer.Queuer
	Pool  *pgxpool.Pool
	Limit Config // the limits the server runs with
	H     *Handler
}

// setup starts an API server on a fresh database, with cfg's limits (zero: the defaults).
// Everything stops when the test ends.
func setup(t *testing.T, cfg Config) *env {
	t.Helper()
	return setupQueuer(t, cfg, queuer.Config{})
}

// setupQueuer is setup with the queuer's config qcfg (its pool made here).
func setupQueuer(t *testing.T, cfg Config, qcfg queuer.Config) *env {
	t.Helper()
	pool := pgtest.NewPool(t)
	qcfg.Pool = pool
	q := queuertest.Start(t, qcfg)
	cfg.Queuer = q
	h := New(cfg)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = ConnContext // as opsq serve has it
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { // before srv.Close: the reserves parked on hijacked connections end
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return &env{URL: srv.URL, Q: q, Pool: pool, Limit: cfg, H: h}
}
