package queuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/client"
	opsqsql "opsq/sql"
)

// Errors that callers branch on.
var (
	// ErrNotFound: no submission has this id (or it was deleted by retention).
	ErrNotFound = errors.New("submission not found")
	// ErrFinished: the submission is already completed, failed or cancelled.
	ErrFinished = errors.New("submission already finished")
	// ErrNotCompleted: results exist only for completed submissions.
	ErrNotCompleted = errors.New("submission not completed")
)

// Status is the state of one submission, as the opsq.submission_status view has it.
type Status struct {
	ID                int64           `db:"id"`
	State             client.State    `db:"state"`
	ChunksTotal       int64           `db:"chunks_total"`
	ChunksDone        int64           `db:"chunks_done"`
	ChunksFailed      int64           `db:"chunks_failed"`
	Priority          int64           `db:"priority"`
	Metadata          string          `db:"metadata"`
	StrategicMetadata json.RawMessage `db:"strategic_metadata"`
	Prefix            *string         `db:"prefix"`
	CreatedAt         time.Time       `db:"created_at"`
	FinishedAt        *time.Time      `db:"finished_at"`
	FailedChunkIndex  *int64          `db:"failed_chunk_index"`
	Error             *string         `db:"error"`
}

// Finished reports whether the submission is in a final state.
func (s Status) Finished() bool { return s.State.Finished() }

// Status returns the submission's state, or ErrNotFound.
func (s *submissions) Status(ctx context.Context, id int64) (Status, error) {
	rows, err := s.pool.Query(ctx, opsqsql.SubmissionStatus, pgx.NamedArgs{"id": id})
	if err != nil {
		return Status{}, fmt.Errorf("reading submission %d: %w", id, err)
	}
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Status])
	if errors.Is(err, pgx.ErrNoRows) {
		return Status{}, ErrNotFound
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading submission %d: %w", id, err)
	}
	return st, nil
}

// WaitFinished returns the submission's state once it is finished, or when wait has passed,
// whichever comes first. It is woken by the NOTIFY that finishing a submission sends, not
// by polling. When Config.MaxWaiters requests already wait here, it returns
// ErrTooManyWaiters.
func (s *submissions) WaitFinished(ctx context.Context, id int64, wait time.Duration) (Status, error) {
	if err := s.admission.admit(); err != nil {
		return Status{}, err
	}
	defer s.admission.done()
	woken, unregister := s.finished.add(id)
	defer unregister()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Look after registering, so that a NOTIFY between the look and the wait wakes us.
		st, err := s.Status(ctx, id)
		if err != nil || st.Finished() {
			return st, err
		}
		select {
		case <-woken:
			unregister()
			woken, unregister = s.finished.add(id)
		case <-timer.C:
			return s.Status(ctx, id)
		case <-ctx.Done():
			return Status{}, ctx.Err()
		}
	}
}

// ListOptions selects a page of submissions, newest first.
type ListOptions struct {
	State client.State // "" for any state
	// Key and Value, both set, select submissions whose strategic metadata has key = value;
	// Value is JSON (an integer or a string).
	Key   string
	Value json.RawMessage
	After int64 // the last id of the previous page; 0 for the first page
	Limit int
}

// List returns one page of submissions and whether more follow.
func (s *submissions) List(ctx context.Context, opts ListOptions) ([]Status, bool, error) {
	args := pgx.NamedArgs{"limit": opts.Limit + 1, "state": nil, "after": nil}
	if opts.State != "" {
		args["state"] = opts.State
	}
	if opts.After != 0 {
		args["after"] = opts.After
	}
	query := opsqsql.SubmissionList
	if opts.Key != "" {
		query = opsqsql.SubmissionListByMetadata
		args["key"], args["value"] = opts.Key, string(opts.Value)
	}
	rows, err := s.pool.Query(ctx, query, args)
	if err != nil {
		return nil, false, fmt.Errorf("listing submissions: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[Status])
	if err != nil {
		return nil, false, fmt.Errorf("listing submissions: %w", err)
	}
	more := len(list) > opts.Limit
	if more {
		list = list[:opts.Limit]
	}
	return list, more, nil
}

// Cancel moves an in-progress submission to submissions_cancelled and deletes its
// reservable chunks, in one transaction. It returns ErrFinished for a submission that is
// already finished and ErrNotFound for an unknown one.
func (s *submissions) Cancel(ctx context.Context, id int64) (Status, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var moved int64
		err := tx.QueryRow(ctx, opsqsql.SubmissionCancel, pgx.NamedArgs{"id": id}).Scan(&moved)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNotInProgress
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, opsqsql.ChunksDeleteSubmission, pgx.NamedArgs{"submission_id": id}); err != nil {
			return err
		}
		return notifyDropped(ctx, tx, id)
	})
	if errors.Is(err, errNotInProgress) {
		if _, err := s.Status(ctx, id); err != nil {
			return Status{}, err
		}
		return Status{}, ErrFinished
	}
	if err != nil {
		return Status{}, fmt.Errorf("cancelling submission %d: %w", id, err)
	}
	return s.Status(ctx, id)
}

var errNotInProgress = errors.New("submission not in progress")

// Results calls fn with each chunk's output of a completed submission, in chunk order,
// streaming from the database. It returns ErrNotCompleted for a submission in any other
// state, before calling fn.
func (s *submissions) Results(ctx context.Context, id int64, fn func(chunkIndex int64, output []byte) error) error {
	st, err := s.Status(ctx, id)
	if err != nil {
		return err
	}
	if st.State != client.StateCompleted {
		return ErrNotCompleted
	}
	rows, err := s.pool.Query(ctx, opsqsql.ResultsStream, pgx.NamedArgs{"submission_id": id})
	if err != nil {
		return fmt.Errorf("reading results of %d: %w", id, err)
	}
	var idx int64
	var output []byte
	_, err = pgx.ForEachRow(rows, []any{&idx, &output}, func() error { return fn(idx, output) })
	if err != nil {
		return fmt.Errorf("reading results of %d: %w", id, err)
	}
	return nil
}
