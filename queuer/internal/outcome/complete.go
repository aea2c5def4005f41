package outcome

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Completion completes one chunk.
type Completion struct {
	Token  string
	Output []byte
}

// The completions written by one statement: the completer stops adding requests' completions
// to a batch once it holds completeBatchMax of them, or completeBatchBytesMax bytes of
// output. A batch's outputs of one submission go into one row of opsq.completed_batches
// (migrations/00006), which PostgreSQL keeps under 1 GB.
const (
	completeBatchMax      = 1000
	completeBatchBytesMax = 64 << 20
)

// completeJob is one request's completions, or one retried attempt, waiting for the
// completer.
type completeJob struct {
	items  []Completion
	bytes  int // of the items' outputs
	tokens []tokens.Token
	status []opsqtype.TokenStatus
	retry  *retryJob
	err    error
	done   chan struct{}
}

// retryJob is a retried attempt (chunk_retry.sql), written in the completer's transaction
// with the completions of the moment: a retry writes about as much as a completion, and a
// transaction of its own, with its commit, cost the burn-down of a backlog failing 1 % of
// its attempts a quarter of its rate (the bench's failures workload).
type retryJob struct {
	p   opsqsql.ChunkRetryParams
	did opsqsql.ChunkRetried
	err error // a *sql.FenceError: the fence refused, nothing was written for it
}

// Complete records completions (see completer.Complete).
func (o *Recorder) Complete(ctx context.Context, items []Completion) ([]opsqtype.TokenStatus, error) {
	return o.completer.Complete(ctx, items)
}

// completer owns the completions waiting to be written (its queue) and the goroutine that
// writes them: every request's completions that wait when it is free go into one
// transaction (up to completeBatchMax), so that concurrent consumers share each commit
// (River's jobcompleter). Its goroutine lives from Start until Stop. Complete is safe for
// concurrent use.
type completer struct {
	pool      opsqsql.Pool
	reserver  *reserver.Reserver
	bus       *notify.Bus
	readToken func(string) (tokens.Token, bool)

	jobs      chan *completeJob
	completed atomic.Int64 // chunks completed here, for Stats

	// Loop writes completions from Start until Stop; the completions it has not taken
	// then stay unwritten, and their requests end with their own contexts.
	startstop.Loop
}

var _ startstop.Service = (*completer)(nil)

func newCompleter(pool opsqsql.Pool, r *reserver.Reserver, bus *notify.Bus, readToken func(string) (tokens.Token, bool)) *completer {
	return &completer{pool: pool, reserver: r, bus: bus, readToken: readToken, jobs: make(chan *completeJob, 1024)}
}

// Start starts the goroutine that writes completions.
func (c *completer) Start(ctx context.Context) error {
	c.Go(ctx, c.run)
	return nil
}

// Complete records completions: the first completion of a chunk wins, repeats are harmless.
// Completions from concurrent requests are written together, one statement per flush (the
// completer), and completing a submission's last chunk completes the submission. The
// result statuses are in the order of items.
func (c *completer) Complete(ctx context.Context, items []Completion) ([]opsqtype.TokenStatus, error) {
	job := &completeJob{items: items, tokens: make([]tokens.Token, len(items)), status: make([]opsqtype.TokenStatus, len(items)), done: make(chan struct{})}
	valid := 0
	for i, it := range items {
		t, ok := c.readToken(it.Token)
		if !ok {
			job.status[i] = opsqtype.StatusUnknown
			continue
		}
		job.tokens[i] = t
		job.bytes += len(it.Output)
		valid++
	}
	if valid == 0 {
		return job.status, nil
	}
	select {
	case c.jobs <- job:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-job.done:
		return job.status, job.err
	case <-ctx.Done():
		return nil, ctx.Err() // the flush goes on; a retry of the request is harmless
	}
}

// Retry counts a failed attempt and makes the chunk reservable again (chunk_retry.sql), in
// the completer's next transaction; a *sql.FenceError when p.Fence refused.
func (c *completer) Retry(ctx context.Context, p opsqsql.ChunkRetryParams) (opsqsql.ChunkRetried, error) {
	job := &completeJob{retry: &retryJob{p: p}, done: make(chan struct{})}
	select {
	case c.jobs <- job:
	case <-ctx.Done():
		return opsqsql.ChunkRetried{}, ctx.Err()
	}
	select {
	case <-job.done:
		if job.err != nil {
			return opsqsql.ChunkRetried{}, job.err
		}
		return job.retry.did, job.retry.err
	case <-ctx.Done():
		return opsqsql.ChunkRetried{}, ctx.Err() // the flush goes on
	}
}

