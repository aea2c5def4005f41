package queuer

import (
	"context"
	"time"
)

// The producers' verbs (DESIGN.md §3, Producer), each the submissions store's.

// Submit inserts a submission and its chunks at once: either all of it exists afterwards
// or nothing does.
func (q *Queuer) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	return q.subs.Submit(ctx, sub, chunks)
}

// Status returns a submission's status (ErrNotFound for an unknown id).
func (q *Queuer) Status(ctx context.Context, id int64) (Status, error) { return q.subs.Status(ctx, id) }

// WaitFinished waits up to wait for the submission to finish, woken by its events, and
// returns its status then.
func (q *Queuer) WaitFinished(ctx context.Context, id int64, wait time.Duration) (Status, error) {
	return q.subs.WaitFinished(ctx, id, wait)
}

// List returns a page of submissions, newest first, and whether more follow.
func (q *Queuer) List(ctx context.Context, opts ListOptions) ([]Status, bool, error) {
	return q.subs.List(ctx, opts)
}

// Cancel cancels a submission in progress (ErrFinished when it has finished already).
func (q *Queuer) Cancel(ctx context.Context, id int64) (Status, error) { return q.subs.Cancel(ctx, id) }

// Results calls fn with each chunk's result, in chunk order, in any state.
func (q *Queuer) Results(ctx context.Context, id int64, fn func(Result) error) error {
	return q.subs.Results(ctx, id, fn)
}

// FollowResults calls fn with each chunk's result once the chunk is finished, in chunk
// order, until the submission finishes.
func (q *Queuer) FollowResults(ctx context.Context, id int64, fn func(Result) error) error {
	return q.subs.FollowResults(ctx, id, fn)
}

// Failures returns a page of the chunks that failed at least one attempt, after chunk
// index after, and whether more follow.
func (q *Queuer) Failures(ctx context.Context, id, after int64, limit int) ([]FailedChunk, bool, error) {
	return q.subs.Failures(ctx, id, after, limit)
}

// Chunk returns one chunk of a submission as the dashboard's chunk page shows it: where
// it is, the start of its input and output, and its kept errors.
func (q *Queuer) Chunk(ctx context.Context, id, index int64) (ChunkInfo, error) {
	return q.subs.Chunk(ctx, id, index)
}

// Retry gives a submission's failed (or skipped) chunks a fresh attempt budget.
func (q *Queuer) Retry(ctx context.Context, id int64, opts RetryOptions) (Status, error) {
	return q.subs.Retry(ctx, id, opts)
}

// RetryMany retries every submission that sel selects, newest first, and returns their ids.
func (q *Queuer) RetryMany(ctx context.Context, sel ListOptions, opts RetryOptions) ([]int64, error) {
	return q.subs.RetryMany(ctx, sel, opts)
}

// Pause stops handing out a submission's chunks until Resume.
func (q *Queuer) Pause(ctx context.Context, id int64) (Status, error) { return q.subs.Pause(ctx, id) }

// Resume makes a paused submission's chunks reservable again at once.
func (q *Queuer) Resume(ctx context.Context, id int64) (Status, error) { return q.subs.Resume(ctx, id) }

// TenantOf returns the tenant of a submission (ErrNotFound for an unknown id).
func (q *Queuer) TenantOf(ctx context.Context, id int64) (string, error) {
	return q.subs.TenantOf(ctx, id)
}

// TenantIn returns nil when submission id belongs to one of tenants, ErrNotFound when it
// is unknown or another tenant's: both misses run the same statement, so that the time of
// the answer does not tell them apart.
func (q *Queuer) TenantIn(ctx context.Context, id int64, tenants []string) error {
	return q.subs.TenantIn(ctx, id, tenants)
}

// TenantsOf returns the tenants of the submissions that exist among ids.
func (q *Queuer) TenantsOf(ctx context.Context, ids []int64) (map[int64]string, error) {
	return q.subs.TenantsOf(ctx, ids)
}
