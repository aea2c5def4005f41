package outcome

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/api/wire"
	"opsq/queuer/notify"
	"opsq/queuer/tokens"
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
func (o *Recorder) Fail(ctx context.Context, items []Failure) ([]wire.TokenStatus, error) {
	status := make([]wire.TokenStatus, len(items))
	for i, it := range items {
		t, ok := o.readToken(it.Token)
		if !ok {
			status[i] = wire.StatusUnknown
			continue
		}
		var err error
		if status[i], err = o.failAttempt(ctx, t, it.Token, it.Error, it.Retry, nil); err != nil {
			return nil, err
		}
	}
	return status, nil
}

// failAttempt counts the failed attempt t at its chunk: it retries the chunk while attempts
// remain (and retry is asked), else fails it and its submission. tok is the reservation's
// token: a consumer's, whose reservation is then dropped wherever it is held, or the
// expired one the owner passes with the fence f of its claim, under which it is written:
// a *sql.FenceError, naming the shard, means the shard is no longer held under it, and
// nothing was written.
func (o *Recorder) failAttempt(ctx context.Context, t tokens.Token, tok, msg string, retry bool, f *opsqsql.Fence) (wire.TokenStatus, error) {
	chunk := t.Chunk()
	if retry {
		retried := false
		err := pgx.BeginFunc(ctx, o.cfg.Pool, func(tx pgx.Tx) error {
			var err error
			retried, err = opsqsql.New(tx).ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk, Retries: t.Retries, Fence: f})
			if err != nil || !retried {
				return err
			}
			return o.notifyRetried(ctx, tx, t, tok)
		})
		if err != nil {
			return "", fmt.Errorf("retrying chunk: %w", err)
		}
		if retried {
			o.failedAttempts.Add(1)
			o.cfg.Holds.ReleaseHolds(ctx, []string{tok})
			o.cfg.Bus.Raise(notify.ChunksFreed{Chunks: []notify.Freed{{Key: t.Key, Shard: t.Shard, Retries: t.Retries, Token: tok}}})
			return wire.StatusRetrying, nil
		}
	}
	state, p, err := readChunk(ctx, o.cfg.Pool, t)
	if err != nil {
		return "", err
	}
	switch {
	case state == chunkUnknown:
		return wire.StatusUnknown, nil
	case state == chunkFinished || p.retries != t.Retries:
		return wire.StatusAlreadyFinished, nil // finished, or this attempt was counted already
	case retry && p.retries < p.maxRetries:
		return wire.StatusAlreadyFinished, nil // changed since the retry looked
	}
	failed := false
	err = pgx.BeginFunc(ctx, o.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		failed, err = opsqsql.New(tx).ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk, Retries: t.Retries, Error: msg, Fence: f})
		if err != nil || !failed {
			return err
		}
		return notify.SendDropped(ctx, tx, t.Key.SubmissionID)
	})
	if err != nil {
		return "", fmt.Errorf("failing chunk: %w", err)
	}
	if !failed {
		return staleStatus(ctx, o.cfg.Pool, t)
	}
	o.failedAttempts.Add(1)
	o.cfg.Bus.Raise(notify.SubmissionDropped{ID: t.Key.SubmissionID})
	return wire.StatusFailed, nil
}

// notifyRetried tells the owner of t's shard that the chunk is reservable again, so that it
// drops the reservation tok (when another instance holds it) and wakes its consumers.
func (o *Recorder) notifyRetried(ctx context.Context, tx pgx.Tx, t tokens.Token, tok string) error {
	if _, ours := o.cfg.Reserver.Get(tok); tok != "" && !ours {
		if err := notify.SendRetried(ctx, tx, tok); err != nil {
			return err
		}
	}
	return notify.SendWork(ctx, tx, []int{t.Shard})
}