// run writes completions until ctx ends: it takes every job waiting, up to
// completeBatchMax completions or completeBatchBytesMax bytes, and writes them in one
// transaction.
func (c *completer) run(ctx context.Context) {
	for {
		var jobs []*completeJob
		select {
		case <-ctx.Done():
			return
		case j := <-c.jobs:
			jobs = append(jobs, j)
		}
		n, bytes := max(len(jobs[0].items), 1), jobs[0].bytes
	more:
		for n < completeBatchMax && bytes < completeBatchBytesMax {
			select {
			case j := <-c.jobs:
				jobs = append(jobs, j)
				n, bytes = n+max(len(j.items), 1), bytes+j.bytes
			default:
				break more
			}
		}
		err := c.flush(ctx, jobs)
		for _, j := range jobs {
			j.err = err
			close(j.done)
		}
	}
}

// flush writes the jobs' completions and retries in one transaction and fills in their
// statuses.
func (c *completer) flush(ctx context.Context, jobs []*completeJob) error {
	type ref struct{ job, item int }
	first := map[reserver.Key]ref{} // the first completion of each chunk in the batch
	var sids []int64
	var idxs, shards []int32
	var outputs [][]byte
	var toks []string
	var rows []opsqsql.RowAddr // where the chunks reserved here were read (reserver.Reservation.Row)
	for ji, j := range jobs {
		for i, t := range j.tokens {
			if j.status[i] != "" {
				continue
			}
			toks = append(toks, j.items[i].Token)
			if _, dup := first[t.Key]; dup {
				j.status[i] = opsqtype.StatusAlreadyFinished
				continue
			}
			first[t.Key] = ref{ji, i}
			sids = append(sids, t.Key.SubmissionID)
			idxs = append(idxs, t.Key.ChunkIndex)
			shards = append(shards, int32(t.Shard))
			out := j.items[i].Output
			if out == nil {
				out = []byte{} // no output is an empty one
			}
			outputs = append(outputs, out)
			var row opsqsql.RowAddr
			if res, ok := c.reserver.Get(j.items[i].Token); ok {
				row = opsqsql.RowAddr(res.Row)
			}
			rows = append(rows, row)
		}
	}
	submissions := slices.Compact(slices.Sorted(slices.Values(sids)))
	completed := map[reserver.Key]bool{}
	err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		clear(completed)
		return opsqsql.InTx(ctx, c.pool, func(q opsqsql.Queries) error {
			db := q
			// The batch's statements go in four round trips when it holds no retry:
			// BEGIN, the planner's settings with the lock of the submissions and whether
			// any max_simultaneous slot is held, the complete statement with its NOTIFY,
			// COMMIT (each round trip of a batch cost
			// PostgreSQL about 0.1 µs per chunk in the burn-down, docs/capacity.md).
			// A retry comes first, after the settings: the retries are statements by key
			// too. Planned without them, each retry was planned anew, a custom plan over
			// every chunk partition (before migration 00026): a third of PostgreSQL's CPU
			// in a burn-down failing 1 % of its attempts (perf), and 10 µs more per chunk
			// than a clean one.
			retries := slices.ContainsFunc(jobs, func(j *completeJob) bool { return j.retry != nil })
			if retries {
				if err := db.PlanByKey(ctx); err != nil {
					return err
				}
				if err := c.retry(ctx, db, jobs); err != nil {
					return err
				}
			}
			if len(sids) == 0 {
				return nil
			}
			var locked []int64
			holds := true // the tokens' max_simultaneous slots, if any, are freed
			var err error
			if retries {
				locked, err = db.SubmissionsLock(ctx, submissions)
			} else {
				locked, holds, err = db.PlanByKeyLock(ctx, submissions)
			}
			if err != nil {
				return err
			}
			freeTokens := toks
			if !holds {
				// No slot held at all, so none by these tokens (sql/holds_exist.sql):
				// their text is not sent.
				freeTokens = []string{}
			}
			// Those following the submissions' results read on: every submission of the
			// batch is told, sent with the complete statement, before its answer says
			// which ones it completed chunks of (a wake-up with nothing new is harmless,
			// as is the finished one's NOTIFY besides).
			done, err := db.ChunksComplete(ctx, opsqsql.ChunksCompleteParams{
				SubmissionIDs: sids, ChunkIndexes: idxs, Shards: shards, Outputs: outputs, Tokens: freeTokens, Locked: locked, Rows: rows,
				Notify: notify.Progress(locked...),
			})
			if err != nil {
				return err
			}
			var finished []int64
			for _, d := range done {
				completed[reserver.Key{SubmissionID: d.SubmissionID, ChunkIndex: d.ChunkIndex}] = true
				if d.SubmissionFinished && !slices.Contains(finished, d.SubmissionID) {
					finished = append(finished, d.SubmissionID)
				}
			}
			if len(finished) > 0 {
				if err := db.SubmissionsFinishCompleted(ctx, opsqsql.SubmissionsFinishCompletedParams{IDs: finished}); err != nil {
					return err
				}
				for _, id := range finished {
					if err := notify.SendFinished(ctx, q, id); err != nil {
						return err
					}
				}
			}
			return c.notifyReleased(ctx, q, completed)
		})
	})
	if err != nil {
		return fmt.Errorf("completing chunks: %w", err)
	}
	var stale []ref // completions that completed nothing
	var done []reserver.Key
	for k, r := range first {
		if completed[k] {
			jobs[r.job].status[r.item] = opsqtype.StatusCompleted
			done = append(done, k)
			continue
		}
		stale = append(stale, r)
	}
	c.completed.Add(int64(len(done)))
	if len(done) > 0 {
		c.bus.Raise(notify.ChunksFinished{Keys: done})
	}
	if len(stale) == 0 {
		return nil
	}
	staleTokens := make([]tokens.Token, len(stale))
	for i, r := range stale {
		staleTokens[i] = jobs[r.job].tokens[r.item]
	}
	known, err := c.chunksKnown(ctx, staleTokens)
	if err != nil {
		return err
	}
	for i, r := range stale {
		jobs[r.job].status[r.item] = opsqtype.StatusUnknown
		if known[i] {
			jobs[r.job].status[r.item] = opsqtype.StatusAlreadyFinished
		}
	}
	return nil
}

