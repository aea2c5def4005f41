package submissions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// slicesTimeout bounds the slices of one cancel or fail: OPSQ_MAX_INGEST_TIME's default,
// the time a submission as large may take to go in.
const slicesTimeout = time.Hour

// SkipFailed moves the pending chunks of submission id, of total chunks, that a fail of
// one of its chunks failed without moving them (queuer/internal/outcome/fail.go), by slices
// (skipSlices), until ctx ends. It is outcome.Slicer's.
func (s *Store) SkipFailed(ctx context.Context, id, total int64) {
	s.skipSlices(ctx, opsqtype.StateFailed, id, total)
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
func (s *Store) skipSlices(ctx context.Context, ending opsqtype.State, id, total int64) {
	if _, busy := s.slicing.LoadOrStore(id, true); busy {
		return // this instance moves them already
	}
	defer s.slicing.Delete(id)
	ctx, cancel := context.WithTimeout(ctx, slicesTimeout)
	defer cancel()
	failed := ending == opsqtype.StateFailed
	slice := int64(s.SliceRows())
	for from := int64(0); from < total; from += slice {
		to := min(from+slice, total)
		var stopped bool
		err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
			stopped = false
			return opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
				db := q
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

// Resuming moves a stop or a crash cut.
const (
	// ResumeSchedule is how often each instance looks for moves by slices that were cut.
	ResumeSchedule = "@every 1m"
	// resumeAfterDefault is how long after its submission ended a move is taken for cut: the
	// instance that began it has a head start (a second mover would only find its slices
	// done, one after the other, under the row's lock).
	resumeAfterDefault = 2 * time.Minute
	// resumeMax bounds the submissions one run of the job takes up.
	resumeMax = 100
)

// ResumeSlices finishes the moves by slices that a stop or a crash cut (a cron job, every
// ResumeSchedule on every instance): the submissions cancelled or failed over resumeAfterDefault
// ago whose counts still fall short of their total (an index holds only those, migration
// 00014) have the rest of their pending chunks moved, as skipSlices moves them, and their
// counts settled. Two instances resuming the same submission take turns on its row's lock,
// each slice moved once. What it leaves, it logs.
func (s *Store) ResumeSlices(ctx context.Context) {
	db := opsqsql.New(s.cfg.Pool)
	s.removeDeadIngests(ctx)
	cut, err := db.SubmissionsUnmoved(ctx, opsqsql.SubmissionsUnmovedParams{After: s.resumeAfter(), Limit: resumeMax})
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("looking for cancels and fails whose move by slices was cut; looking again in a minute", slog.Any("error", err))
		}
		return
	}
	for _, sub := range cut {
		if _, busy := s.slicing.Load(sub.ID); busy {
			continue
		}
		ending := opsqtype.StateCancelled
		if sub.Failed {
			ending = opsqtype.StateFailed
		}
		s.cfg.Log.Info("resuming the move by slices of a "+string(ending)+" submission's pending chunks, which a stop or a crash cut",
			slog.Int64("submission_id", sub.ID), slog.Int64("chunks", sub.ChunksTotal))
		s.skipSlices(ctx, ending, sub.ID, sub.ChunksTotal)
		if ctx.Err() != nil {
			return
		}
		if _, err := db.SubmissionEndedSettle(ctx, sub.ID, sub.Failed); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("settling the counts of a submission whose move was resumed", slog.Int64("submission_id", sub.ID), slog.Any("error", err))
		}
	}
}

// resumeAfter is resumeAfterDefault, or Config.ResumeAfter when set (tests).
func (s *Store) resumeAfter() time.Duration {
	if s.cfg.ResumeAfter > 0 {
		return s.cfg.ResumeAfter
	}
	return resumeAfterDefault
}

// removeDeadIngests removes the slices of the object-storage submissions whose ingest by
// slices was cut by its instance's death (its record's instance gone: migration 00015),
// then their records: the submission row was never inserted, so no consumer saw them.
func (s *Store) removeDeadIngests(ctx context.Context) {
	dead, err := opsqsql.New(s.cfg.Pool).IngestsDead(ctx, resumeMax)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("looking for ingests by slices cut by their instance's death; looking again in a minute", slog.Any("error", err))
		}
		return
	}
	for _, in := range dead {
		s.cfg.Log.Info("removing the slices of an object-storage submission whose instance died while it went in",
			slog.Int64("submission_id", in.SubmissionID), slog.Int64("chunks", in.ChunkCount))
		if s.removeSlices(ctx, in.SubmissionID, in.ChunkCount) {
			s.endIngest(ctx, in.SubmissionID)
		}
		if ctx.Err() != nil {
			return
		}
	}
}
