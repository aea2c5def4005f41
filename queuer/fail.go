package queuer

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"opsq/api/wire"
	opsqsql "opsq/sql"
)

// Failure reports a failed attempt at one chunk.
type Failure struct {
	Token string
	Error string
	// Retry counts one failed attempt and makes the chunk reservable again, unless its
	// attempts are spent; false fails the chunk, and its submission, at once.
	Retry bool
}

// errReservationExpired is the error recorded for an attempt whose lease ran out.
const errReservationExpired = "reservation expired"

// Fail records failed attempts, wherever their reservations are held. The statuses are
// in the order of items.
func (q *Queuer) Fail(ctx context.Context, items []Failure) ([]wire.TokenStatus, error) {
	status := make([]wire.TokenStatus, len(items))
	for i, it := range items {
		t, ok := q.readToken(it.Token)
		if !ok {
			status[i] = wire.StatusUnknown
			continue
		}
		var err error
		if status[i], err = q.failAttempt(ctx, t, it.Token, it.Error, it.Retry, nil); err != nil {
			return nil, err
		}
	}
	return status, nil
}

// failAttempt counts the failed attempt t at its chunk: it retries the chunk while attempts
// remain (and retry is asked), else fails it and its submission. A consumer's failure
// passes its token string, whose reservation is then dropped wherever it is held; the
// owner's release of an expired lease passes the fence instead (the reservation is gone),
// and gets a *sql.FenceError, naming the shard, when the shard is no longer held under
// the reservation's claim: then nothing was written.
func (q *Queuer) failAttempt(ctx context.Context, t token, tok, msg string, retry bool, f *opsqsql.Fence) (wire.TokenStatus, error) {
	chunk := t.chunk()
	if retry {
		retried := false
		err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
			var err error
			retried, err = opsqsql.New(tx).ChunkRetry(ctx, opsqsql.ChunkRetryParams{Chunk: chunk, Retries: t.retries, Fence: f})
			if err != nil || !retried {
				return err
			}
			return q.notifyRetried(ctx, tx, t, tok)
		})
		if err != nil {
			return "", fmt.Errorf("retrying chunk: %w", err)
		}
		if retried {
			q.count.failedAttempts.Add(1)
			q.afterRetry(t, tok)
			if tok != "" { // an expired lease (no tok): expire releases its slots
				q.holds.release(ctx, []string{tok})
			}
			return wire.StatusRetrying, nil
		}
	}
	state, p, err := readChunk(ctx, q.pool, t)
	if err != nil {
		return "", err
	}
	switch {
	case state == chunkUnknown:
		return wire.StatusUnknown, nil
	case state == chunkFinished || p.retries != t.retries:
		return wire.StatusAlreadyFinished, nil // finished, or this attempt was counted already
	case retry && p.retries < p.maxRetries:
		return wire.StatusAlreadyFinished, nil // changed since the retry looked
	}
	failed := false
	err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		failed, err = opsqsql.New(tx).ChunkFail(ctx, opsqsql.ChunkFailParams{Chunk: chunk, Retries: t.retries, Error: msg, Fence: f})
		if err != nil || !failed {
			return err
		}
		return notifyDropped(ctx, tx, t.key.SubmissionID)
	})
	if err != nil {
		return "", fmt.Errorf("failing chunk: %w", err)
	}
	if !failed {
		return staleStatus(ctx, q.pool, t)
	}
	q.count.failedAttempts.Add(1)
	q.reserver.DropSubmission(t.key.SubmissionID)
	return wire.StatusFailed, nil
}

// notifyRetried tells the owner of t's shard that the chunk is reservable again, so that it
// drops the reservation tok (when another instance holds it) and wakes its consumers.
func (q *Queuer) notifyRetried(ctx context.Context, tx pgx.Tx, t token, tok string) error {
	if tok != "" {
		if _, ours := q.reserver.Get(tok); !ours {
			if err := notify(ctx, tx, ChannelReleased, tok); err != nil {
				return err
			}
		}
	}
	return notify(ctx, tx, ChannelWork, strconv.Itoa(t.shard))
}

// afterRetry drops the local reservation tok, if any, of a chunk that is reservable again,
// and wakes the consumers waiting here.
func (q *Queuer) afterRetry(t token, tok string) {
	q.tombs.addRetried(t.key, t.retries)
	if tok != "" {
		q.reserver.Release(tok)
	}
	q.markAvailable(t.shard)
	q.work.broadcast()
}

// notifyDropped tells every instance that submissions ids finished with chunks it may
// hold reservations of (they failed or were cancelled), and whoever waits for them: one
// statement (sql/submissions_notify_dropped.sql) for any number of submissions.
func notifyDropped(ctx context.Context, tx pgx.Tx, ids ...int64) error {
	return opsqsql.New(tx).SubmissionsNotifyDropped(ctx, opsqsql.SubmissionsNotifyDroppedParams{
		IDs: ids, Released: ChannelReleased, Finished: ChannelFinished,
	})
}
