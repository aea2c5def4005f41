package submissions

import (
	"context"
	"errors"
	"fmt"
	"time"

	opsqsql "opsq/sql"
)

// followInterval is the least time between two reads of a followed submission: a follower
// woken more often (a NOTIFY per completion batch) reads at most this many times a second,
// each read catching up with every chunk finished since. A read costs what the
// submission's completed batches hold up to the first pending chunk (completions are
// stored a batch to a row, the chunks of a batch in any order): a follower whose reads
// take long waits followReadShare times a read's time between two, so that following a
// submission of 10⁶ chunks costs the database about a tenth of a core, not a whole one.
const (
	followInterval  = 250 * time.Millisecond
	followReadShare = 10
)

// Results calls fn with a line for each chunk of the submission, in chunk order, in any
// state: a completed chunk's output, or the state of one that is not (failed, with its
// last error; skipped; pending). It streams from the database, in one snapshot: its memory
// does not grow with the submission (a line's Output is valid only during fn). It returns
// ErrNotFound for an unknown submission, before calling fn.
//
// A chunk that a finished (failed or cancelled) submission has no row of is skipped: a
// submission cancelled before migration 00007 deleted its pending chunks without a trace.
func (s *Store) Results(ctx context.Context, id int64, fn func(Result) error) error {
	_, _, err := s.readResults(ctx, id, 0, false, fn)
	return err
}

// FollowResults is Results as the work runs: it calls fn with each chunk's line once that
// chunk and every chunk before it are finished (completed, failed or skipped), in chunk
// order, and returns once the submission is finished and every line written, or when ctx
// ends. It is woken by the NOTIFYs of the submission's progress (notify.SubmissionProgress)
// and end (SubmissionFinished), never polling per chunk, and holds no database connection
// while it waits; woken often, it reads at most every followInterval (a few times a
// second), each read from its cursor on and only up to the first pending chunk. It counts
// among the instance's waiting requests (waiters.ErrTooMany past their bound). It returns
// early, after the lines it can write, when the instance drains (Store.EndWaits).
// ErrNotFound for an unknown submission, before calling fn.
func (s *Store) FollowResults(ctx context.Context, id int64, fn func(Result) error) error {
	if err := s.cfg.Admission.Admit(ctx); err != nil {
		return err
	}
	defer s.cfg.Admission.Done(ctx)
	woken, unregister := s.progress.Add(id)
	defer func() { unregister() }()
	var next int64
	for {
		// Read after registering, so that progress between the read and the wait wakes us.
		read := time.Now()
		var done bool
		var err error
		next, done, err = s.readResults(ctx, id, next, true, fn)
		if err != nil || done {
			return err
		}
		interval := max(followInterval, followReadShare*time.Since(read))
		select {
		case <-woken:
		case <-s.ended:
			return nil // the instance drains: the stream ends, and the client follows elsewhere
		case <-ctx.Done():
			return ctx.Err()
		}
		unregister()
		woken, unregister = s.progress.Add(id)
		if wait := interval - time.Since(read); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
	}
}

// readResults writes the lines of submission id from chunk index from on, in one
// read-only snapshot: every line to the end (follow false), filling the gaps as pending;
// or (follow) only those of finished chunks with no pending chunk before them. It returns
// the index of the first line not written, and whether every line was written.
func (s *Store) readResults(ctx context.Context, id, from int64, follow bool, fn func(Result) error) (next int64, done bool, err error) {
	next = from
	err = opsqsql.InSnapshot(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
		db := q
		r, err := db.SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: id})
		if errors.Is(err, opsqsql.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("reading submission %d: %w", id, err)
		}
		st := statusOf(r)
		// A gap is a pending chunk, but in a finished submission, where none is pending.
		gap := ResultPending
		if st.Finished() {
			gap = ResultSkipped
		}
		// Following an unfinished submission, a gap ends what may be written now.
		stopAtGap := follow && !st.Finished()
		stopped := false
		err = db.ResultsRange(ctx, opsqsql.ResultsRangeParams{
			SubmissionID: id, From: int32(from), UntilPending: follow && !st.Finished(),
		}, func(row opsqsql.ResultsRangeRow) error {
			idx := int64(row.ChunkIndex)
			if stopped || idx < next { // past a gap; or a repeat, which no table should hold
				return nil
			}
			if idx > next && stopAtGap {
				stopped = true
				return nil
			}
			for ; next < idx; next++ {
				if err := fn(Result{ChunkIndex: next, State: gap}); err != nil {
					return err
				}
			}
			line := Result{ChunkIndex: idx, State: row.State, Output: row.Output}
			if row.Error != nil {
				line.Error = *row.Error
			}
			next++
			return fn(line)
		})
		if err != nil {
			return err
		}
		if stopAtGap {
			return nil
		}
		for ; next < st.ChunksTotal; next++ {
			if err := fn(Result{ChunkIndex: next, State: gap}); err != nil {
				return err
			}
		}
		done = true
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		err = fmt.Errorf("reading the results of submission %d: %w", id, err)
	}
	return next, done, err
}
