package queuer

import (
	"context"
	"time"

	"opsq/api/wire"
	"opsq/queuer/handout"
	"opsq/queuer/outcome"
	"opsq/queuer/peers"
	"opsq/queuer/submissions"
	"opsq/queuer/throttles"
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
	Lifecycle      = submissions.Lifecycle
	Result         = submissions.Result
	FailedChunk    = submissions.FailedChunk
	RetryOptions   = submissions.RetryOptions
	ReserveRequest = handout.Request
	Chunk          = handout.Chunk
	// Forwarded is what marks and signs a request another instance forwarded here.
	Forwarded    = peers.Forwarded
	PreviewChunk = handout.PreviewChunk
	Completion   = outcome.Completion
	Failure      = outcome.Failure
	Extended     = outcome.Extended
)

// Errors that callers branch on.
var (
	// ErrNotFound: no submission has this id (or it was deleted by retention).
	ErrNotFound = submissions.ErrNotFound
	// ErrFinished: the submission is already completed, failed or cancelled.
	ErrFinished = submissions.ErrFinished
	// ErrNotCompleted: results exist only for completed submissions.
	ErrNotCompleted = submissions.ErrNotCompleted
	// ErrNothingToRetry: a retry found no failed (or skipped) chunk to retry.
	ErrNothingToRetry = submissions.ErrNothingToRetry
	// ErrTooManyWaiters: Config.MaxWaiters requests already wait on this instance.
	ErrTooManyWaiters = waiters.ErrTooMany
	// ErrTooManyWaitersForKey: the caller's key holds its share of them
	// (Config.MaxWaitersPerKey); it wraps ErrTooManyWaiters.
	ErrTooManyWaitersForKey = waiters.ErrTooManyForKey
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

// Submissions is the store of the submissions: submit, status, waits, list, cancel,
// results, failures, retry, pause and resume (see submissions.Store).
func (q *Queuer) Submissions() *submissions.Store { return q.subs }

// Throttles is consumers' back-pressure: set a throttle (POST /v1/throttle), and the
// throttles in force (see throttles.Throttles).
func (q *Queuer) Throttles() *throttles.Throttles { return q.throttle }

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
