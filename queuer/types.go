package queuer

import (
	"context"
	"time"

	"opsq/api/wire"
	"opsq/queuer/outcome"
	"opsq/queuer/peers"
	"opsq/queuer/reserve"
	"opsq/queuer/submissions"
	"opsq/queuer/waiters"
	opsqsql "opsq/sql"
)

// The engine's words as its callers (the api) use them; each is its part's.
type (
	NewSubmission  = submissions.NewSubmission
	Chunks         = submissions.Chunks
	Created        = submissions.Created
	Status         = submissions.Status
	ListOptions    = submissions.ListOptions
	ReserveRequest = reserve.Request
	Chunk          = reserve.Chunk
	PreviewChunk   = reserve.PreviewChunk
	Completion     = outcome.Completion
	Failure        = outcome.Failure
	Extended       = outcome.Extended
)

// Errors that callers branch on.
var (
	// ErrNotFound: no submission has this id (or it was deleted by retention).
	ErrNotFound = submissions.ErrNotFound
	// ErrFinished: the submission is already completed, failed or cancelled.
	ErrFinished = submissions.ErrFinished
	// ErrNotCompleted: results exist only for completed submissions.
	ErrNotCompleted = submissions.ErrNotCompleted
	// ErrTooManyWaiters: Config.MaxWaiters requests already wait on this instance.
	ErrTooManyWaiters = waiters.ErrTooMany
	// ErrForwardedSignature: a request marked forwarded has no valid signature.
	ErrForwardedSignature = peers.ErrForwardedSignature
	// ErrUnavailable means the database cannot be reached now (it is down, restarting, or
	// refusing connections): the request may succeed if retried a little later. The API
	// answers 503 with Retry-After, never 500 (DESIGN.md §3). It is package sql's, where
	// the database's errors are translated once (sql/errors.go).
	ErrUnavailable = opsqsql.ErrUnavailable
)

// IsUnavailable reports whether err means that the database cannot be reached now: it is
// sql.IsUnavailable, which recognizes driver errors wherever they come from, so that no
// call site has to translate them.
func IsUnavailable(err error) bool { return opsqsql.IsUnavailable(err) }

// Submit inserts a submission and its chunks (see submissions.Store.Submit).
func (q *Queuer) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	return q.subs.Submit(ctx, sub, chunks)
}

// Status returns the submission's state, or ErrNotFound.
func (q *Queuer) Status(ctx context.Context, id int64) (Status, error) { return q.subs.Status(ctx, id) }

// WaitFinished returns the submission's state once it is finished, or when wait has passed
// (see submissions.Store.WaitFinished).
func (q *Queuer) WaitFinished(ctx context.Context, id int64, wait time.Duration) (Status, error) {
	return q.subs.WaitFinished(ctx, id, wait)
}

// List returns one page of submissions and whether more follow.
func (q *Queuer) List(ctx context.Context, opts ListOptions) ([]Status, bool, error) {
	return q.subs.List(ctx, opts)
}

// Cancel cancels an in-progress submission (see submissions.Store.Cancel).
func (q *Queuer) Cancel(ctx context.Context, id int64) (Status, error) { return q.subs.Cancel(ctx, id) }

// Results streams the outputs of a completed submission (see submissions.Store.Results).
func (q *Queuer) Results(ctx context.Context, id int64, fn func(chunkIndex int64, output []byte) error) error {
	return q.subs.Results(ctx, id, fn)
}

// Complete records completions: the first completion of a chunk wins, repeats are
// harmless (see outcome.Recorder.Complete).
func (q *Queuer) Complete(ctx context.Context, items []Completion) ([]wire.TokenStatus, error) {
	return q.outcomes.Complete(ctx, items)
}

// Fail records failed attempts, wherever their reservations are held.
func (q *Queuer) Fail(ctx context.Context, items []Failure) ([]wire.TokenStatus, error) {
	return q.outcomes.Fail(ctx, items)
}

// Extend moves the leases of tokens to now + lease (see outcome.Recorder.Extend).
func (q *Queuer) Extend(ctx context.Context, tokens []string, lease time.Duration, forwarded bool) ([]Extended, error) {
	return q.outcomes.Extend(ctx, tokens, lease, forwarded)
}
