package submissions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"opsq/queuer/opsqtype"
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
	ID                int64
	State             opsqtype.State
	ChunksTotal       int64
	ChunksDone        int64
	ChunksFailed      int64
	ChunksSkipped     int64
	Paused            bool
	Priority          int64
	Metadata          string
	StrategicMetadata json.RawMessage
	Prefix            *string
	CreatedAt         time.Time
	FinishedAt        *time.Time
	FailedChunkIndex  *int64
	Error             *string
	// OnFailure is the failure policy as the producer gave it (JSON).
	OnFailure json.RawMessage
	NotBefore *time.Time
	// Tenant owns the submission.
	Tenant string
	// Dependencies is its parents, when it was submitted after others; nil otherwise (and
	// in a list's page, which does not read them).
	Dependencies *Dependencies
}

// Finished reports whether the submission is in a final state.
func (s Status) Finished() bool { return s.State.Finished() }

// Status returns the submission's state, or ErrNotFound.
func (s *Store) Status(ctx context.Context, id int64) (Status, error) {
	r, err := opsqsql.New(s.cfg.Pool).SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: id})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return Status{}, ErrNotFound
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading submission %d: %w", id, err)
	}
	st := statusOf(r)
	if st.Dependencies, err = s.dependenciesOf(ctx, id); err != nil {
		return Status{}, err
	}
	return st, nil
}

// statusOf is the Status of a row of the opsq.submission_status view.
func statusOf(r opsqsql.SubmissionStatusRow) Status {
	return Status{
		ID: r.ID, State: opsqtype.State(r.State), ChunksTotal: r.ChunksTotal, ChunksDone: r.ChunksDone,
		ChunksFailed: r.ChunksFailed, ChunksSkipped: r.ChunksSkipped, Paused: r.Paused, Priority: r.Priority,
		Metadata: r.Metadata, StrategicMetadata: r.StrategicMetadata, Prefix: r.Prefix, CreatedAt: r.CreatedAt,
		FinishedAt: r.FinishedAt, FailedChunkIndex: r.FailedChunkIndex, Error: r.Error,
		OnFailure: r.OnFailure, NotBefore: r.NotBefore, Tenant: r.Tenant,
	}
}

// WaitFinished returns the submission's state once it is finished, or when wait has passed,
// whichever comes first. It is woken by the NOTIFY that finishing a submission sends, not
// by polling, and ends at once when the instance drains (Store.EndWaits). When the instance's bound of waiting requests is reached, it returns
// waiters.ErrTooMany.
func (s *Store) WaitFinished(ctx context.Context, id int64, wait time.Duration) (Status, error) {
	if err := s.cfg.Admission.Admit(ctx); err != nil {
		return Status{}, err
	}
	defer s.cfg.Admission.Done(ctx)
	woken, unregister := s.finished.Add(id)
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
			woken, unregister = s.finished.Add(id)
		case <-timer.C:
			return s.Status(ctx, id)
		case <-s.ended: // the instance drains: the state as it is
			return s.Status(ctx, id)
		case <-ctx.Done():
			return Status{}, ctx.Err()
		}
	}
}

// ListOptions selects a page of submissions, newest first.
type ListOptions struct {
	State opsqtype.State // "" for any state
	// Phase, when set (PhaseRunning, PhasePaused or PhaseScheduled), selects in-progress
	// submissions in that phase only; State is then in_progress or "".
	Phase string
	// Key and Value, both set, select submissions whose strategic metadata has key = value;
	// Value is JSON (an integer or a string).
	Key   string
	Value json.RawMessage
	// Tenant, when set, selects that tenant's submissions only.
	Tenant string
	After  int64 // the last id of the previous page; 0 for the first page
	Limit  int
	// MaxBytes, when positive, ends the page once it holds about that many bytes of
	// submissions as an answer writes them (at least one); more then follow.
	MaxBytes int
}

// The phases of an in-progress submission (ListOptions.Phase): a paused submission, and
// one before its not_before, hand nothing out (DESIGN.md §3).
const (
	PhaseRunning   = "running"   // neither paused nor before its not_before
	PhasePaused    = "paused"    // paused, whatever its not_before
	PhaseScheduled = "scheduled" // not paused, before its not_before
)

// List returns one page of submissions and whether more follow.
func (s *Store) List(ctx context.Context, opts ListOptions) ([]Status, bool, error) {
	p := opsqsql.SubmissionListParams{Limit: opts.Limit + 1, MaxBytes: opts.MaxBytes}
	if opts.State != "" {
		state := string(opts.State)
		p.State = &state
	}
	if opts.Phase != "" {
		state := string(opsqtype.StateInProgress) // a phase is in progress: the other branches go
		p.State, p.Phase = &state, &opts.Phase
	}
	if opts.After != 0 {
		p.After = &opts.After
	}
	if opts.Key != "" {
		p.Key, p.Value = opts.Key, string(opts.Value)
	}
	if opts.Tenant != "" {
		p.Tenant = &opts.Tenant
	}
	rows, cut, err := opsqsql.New(s.cfg.Pool).SubmissionList(ctx, p)
	if err != nil {
		return nil, false, fmt.Errorf("listing submissions: %w", err)
	}
	more := cut || len(rows) > opts.Limit
	if len(rows) > opts.Limit {
		rows = rows[:opts.Limit]
	}
	list := make([]Status, len(rows))
	for i, r := range rows {
		list[i] = statusOf(r)
	}
	return list, more, nil
}
