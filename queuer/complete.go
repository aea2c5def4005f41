package queuer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// ChannelReleased carries "submission_id:chunk_index" keys (comma-separated) of chunks that
// were completed or failed, so that the instance holding their reservations drops them.
const ChannelReleased = "opsq_released"

// notifyPayloadMax keeps NOTIFY payloads under PostgreSQL's 8000-byte limit.
const notifyPayloadMax = 7000

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

// completeJob is one request's completions, waiting for the completer.
type completeJob struct {
	items  []Completion
	bytes  int // of the items' outputs
	tokens []token
	status []wire.TokenStatus
	err    error
	done   chan struct{}
}

// Complete records completions (see completer.Complete).
func (q *Queuer) Complete(ctx context.Context, items []Completion) ([]wire.TokenStatus, error) {
	return q.completer.Complete(ctx, items)
}

// completer owns the completions waiting to be written (its queue) and the goroutine that
// writes them: every request's completions that wait when it is free go into one
// transaction (up to completeBatchMax), so that concurrent consumers share each commit
// (River's jobcompleter). Its goroutine lives from Start until Stop. Complete is safe for
// concurrent use.
type completer struct {
	pool      *pgxpool.Pool
	reserver  *reserver.Reserver
	tombs     *tombstones
	readToken func(string) (token, bool)

	jobs      chan *completeJob
	completed atomic.Int64 // chunks completed here, for Stats

	// loop writes completions from Start until Stop; the completions it has not taken
	// then stay unwritten, and their requests end with their own contexts.
	loop
}

var _ service = (*completer)(nil)

func newCompleter(pool *pgxpool.Pool, r *reserver.Reserver, tombs *tombstones, readToken func(string) (token, bool)) *completer {
	return &completer{pool: pool, reserver: r, tombs: tombs, readToken: readToken, jobs: make(chan *completeJob, 1024)}
}

// Start starts the goroutine that writes completions.
func (c *completer) Start(ctx context.Context) error {
	c.start(ctx, c.run)
	return nil
}

