package outcome

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Failure reports a failed attempt at one chunk.
type Failure struct {
	Token string
	Error string
	// Retry counts one failed attempt and makes the chunk reservable again, unless its
	// attempts are spent; false fails the chunk at once, and its submission's failure
	// policy decides the rest.
	Retry bool
	// RetryAfter is how long the chunk waits before it is reservable again; 0: its
	// submission's backoff.
	RetryAfter time.Duration
}

// errReservationExpired is the error recorded for an attempt whose lease ran out.
const errReservationExpired = "reservation expired"

// Fail records failed attempts, wherever their reservations are held. The statuses are
// in the order of items.
func (o *Recorder) Fail(ctx context.Context, items []Failure) ([]opsqtype.TokenStatus, error) {
	status := make([]opsqtype.TokenStatus, len(items))
	for i, it := range items {
		t, ok := o.readToken(it.Token)
		if !ok {
			status[i] = opsqtype.StatusUnknown
			continue
		}
		// Fenced by the generation the token was issued under: once the chunk's shard has
		// changed owner, the chunk was handed out again (or will be), and this attempt is
		// over: its fail is lost and changes nothing (DESIGN.md §8).
		a := attempt{t: t, tok: it.Token, msg: it.Error, retry: it.Retry, fence: &opsqsql.Fence{Generation: t.Generation}}
		if it.RetryAfter > 0 {
			a.delay = &it.RetryAfter
		}
		var err error
		status[i], err = o.failAttempt(ctx, a)
		var fenced *opsqsql.FenceError
		if errors.As(err, &fenced) {
			status[i], err = opsqtype.StatusLost, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return status, nil
}

// attempt is a failed attempt to record: the token t of its reservation, whose text tok
// is a consumer's (its reservation is then dropped wherever it is held) or the expired one
// the owner passes with the fence of its claim (under which it is written: a
// *sql.FenceError, naming the shard, means the shard is no longer held under it, and
// nothing was written); its error, whether a retry is asked, and the wait before the
// chunk is reservable again (nil: its submission's backoff).
type attempt struct {
	t     tokens.Token
	tok   string
	msg   string
	retry bool
	delay *time.Duration
	fence *opsqsql.Fence
}

// failAttempt counts the failed attempt a at its chunk: it retries the chunk while attempts
// remain (and retry is asked), else fails it, and its submission's failure policy decides
// the rest.
func (o *Recorder) failAttempt(ctx context.Context, a attempt) (opsqtype.TokenStatus, error) {
	t, chunk := a.t, a.t.Chunk()
	msg := opsqtype.CutError(a.msg)
	consumer := ""
	if r, ok := o.cfg.Reserver.Get(a.tok); ok {
		consumer = r.Consumer
	}
	if a.retry {
		_, heldHere := o.cfg.Reserver.Get(a.tok)
		released, work := notify.RetriedNotices(t.Shard, a.tok, heldHere)
		// In the completer's next transaction, with the completions of the moment.
		did, err := o.completer.Retry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk, Retries: t.Retries, Fence: a.fence,
			Error: msg, Consumer: consumer, Delay: a.delay, Token: a.tok, Released: released, Work: work})
		if err != nil {
			return "", fmt.Errorf("retrying chunk: %w", err)
		}
		if did.Retried {
			o.failedAttempts.Add(1)
			o.cfg.Bus.Raise(notify.ChunksFreed{Chunks: []notify.Freed{{Key: t.Key, Shard: t.Shard, Retries: t.Retries, Token: a.tok}}})
			return opsqtype.StatusRetrying, nil
		}
	}
	state, p, err := readChunk(ctx, o.cfg.Pool, t)
	if err != nil {
		return "", err
	}
	switch {
	case state == chunkUnknown:
		return opsqtype.StatusUnknown, nil
	case state == chunkFinished:
		return opsqtype.StatusAlreadyFinished, nil
	case p.attempt() != t.Retries:
		return o.endedAttempt(ctx, t, p)
	case a.retry && p.retries < p.maxRetries:
		return opsqtype.StatusAlreadyFinished, nil // changed since the retry looked
	}
	var did opsqsql.ChunkFailed
	err = opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error { return o.failChunk(ctx, a, msg, consumer, &did) })
	if err != nil {
		return "", fmt.Errorf("failing chunk: %w", err)
	}
	if !did.Failed {
		state, p, err := readChunk(ctx, o.cfg.Pool, t)
		switch {
		case err != nil:
			return "", err
		case state == chunkPending && p.attempt() != t.Retries:
			return o.endedAttempt(ctx, t, p)
		}
		return staleStatus(ctx, o.cfg.Pool, t)
	}
	o.failedAttempts.Add(1)
	o.cfg.Holds.ReleaseHolds(ctx, []string{a.tok})
	if did.Dropped {
		o.cfg.Bus.Raise(notify.SubmissionDropped{ID: t.Key.SubmissionID})
		if did.Sliced {
			o.slicing.run(t.Key.SubmissionID, did.ChunksTotal)
		}
	} else {
		o.cfg.Bus.Raise(notify.ChunksFinished{Keys: []reserver.Key{t.Key}})
	}
	return opsqtype.StatusFailed, nil
}

