package submissions

import (
	"context"
	"errors"
	"fmt"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
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
//
// A cancel and a retry of the submission take its lock one after the other, and the
// status a cancel answers is the one it left, read under that lock: a retry that comes
// the instant after makes it in progress again, and answers so itself. A retry between two
// slices wins the race (the slices stop, and the submission is in progress with every
// chunk pending): the cancel then answers ErrRetriedWhileCancelled.
func (s *Store) Cancel(ctx context.Context, id int64) (Status, error) {
	return s.cancel(ctx, id, nil)
}

// cancel is Cancel; before, if set, runs first in its first transaction (the cancel of a
// child by its parent records why there), and its error rolls it back and is returned.
func (s *Store) cancel(ctx context.Context, id int64, before func(q opsqsql.Queries) error) (Status, error) {
	slice := int64(s.SliceRows())
	var moved opsqsql.SubmissionCancelRow
	var left opsqsql.SubmissionStatusRow
	err := opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
		db := q
		if before != nil {
			if err := before(q); err != nil {
				return err
			}
		}
		var err error
		if moved, err = db.SubmissionCancel(ctx, opsqsql.SubmissionCancelParams{ID: id, SkipNow: slice}); err != nil {
			return err
		}
		if moved.Pending <= slice {
			if err := db.ChunksSkipSubmission(ctx, opsqsql.ChunksSkipSubmissionParams{SubmissionID: id}); err != nil {
				return err
			}
			if left, err = db.SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: id}); err != nil {
				return fmt.Errorf("reading the status it leaves: %w", err)
			}
		}
		return notify.SendDropped(ctx, q, id)
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
	if s.cfg.AfterCancel != nil {
		s.cfg.AfterCancel(id)
	}
	if moved.Pending <= slice {
		return statusOf(left), nil
	}
	s.cancelSlices(ctx, id, moved.ChunksTotal)
	return s.cancelledStatus(ctx, id)
}

// cancelledStatus reads, under its lock, the status of submission id that a cancel by
// slices left: ErrRetriedWhileCancelled when it is no longer cancelled (a retry between
// two slices made it in progress again; the slices stopped there).
func (s *Store) cancelledStatus(ctx context.Context, id int64) (Status, error) {
	var left opsqsql.SubmissionStatusRow
	err := opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
		if _, err := q.SubmissionEndedLock(ctx, opsqsql.SubmissionEndedLockParams{ID: id}); err != nil {
			return err
		}
		var err error
		left, err = q.SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: id})
		return err
	})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return Status{}, ErrRetriedWhileCancelled
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading the status of cancelled submission %d: %w", id, err)
	}
	return statusOf(left), nil
}

// cancelSlices moves the pending chunks of submission id, cancelled already, by slices
// (skipSlices), whether or not ctx has ended.
func (s *Store) cancelSlices(ctx context.Context, id, total int64) {
	s.skipSlices(context.WithoutCancel(ctx), opsqtype.StateCancelled, id, total)
}