// Complete records completions: the first completion of a chunk wins, repeats are harmless.
// Completions from concurrent requests are written together, one statement per flush (the
// completer), and completing a submission's last chunk completes the submission. The
// result statuses are in the order of items.
func (c *completer) Complete(ctx context.Context, items []Completion) ([]wire.TokenStatus, error) {
	job := &completeJob{items: items, tokens: make([]token, len(items)), status: make([]wire.TokenStatus, len(items)), done: make(chan struct{})}
	valid := 0
	for i, it := range items {
		t, ok := c.readToken(it.Token)
		if !ok {
			job.status[i] = wire.StatusUnknown
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
		n, bytes := len(jobs[0].items), jobs[0].bytes
	more:
		for n < completeBatchMax && bytes < completeBatchBytesMax {
			select {
			case j := <-c.jobs:
				jobs = append(jobs, j)
				n, bytes = n+len(j.items), bytes+j.bytes
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

// flush writes the jobs' completions in one transaction and fills in their statuses.
func (c *completer) flush(ctx context.Context, jobs []*completeJob) error {
	type ref struct{ job, item int }
	first := map[reserver.Key]ref{} // the first completion of each chunk in the batch
	var sids []int64
	var idxs, shards []int32
	var outputs [][]byte
	var tokens []string
	for ji, j := range jobs {
		for i, t := range j.tokens {
			if j.status[i] != "" {
				continue
			}
			tokens = append(tokens, j.items[i].Token)
			if _, dup := first[t.key]; dup {
				j.status[i] = wire.StatusAlreadyFinished
				continue
			}
			first[t.key] = ref{ji, i}
			sids = append(sids, t.key.SubmissionID)
			idxs = append(idxs, t.key.ChunkIndex)
			shards = append(shards, int32(t.shard))
			out := j.items[i].Output
			if out == nil {
				out = []byte{} // no output is an empty one
			}
			outputs = append(outputs, out)
		}
	}
	submissions := slices.Compact(slices.Sorted(slices.Values(sids)))
	completed := map[reserver.Key]bool{}
	err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		clear(completed)
		return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
			db := opsqsql.New(tx)
			if err := db.PlanByKey(ctx); err != nil {
				return err
			}
			locked, err := db.SubmissionsLock(ctx, submissions)
			if err != nil {
				return err
			}
			done, err := db.ChunksComplete(ctx, opsqsql.ChunksCompleteParams{
				SubmissionIDs: sids, ChunkIndexes: idxs, Shards: shards, Outputs: outputs, Tokens: tokens, Locked: locked,
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
					if err := notify(ctx, tx, ChannelFinished, strconv.FormatInt(id, 10)); err != nil {
						return err
					}
				}
			}
			return c.notifyReleased(ctx, tx, completed)
		})
	})
	if err != nil {
		return fmt.Errorf("completing chunks: %w", err)
	}
	var stale []ref // completions that completed nothing
	for k, r := range first {
		if completed[k] {
			c.completed.Add(1)
			jobs[r.job].status[r.item] = wire.StatusCompleted
			c.tombs.add(k)
			c.reserver.ReleaseKey(k)
			continue
		}
		stale = append(stale, r)
	}
	if len(stale) == 0 {
		return nil
	}
	staleTokens := make([]token, len(stale))
	for i, r := range stale {
		staleTokens[i] = jobs[r.job].tokens[r.item]
	}
	known, err := c.chunksKnown(ctx, staleTokens)
	if err != nil {
		return err
	}
	for i, r := range stale {
		jobs[r.job].status[r.item] = wire.StatusUnknown
		if known[i] {
			jobs[r.job].status[r.item] = wire.StatusAlreadyFinished
		}
	}
	return nil
}

// chunksKnown tells, in one statement, which chunks of tokens opsq knows (pending or
// finished): the completions of those that completed nothing are already_finished, the
// others unknown (see staleStatus).
func (c *completer) chunksKnown(ctx context.Context, tokens []token) ([]bool, error) {
	chunks := make([]opsqsql.Chunk, len(tokens))
	for i, t := range tokens {
		chunks[i] = t.chunk()
	}
	known, err := opsqsql.New(c.pool).ChunkStates(ctx, opsqsql.ChunkStatesParams{Chunks: chunks})
	if err != nil {
		return nil, fmt.Errorf("reading chunk states: %w", err)
	}
	return known, nil
}

// notifyReleased tells every instance that these chunks are finished, so that the one
// holding their reservations drops them (this one does it itself after the commit).
func (c *completer) notifyReleased(ctx context.Context, tx pgx.Tx, keys map[reserver.Key]bool) error {
	var b strings.Builder
	for k := range keys {
		if c.reserver.IsReserved(k) {
			continue // ours: released after the commit
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", k.SubmissionID, k.ChunkIndex)
		if b.Len() > notifyPayloadMax {
			if err := notify(ctx, tx, ChannelReleased, b.String()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return notify(ctx, tx, ChannelReleased, b.String())
}

// staleStatus tells why a completion or failure of t did nothing: the chunk is finished
// (completed, failed, or its submission finished), or this attempt at it is over (an
// expired lease was counted, or another token of the chunk was used), or nobody knows it.
func staleStatus(ctx context.Context, pool *pgxpool.Pool, t token) (wire.TokenStatus, error) {
	state, _, err := readChunk(ctx, pool, t)
	if err != nil {
		return "", err
	}
	if state == chunkUnknown {
		return wire.StatusUnknown, nil
	}
	return wire.StatusAlreadyFinished, nil
}

// pendingChunk is a reservable chunk's attempt count and its submission's limit.
type pendingChunk struct {
	retries, maxRetries int32
}

// chunkState is where chunk_state.sql finds a chunk. It is the engine's own word, never
// sent on the wire: consumers hear a wire.TokenStatus.
type chunkState string

// Chunk states; the SQL writes the first two.
const (
	chunkPending  chunkState = "pending"  // reservable, with its retries and limit
	chunkFinished chunkState = "finished" // completed, failed, or its submission finished
	chunkUnknown  chunkState = ""         // no such chunk (never existed, or deleted)
)

// readChunk returns chunkPending (with its counts), chunkFinished, or chunkUnknown.
func readChunk(ctx context.Context, pool *pgxpool.Pool, t token) (chunkState, pendingChunk, error) {
	r, err := opsqsql.New(pool).ChunkState(ctx, opsqsql.ChunkStateParams{Chunk: t.chunk()})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return chunkUnknown, pendingChunk{}, nil
	}
	if err != nil {
		return chunkUnknown, pendingChunk{}, fmt.Errorf("reading chunk state: %w", err)
	}
	return chunkState(r.State), pendingChunk{retries: r.Retries, maxRetries: r.MaxRetries}, nil
}

// notify sends payload on channel at the commit of tx.
func notify(ctx context.Context, tx pgx.Tx, channel, payload string) error {
	return opsqsql.New(tx).Notify(ctx, opsqsql.NotifyParams{Channel: channel, Payload: payload})
}
