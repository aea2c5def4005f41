package submissions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/api/wire"
	opsqsql "opsq/sql"
)

// slicesTimeout bounds the slices of one cancel or fail: OPSQ_MAX_INGEST_TIME's default,
// the time a submission as large may take to go in.
const slicesTimeout = time.Hour

// SkipFailed moves the pending chunks of submission id, of total chunks, that a fail of
// one of its chunks failed without moving them (queuer/outcome/fail.go), by slices
// (skipSlices), until ctx ends. It is outcome.Slicer's.
func (s *Store) SkipFailed(ctx context.Context, id, total int64) {
	s.skipSlices(ctx, wire.StateFailed, id, total)
}

// skipSlices moves the pending chunks of submission id, which ended already (ending:
// cancelled or failed) with total chunks, to chunks_failed, skipped, by ranges of
// SliceRows chunk indexes, one transaction each, until they are all moved, ctx ends or
// slicesTimeout passes. Each slice first locks the ended row (submission_ended_lock.sql)
// and adds what it moved to its chunks_skipped: a retry of the submission, which locks it
// too, happens wholly between two slices, and when it has made the submission in progress
// again (moving back the chunks skipped so far, while the others are still pending where
// they were), the slices stop. What it cannot move (the database gone meanwhile, ctx
// ended) it logs, with what is left and how to move it.
func (s *Store) skipSlices(ctx context.Context, ending wire.State, id, total int64) {
	ctx, cancel := context.WithTimeout(ctx, slicesTimeout)
	defer cancel()
	failed := ending == wire.StateFailed
	slice := int64(s.SliceRows())
	for from := int64(0); from < total; from += slice {
		to := min(from+slice, total)
		var stopped bool
		err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
			stopped = false
			return pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
				db := opsqsql.New(tx)
				msg, err := db.SubmissionEndedLock(ctx, opsqsql.SubmissionEndedLockParams{ID: id, Failed: failed})
				if errors.Is(err, opsqsql.ErrNotFound) {
					stopped = true // retried meanwhile: in progress again
					return nil
				}
				if err != nil {
					return err
				}
				_, err = db.ChunksSkipRange(ctx, opsqsql.ChunksSkipRangeParams{SubmissionID: id, From: int32(from), To: int32(to),
					Failed: failed, Error: msg})
				return err
			})
		})
		if err != nil {
			s.cfg.Log.ErrorContext(ctx, "moving the chunks of a "+string(ending)+" submission by slices; until they are moved its status counts them "+
				"neither done, failed nor skipped, and a retry of its unfinished chunks makes them all pending again",
				slog.Int64("submission_id", id), slog.Int64("from", from), slog.Int64("chunks", total), slog.Any("error", err))
			return
		}
		if stopped {
			return
		}
		if s.cfg.AfterSlice != nil {
			s.cfg.AfterSlice(to)
		}
	}
}
