package submissions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/queuer/notify"
	opsqsql "opsq/sql"
)

// Cancel cancels an in-progress submission: its pending chunks (reservable, reserved or
// waiting) become skipped chunks of chunks_failed. It returns ErrFinished for a submission
// that is already finished and ErrNotFound for an unknown one, else the submission's
// state once its chunks are moved.
//
// A submission with at most SliceRows chunks pending is cancelled in one transaction. One
// with more, as DESIGN.md §3 asks of a large object-storage submission, is cancelled in
// committed slices: first the submission row moves to submissions_cancelled (with the
// NOTIFY that drops it from every instance's caches), so that from then on no reserve
// hands its chunks out (the reserve path passes over a chunk whose submission is not in
// progress, as for the slices of an insert), no completion or fail records an outcome for
// them (chunks_complete.sql and chunk_fail.sql act on chunks of submissions in progress
// only), and the promoter leaves its waiting ones where they are (chunks_promote.sql joins
// the submission); then its chunks move by ranges of SliceRows chunk indexes, one
// transaction each, each counted on the cancelled row's chunks_skipped as it moves
// (cancelSlices). The request waits for the slices, whether or not its client stays.
func (s *Store) Cancel(ctx context.Context, id int64) (Status, error) {
	slice := int64(s.sliceRows())
	var moved opsqsql.SubmissionCancelRow
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		db := opsqsql.New(tx)
		var err error
		if moved, err = db.SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: id, SkipNow: slice}); err != nil {
			return err
		}
		if moved.Pending <= slice {
			if err := db.ChunksSkipSubmission(ctx, opsqsql.ChunksSkipSubmissionParams{SubmissionID: id}); err != nil {
				return err
			}
		}
		return notify.SendDropped(ctx, tx, id)
	})
	if errors.Is(err, opsqsql.ErrNotFound) { // none in progress
		if _, err := s.Status(ctx, id); err != nil {
			return Status{}, err
		}
		return Status{}, ErrFinished
	}
	if err != nil {
		return Status{}, fmt.Errorf("cancelling submission %d: %w", id, err)
	}
	s.cfg.Bus.Raise(notify.SubmissionDropped{ID: id}) // at once, not only when the NOTIFY comes back
	if moved.Pending > slice {
		s.cancelSlices(ctx, id, moved.ChunksTotal)
	}
	return s.Status(ctx, id)
}

// cancelSlicesTimeout bounds the slices of one cancel: OPSQ_MAX_INGEST_TIME's default,
// the time a submission as large may take to go in.
const cancelSlicesTimeout = time.Hour

// cancelSlices moves the pending chunks of submission id, cancelled already, to
// chunks_failed by ranges of SliceRows chunk indexes, one transaction each, whether or not
// ctx has ended. Each slice first locks the cancelled row: a retry of the submission's
// unfinished chunks, which locks it too, happens wholly between two slices, and when it
// has made the submission in progress again (moving back the chunks skipped so far, while
// the others are still pending where they were), the slices stop. What it cannot move (the
// database gone meanwhile) it logs, with what is left and how to move it.
func (s *Store) cancelSlices(ctx context.Context, id, total int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelSlicesTimeout)
	defer cancel()
	slice := int64(s.sliceRows())
	for from := int64(0); from < total; from += slice {
		to := min(from+slice, total)
		var stopped bool
		err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
			stopped = false
			return pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
				db := opsqsql.New(tx)
				err := db.SubmissionCancelledLock(ctx, opsqsql.SubmissionCancelledLockParams{ID: id})
				if errors.Is(err, opsqsql.ErrNotFound) {
					stopped = true // retried meanwhile: in progress again
					return nil
				}
				if err != nil {
					return err
				}
				_, err = db.ChunksSkipRange(ctx, opsqsql.ChunksSkipRangeParams{SubmissionID: id, From: int32(from), To: int32(to)})
				return err
			})
		})
		if err != nil {
			s.cfg.Log.ErrorContext(ctx, "moving the chunks of a cancelled submission; until they are moved its status counts them neither done, failed nor skipped, "+
				"and a retry of its unfinished chunks makes them all pending again",
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