// failChunk fails a's chunk for good in one transaction (chunk_fail.sql), and tells every
// instance what changed at its commit; did says what it did.
//
// When its submission's failure policy fails the submission, its other pending chunks are
// skipped: in this transaction when they are at most the Slicer's SliceRows (this chunk
// included), as a cancel moves them; else the submission row alone moves here (with the
// NOTIFY that drops it from every instance's caches: from then on no reserve hands out its
// chunks, and no completion or fail records an outcome for them, as after a cancel), and
// its chunks follow by committed slices once this has committed (did.Sliced; slicing runs
// them in the background, and says why).
func (o *Recorder) failChunk(ctx context.Context, a attempt, msg, consumer string, did *opsqsql.ChunkFailed) error {
	t, chunk := a.t, a.t.Chunk()
	var skipNow int64 // no bound
	if o.cfg.Slicer != nil {
		skipNow = int64(o.cfg.Slicer.SliceRows())
	}
	return opsqsql.InTx(ctx, o.cfg.Pool, func(q opsqsql.Queries) error {
		var err error
		*did, err = q.ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk, Retries: t.Retries, Error: msg, Consumer: consumer,
			Fence: a.fence, SkipNow: skipNow})
		switch {
		case err != nil || !did.Failed:
			return err
		case did.Dropped: // the submission failed: every instance drops its chunks
			return notify.SendDropped(ctx, q, t.Key.SubmissionID)
		}
		if err := notify.SendFinishedChunks(ctx, q, []reserver.Key{t.Key}); err != nil {
			return err
		}
		if did.Finished {
			return notify.SendFinished(ctx, q, t.Key.SubmissionID)
		}
		return notify.SendProgress(ctx, q, t.Key.SubmissionID) // those following the results read on
	})
}

// endedAttempt answers the fail of a token whose attempt is over while its chunk is
// pending at another attempt, p's (DESIGN.md §8: every hand-out is a new attempt). When
// the attempt ended without its consumer — its lease ran out, or its instance abandoned it
// at a stop — or its producer retried the chunk since, the chunk was (or will be) handed
// out again and the old token's fail is lost; when it was this token's own fail, counted
// already in the chunk's present budget, a repeat of it is already_finished, as a
// repeated completion is.
func (o *Recorder) endedAttempt(ctx context.Context, t tokens.Token, p pendingChunk) (opsqtype.TokenStatus, error) {
	now := p.attempt()
	if t.Retries < p.attemptBase || t.Retries > now {
		// Its attempt is of an earlier budget: the producer retried the chunk since (a
		// token above the chunk's attempt is of a budget from before attempt_base existed,
		// when a retry set the count back to 0).
		return opsqtype.StatusLost, nil
	}
	msg, err := opsqsql.New(o.cfg.Pool).ChunkAttemptError(ctx, opsqsql.ChunkAttemptErrorParams{Chunk: t.Chunk(), Back: int(now - 1 - t.Retries)})
	switch {
	case errors.Is(err, opsqsql.ErrNotFound): // older than the errors kept
		return opsqtype.StatusLost, nil
	case err != nil:
		return "", fmt.Errorf("reading the error of attempt %d: %w", t.Retries, err)
	case msg == errReservationExpired || msg == errReservationAbandoned:
		return opsqtype.StatusLost, nil
	}
	return opsqtype.StatusAlreadyFinished, nil
}