// retry writes the jobs' retries on db, each job's outcome in it: a fence's refusal is
// the job's, not the transaction's (nothing was written for it).
func (c *completer) retry(ctx context.Context, db opsqsql.Queries, jobs []*completeJob) error {
	for _, j := range jobs {
		if j.retry == nil {
			continue
		}
		var fenced *opsqsql.FenceError
		j.retry.did, j.retry.err = db.ChunkRetry(ctx, j.retry.p)
		if errors.As(j.retry.err, &fenced) {
			continue
		}
		if j.retry.err != nil {
			return j.retry.err
		}
	}
	return nil
}

// chunksKnown tells, in one statement, which chunks of tokens opsq knows (pending or
// finished): the completions of those that completed nothing are already_finished, the
// others unknown (see staleStatus).
func (c *completer) chunksKnown(ctx context.Context, toks []tokens.Token) ([]bool, error) {
	chunks := make([]opsqsql.Chunk, len(toks))
	for i, t := range toks {
		chunks[i] = t.Chunk()
	}
	known, err := opsqsql.New(c.pool).ChunkStates(ctx, opsqsql.ChunkStatesParams{Chunks: chunks})
	if err != nil {
		return nil, fmt.Errorf("reading chunk states: %w", err)
	}
	return known, nil
}

// notifyReleased tells every instance that these chunks are finished, so that the one
// holding their reservations drops them (this one does it itself after the commit).
func (c *completer) notifyReleased(ctx context.Context, q opsqsql.Queries, keys map[reserver.Key]bool) error {
	var others []reserver.Key
	for k := range keys {
		if !c.reserver.IsReserved(k) { // ours: released after the commit
			others = append(others, k)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return notify.SendFinishedChunks(ctx, q, others)
}

// staleStatus tells why a completion or failure of t did nothing: the chunk is finished
// (completed, failed, or its submission finished), or this attempt at it is over (an
// expired lease was counted, or another token of the chunk was used), or nobody knows it.
func staleStatus(ctx context.Context, pool opsqsql.Pool, t tokens.Token) (opsqtype.TokenStatus, error) {
	state, _, err := readChunk(ctx, pool, t)
	if err != nil {
		return "", err
	}
	if state == chunkUnknown {
		return opsqtype.StatusUnknown, nil
	}
	return opsqtype.StatusAlreadyFinished, nil
}

// pendingChunk is a reservable chunk's retries count, its submission's limit, and its
// attempt (attemptBase + retries: the attempt its latest token names, which only grows;
// migrations/00016).
type pendingChunk struct {
	retries, maxRetries, attemptBase int32
}

// attempt is the chunk's attempt, as a token names it (tokens.Token.Retries).
func (p pendingChunk) attempt() int32 { return p.attemptBase + p.retries }

// chunkState is where chunk_state.sql finds a chunk. It is the engine's own word, never
// sent on the wire: consumers hear a opsqtype.TokenStatus.
type chunkState string

// Chunk states; the SQL writes the first two.
const (
	chunkPending  chunkState = "pending"  // reservable, with its retries and limit
	chunkFinished chunkState = "finished" // completed, failed, or its submission finished
	chunkUnknown  chunkState = ""         // no such chunk (never existed, or deleted)
)

// readChunk returns chunkPending (with its counts), chunkFinished, or chunkUnknown.
func readChunk(ctx context.Context, pool opsqsql.Pool, t tokens.Token) (chunkState, pendingChunk, error) {
	r, err := opsqsql.New(pool).ChunkState(ctx, opsqsql.ChunkStateParams{Chunk: t.Chunk()})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return chunkUnknown, pendingChunk{}, nil
	}
	if err != nil {
		return chunkUnknown, pendingChunk{}, fmt.Errorf("reading chunk state: %w", err)
	}
	return chunkState(r.State), pendingChunk{retries: r.Retries, maxRetries: r.MaxRetries, attemptBase: r.AttemptBase}, nil
}
