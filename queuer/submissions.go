package queuer

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// submissions owns the submission rows from insert to deletion: it inserts them with their
// chunks (Submit), reads, lists and waits for their state, cancels them, streams their
// results, and deletes the expired ones (retention, run by the cron jobs), with the waiters
// of WaitFinished. It is safe for concurrent use and has no goroutine of its own.
type submissions struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	clock Clock // where retention cuts
	ids   *idGenerator
	// shardCount is the number of shards; set once, when the queuer starts.
	shardCount int
	// admission bounds the requests that wait on this instance (Config.MaxWaiters):
	// WaitFinished counts among them.
	admission *signal
	finished  *waiters     // WaitFinished, woken by the NOTIFY of a finished submission
	ingested  atomic.Int64 // chunks inserted here, for Stats
}

func newSubmissions(pool *pgxpool.Pool, log *slog.Logger, ids *idGenerator, admission *signal) *submissions {
	return &submissions{pool: pool, log: log, ids: ids, admission: admission, finished: newWaiters()}
}

// Submit inserts a submission and its chunks (see submissions.Submit).
func (q *Queuer) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	c, err := q.subs.Submit(ctx, sub, chunks)
	if err == nil && c.ChunksTotal > 0 {
		// At once, not only when the NOTIFY comes back: a reserve here after the submit sees
		// its chunks wherever they sort.
		q.buffers.dropNewWork()
	}
	return c, err
}

// Status returns the submission's state, or ErrNotFound.
func (q *Queuer) Status(ctx context.Context, id int64) (Status, error) { return q.subs.Status(ctx, id) }

// WaitFinished returns the submission's state once it is finished, or when wait has passed
// (see submissions.WaitFinished).
func (q *Queuer) WaitFinished(ctx context.Context, id int64, wait time.Duration) (Status, error) {
	return q.subs.WaitFinished(ctx, id, wait)
}

// List returns one page of submissions and whether more follow.
func (q *Queuer) List(ctx context.Context, opts ListOptions) ([]Status, bool, error) {
	return q.subs.List(ctx, opts)
}

// Cancel cancels an in-progress submission (see submissions.Cancel).
func (q *Queuer) Cancel(ctx context.Context, id int64) (Status, error) {
	st, err := q.subs.Cancel(ctx, id)
	if err == nil {
		q.buffers.dropSubmission(id) // at once, not only when the NOTIFY comes back
	}
	return st, err
}

// Results streams the outputs of a completed submission (see submissions.Results).
func (q *Queuer) Results(ctx context.Context, id int64, fn func(chunkIndex int64, output []byte) error) error {
	return q.subs.Results(ctx, id, fn)
}
