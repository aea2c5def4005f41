package handout

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/waiters"
	"opsq/queuer/opsqtype"
	"opsq/queuer/startstop"
	"opsq/reserver"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// engine is a reserve path with the parts it works with, on one database: the claims of
// the shards, the cluster keys, the reservations, a submissions store to insert chunks
// with, an outcome recorder to complete and fail them, and the listener that raises the
// NOTIFYs as events. It is the queuer without forwarding and waiting, which the path's
// tests do not need (the queuer's own tests run the whole engine).
type engine struct {
	pool     *pgxpool.Pool
	path     *Path
	subs     *submissions.Store
	outcomes *outcome.Recorder
	claims   *claims.Manager
	reserver *reserver.Reserver
}

var instanceSeq atomic.Int64

// allAvailable is an Availability that notes nothing: the path's tests do not forward.
type allAvailable struct{}

func (allAvailable) Announced() uint64                          { return 0 }
func (allAvailable) MarkUnavailable(_ []claims.Lease, _ uint64) {}

// noForwarder answers no forwarded extend.
type noForwarder struct{}

func (noForwarder) Extend(context.Context, int, []string, time.Duration) ([]opsqtype.TokenResult, error) {
	return nil, nil
}

// setup starts an engine on a fresh database, stopped when the test ends.
func setup(t *testing.T) (*engine, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	return startEngine(t, pool), pool
}

// startEngine starts an engine on pool, stopped when the test ends.
func startEngine(t *testing.T, pool *pgxpool.Pool) *engine {
	t.Helper()
	return startEngineWith(t, pool, nil)
}

// startEngineWith is startEngine with the submissions store's configuration changed by
// subsCfg (if not nil).
func startEngineWith(t *testing.T, pool *pgxpool.Pool, subsCfg func(*submissions.Config)) *engine {
	t.Helper()
	ctx := t.Context()
	log := pgtest.Logger(t, slog.LevelWarn)
	settings, err := claims.LoadSettings(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{pool: pool, reserver: reserver.New(reserver.Config{})}
	var bus notify.Bus
	ids := submissions.NewIDs()
	keys := tokens.NewKeyring(pool, log)
	if err := keys.Load(ctx); err != nil {
		t.Fatal(err)
	}
	e.claims, err = claims.New(claims.Config{
		Pool:       pool,
		Instance:   claims.Instance{ID: fmt.Sprintf("reserve-test-%d", instanceSeq.Add(1)), AdvertiseURL: "http://127.0.0.1:1"},
		Logger:     log,
		Report:     func(shard int) (int, bool) { return e.reserver.InflightShard(shard), true },
		OnLost:     func(shards []int) { bus.Raise(notify.ShardsChanged{Lost: shards}) },
		OnAcquired: func(shards []int) { bus.Raise(notify.ShardsChanged{Acquired: shards}) },
		OnNode:     ids.SetNode,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.path = New(Config{Pool: pool, ShardCount: settings.ShardCount, Log: log, Now: time.Now, Claims: e.claims, Reserver: e.reserver, Keys: keys,
		Bus: &bus, Availability: allAvailable{}})
	sc := submissions.Config{Pool: pool, ShardCount: settings.ShardCount, Log: log, Now: time.Now, IDs: ids, Admission: waiters.New(0, 0), Bus: &bus,
		Ingested: e.path.AfterIngest}
	if subsCfg != nil {
		subsCfg(&sc)
	}
	e.subs = submissions.New(sc)
	e.outcomes = outcome.New(outcome.Config{Pool: pool, ShardCount: settings.ShardCount, Log: log, Now: time.Now, Instance: "reserve-test", Claims: e.claims,
		Reserver: e.reserver, Keys: keys, Router: noForwarder{}, Holds: e.path, Bus: &bus, Slicer: e.subs})
	bus.Subscribe(e.path, e.subs)
	services := []startstop.Service{notify.NewListener(pool, log, &bus, nil, func(tok string) (notify.Freed, bool) {
		t, err := tokens.Parse(tok)
		return notify.Freed{Key: t.Key, Shard: t.Shard, Retries: t.Retries, Token: tok}, err == nil
	}), e.path, e.outcomes, e.claims, startstop.NewCron(e.path.Jobs()...)}
	if err := startstop.StartAll(ctx, services); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { startstop.StopAll(services) })
	pgtest.Eventually(t, 10*time.Second, "a node id", func() bool { return ids.Valid(time.Now()) })
	return e
}

// Reserve reserves from the engine's shards in a shared run (Path.Reserve).
func (e *engine) Reserve(ctx context.Context, req Request) ([]Chunk, error) {
	return e.path.Reserve(ctx, req)
}

// Complete, Fail and Cancel are the outcome recorder's and the submissions store's.
func (e *engine) Complete(ctx context.Context, items []outcome.Completion) ([]opsqtype.TokenStatus, error) {
	return e.outcomes.Complete(ctx, items)
}

func (e *engine) Fail(ctx context.Context, items []outcome.Failure) ([]opsqtype.TokenStatus, error) {
	return e.outcomes.Fail(ctx, items)
}

func (e *engine) Cancel(ctx context.Context, id int64) (submissions.Status, error) {
	return e.subs.Cancel(ctx, id)
}

// submitN inserts a submission of n chunks, "chunk-0" to "chunk-<n-1>".
func submitN(t *testing.T, e *engine, n int, sub submissions.NewSubmission) int64 {
	t.Helper()
	c, err := e.subs.Submit(t.Context(), sub, &genChunks{n: n})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// genChunks yields n chunks "chunk-0", "chunk-1", …
type genChunks struct{ n, i int }

func (g *genChunks) Next() ([]byte, error) {
	if g.i >= g.n {
		return nil, io.EOF
	}
	g.i++
	return fmt.Appendf(nil, "chunk-%d", g.i-1), nil
}

// reserveN reserves for req, with a lease of a minute and the default strategy unless
// req says otherwise.
func reserveN(t *testing.T, e *engine, req Request) []Chunk {
	t.Helper()
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Lease == 0 {
		req.Lease = time.Minute
	}
	if req.Strategy.Kind == "" {
		req.Strategy = strategy.Default
	}
	chunks, err := e.Reserve(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// consumeAllOnce runs workers consumers that reserve (worker g asking with ask(g)) and
// complete until no reserve answers anything, and fails unless each of the total chunks
// of the 3 submissions in the queue was handed out exactly once and all 3 completed.
func consumeAllOnce(t *testing.T, q *engine, pool *pgxpool.Pool, workers, total int, ask func(g int) Request) {
	t.Helper()
	pgtest.HandOutEachOnce(t, workers, total, func(g int) ([]reserver.Key, error) {
		chunks, err := q.Reserve(context.Background(), ask(g))
		if err != nil || len(chunks) == 0 {
			return nil, err
		}
		keys, items := make([]reserver.Key, len(chunks)), make([]outcome.Completion, len(chunks))
		for i, c := range chunks {
			keys[i], items[i] = reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex}, outcome.Completion{Token: c.Token}
		}
		_, err = q.Complete(context.Background(), items)
		return keys, err
	})
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submissions_completed"); n != 3 {
		t.Fatalf("%d submissions completed; want 3", n)
	}
}
