package submissions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opsq/queuer/identity"
	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// Pause stops handing out the submission's chunks: in one transaction holding its lock,
// it marks it paused and moves its pending chunks out of opsq.chunks into
// opsq.chunks_waiting until resumed, and tells every instance (notify.SubmissionPaused,
// here at once and by NOTIFY) to drop the candidates of it they buffered. Its chunks in
// flight finish as usual. Idempotent; ErrFinished for a finished submission, ErrNotFound
// for an unknown one. It returns the submission's state.
//
// Cost: a row written out and in per pending chunk, in one statement (sql/submission_pause.sql):
// pausing a submission of 10^6 pending chunks takes about a second or more and a few
// hundred MB of WAL, and its completions wait for the submission's lock meanwhile.
// A pause of a paused submission moves only what came back since (nothing, normally).
// The chunks a caller moves by pauses and resumes are bounded (moves.go): beyond, and
// while another pause or resume of the submission runs here, a *MoveBusyError.
func (s *Store) Pause(ctx context.Context, id int64) (Status, error) {
	key := moverOf(ctx)
	if err := s.moves.begin(key, id, s.maxMoves(), time.Now()); err != nil {
		return Status{}, err
	}
	var n int64
	defer func() { s.moves.end(key, id, n, time.Now()) }()
	err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		return opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
			db := q
			if err := lockInProgress(ctx, db, id); err != nil {
				return err
			}
			var err error
			if n, err = db.SubmissionPause(ctx, opsqsql.SubmissionPauseParams{ID: id}); err != nil {
				return err
			}
			return notify.SendPaused(ctx, q, id)
		})
	})
	if err != nil {
		n = 0 // rolled back: nothing moved
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
		return Status{}, err
	}
	if err != nil {
		return Status{}, fmt.Errorf("pausing submission %d: %w", id, err)
	}
	s.cfg.Bus.Raise(notify.SubmissionPaused{ID: id}) // at once, not only when the NOTIFY comes back
	return s.Status(ctx, id)
}

// Resume makes a paused submission's chunks reservable again at once (or, while its
// not_before is ahead, at not_before), in one transaction holding its lock, and tells
// every instance where they are (NOTIFY of new work, which wakes waiting reserves).
// Idempotent; ErrFinished for a finished submission, ErrNotFound for an unknown one. It
// returns the submission's state. It costs what Pause does, per chunk held.
func (s *Store) Resume(ctx context.Context, id int64) (Status, error) {
	key := moverOf(ctx)
	if err := s.moves.begin(key, id, s.maxMoves(), time.Now()); err != nil {
		return Status{}, err
	}
	var work workMoved
	defer func() { s.moves.end(key, id, work.n, time.Now()) }()
	err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		work = workMoved{}
		return opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
			db := q
			if err := lockInProgress(ctx, db, id); err != nil {
				return err
			}
			rows, err := db.SubmissionResume(ctx, opsqsql.SubmissionPauseParams{ID: id})
			if err != nil {
				return err
			}
			for _, r := range rows {
				work.add(r.Shard, r.N)
			}
			return s.announce(ctx, q, work)
		})
	})
	if err != nil {
		work = workMoved{} // rolled back: nothing moved
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
		return Status{}, err
	}
	if err != nil {
		return Status{}, fmt.Errorf("resuming submission %d: %w", id, err)
	}
	s.raiseWork(work)
	return s.Status(ctx, id)
}

// moverOf is who a pause or resume is charged to: the caller's key by its name, or "" for
// every request without a key.
func moverOf(ctx context.Context) string {
	c, _ := identity.From(ctx)
	return c.Name
}

// maxMoves is Config.MaxMovesPerMinute, or its default.
func (s *Store) maxMoves() int64 {
	if s.cfg.MaxMovesPerMinute > 0 {
		return s.cfg.MaxMovesPerMinute
	}
	return MaxMovesPerMinuteDefault
}

// lockInProgress locks submission id's row for the rest of db's transaction; ErrFinished
// when it is finished, ErrNotFound when unknown.
func lockInProgress(ctx context.Context, db opsqsql.Queries, id int64) error {
	sub, err := lock(ctx, db, id)
	if err != nil {
		return err
	}
	if opsqtype.State(sub.State) != opsqtype.StateInProgress {
		return ErrFinished
	}
	return nil
}
