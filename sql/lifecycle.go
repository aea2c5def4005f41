package sql

import (
	"context"
	_ "embed"
	"time"

	"opsq/queuer/opsqtype"

	"github.com/jackc/pgx/v5"
)

// The statements of the failure lifecycle (issue 19) that the submissions store runs:
// results in any state, the failures page, retry, pause and resume.

//go:embed results_range.sql
var resultsRange string

// ResultsRangeParams are results_range.sql's.
type ResultsRangeParams struct {
	SubmissionID int64
	From         int32 // the first chunk index read
	// UntilPending stops before the first chunk at or after From that is pending.
	UntilPending bool
}

// ResultsRangeRow is one finished chunk: State "completed" (with Output), "failed" (with
// Error) or "skipped".
type ResultsRangeRow struct {
	ChunkIndex int32
	State      string
	Output     []byte
	Error      *string
}

// ResultsRange calls fn with each finished chunk of a submission from p.From on, in chunk
// order, as it streams from the database; a row's Output is valid only during the call.
// The chunks it skips over are pending.
func (q Queries) ResultsRange(ctx context.Context, p ResultsRangeParams, fn func(ResultsRangeRow) error) error {
	rows, err := q.db.Query(ctx, resultsRange, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "from": p.From, "until_pending": p.UntilPending,
	})
	if err != nil {
		return err
	}
	var r ResultsRangeRow
	_, err = pgx.ForEachRow(rows, []any{&r.ChunkIndex, &r.State, &r.Output, &r.Error}, func() error { return fn(r) })
	return err
}

//go:embed submission_lock_any.sql
var submissionLockAny string

// SubmissionLockAnyParams are submission_lock_any.sql's.
type SubmissionLockAnyParams struct {
	ID int64
}

// SubmissionLockAnyRow is the state of the submission locked.
type SubmissionLockAnyRow struct {
	State  string `db:"state"`
	Paused bool   `db:"paused"`
	// Unmoved is how many chunks of a submission cancelled or failed by slices are still
	// pending, not yet moved and counted skipped; 0 in any other state.
	Unmoved int64 `db:"unmoved"`
}

// SubmissionLockAny locks a submission's row wherever it is, for the rest of db's
// transaction, and reads its state. ErrNotFound when it found none: the submission is
// unknown, or it moved while this waited for the lock (run it again).
func (q Queries) SubmissionLockAny(ctx context.Context, p SubmissionLockAnyParams) (SubmissionLockAnyRow, error) {
	if OnCitus() {
		var r SubmissionLockAnyRow
		found, err := q.lockFirstCitus(ctx, submissionLockAnyCitus, pgx.NamedArgs{"id": p.ID}, &r.State, &r.Paused, &r.Unmoved)
		if err == nil && !found {
			err = ErrNotFound
		}
		return r, err
	}
	return collectOne[SubmissionLockAnyRow](ctx, q.db, submissionLockAny, pgx.NamedArgs{"id": p.ID})
}

//go:embed chunks_failed_unplaced.sql
var chunksFailedUnplaced string

// ChunksFailedUnplacedParams are chunks_failed_unplaced.sql's.
type ChunksFailedUnplacedParams struct {
	SubmissionID int64
	Unfinished   bool  // the skipped chunks too
	After        int32 // the last chunk index of the previous page; -1 for the first
	Limit        int
}

// ChunksFailedUnplaced reads a page of the failed (and, with Unfinished, skipped) chunks
// of a submission that have no shard (failed before migration 00007), in chunk order.
func (q Queries) ChunksFailedUnplaced(ctx context.Context, p ChunksFailedUnplacedParams) ([]int32, error) {
	rows, err := q.db.Query(ctx, chunksFailedUnplaced, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "unfinished": p.Unfinished, "after": p.After, "limit": p.Limit,
	})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

//go:embed chunks_failed_place.sql
var chunksFailedPlace string

// ChunksFailedPlaceParams are chunks_failed_place.sql's: the same index in each slice.
type ChunksFailedPlaceParams struct {
	SubmissionID int64
	ChunkIndexes []int32
	Shards       []int32
	RandomOrders []int32
}

// ChunksFailedPlace writes the shard and random order of failed chunks that have none.
func (q Queries) ChunksFailedPlace(ctx context.Context, p ChunksFailedPlaceParams) error {
	_, err := q.db.Exec(ctx, chunksFailedPlace, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "chunk_indexes": p.ChunkIndexes, "shards": p.Shards, "random_orders": p.RandomOrders,
	})
	return err
}

//go:embed chunks_retry_failed.sql
var chunksRetryFailed string

// ChunksRetryFailedParams are chunks_retry_failed.sql's.
type ChunksRetryFailedParams struct {
	SubmissionID int64
	Unfinished   bool // the skipped chunks too
	// Paused parks the chunks in chunks_waiting until the submission is resumed.
	Paused bool
	// ChunkIndexes, when not nil, retries only those chunks, failed or skipped.
	ChunkIndexes []int32
}

// ChunksRetryFailedRow is the chunks of one shard and kind that a retry moved.
type ChunksRetryFailedRow struct {
	Shard      int   `db:"shard"`
	Skipped    bool  `db:"skipped"`
	N          int64 `db:"n"`
	Reservable bool  `db:"reservable"`
}

// ChunksRetryFailed moves a submission's failed (and, with Unfinished, skipped) chunks
// back to the pending ones with retries 0, and forgets their errors; the caller holds the
// submission's lock (SubmissionLockAny) and fixes its counters.
func (q Queries) ChunksRetryFailed(ctx context.Context, p ChunksRetryFailedParams) ([]ChunksRetryFailedRow, error) {
	return collect[ChunksRetryFailedRow](ctx, q.db, chunksRetryFailed, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "unfinished": p.Unfinished, "paused": p.Paused, "chunk_indexes": p.ChunkIndexes,
	})
}

// SubmissionRetryParams are submission_retry_counters.sql's and submission_reopen.sql's:
// the failed and skipped chunks a retry made pending again, and the new attempt budget
// (nil: unchanged).
type SubmissionRetryParams struct {
	ID         int64
	Failed     int64
	Skipped    int64
	MaxRetries *int
}

func (p SubmissionRetryParams) args() pgx.NamedArgs {
	return pgx.NamedArgs{"id": p.ID, "failed": p.Failed, "skipped": p.Skipped, "max_retries": p.MaxRetries}
}

//go:embed submission_retry_counters.sql
var submissionRetryCounters string

// SubmissionRetryCounters uncounts the chunks a retry made pending again from an
// in-progress submission, and sets its attempt budget.
func (q Queries) SubmissionRetryCounters(ctx context.Context, p SubmissionRetryParams) error {
	_, err := q.db.Exec(ctx, submissionRetryCounters, p.args())
	return err
}

//go:embed submission_reopen.sql
var submissionReopen string

// SubmissionReopen moves a finished submission back in progress for a retry, with its
// counters and attempt budget as SubmissionRetryCounters sets them. ErrNotFound when no
// finished submission has the id.
func (q Queries) SubmissionReopen(ctx context.Context, p SubmissionRetryParams) error {
	var id int64
	return notFound(q.db.QueryRow(ctx, submissionReopen, p.args()).Scan(&id))
}

//go:embed chunk_errors_page.sql
var chunkErrorsPage string

// ChunkErrorsPageParams are chunk_errors_page.sql's.
type ChunkErrorsPageParams struct {
	SubmissionID int64
	After        int32 // -1: from the first chunk
	Limit        int
}

// ChunkErrorsPage reads a page of the chunk indexes of a submission that failed at least
// one attempt, in chunk order.
func (q Queries) ChunkErrorsPage(ctx context.Context, p ChunkErrorsPageParams) ([]int32, error) {
	rows, err := q.db.Query(ctx, chunkErrorsPage, pgx.NamedArgs{"submission_id": p.SubmissionID, "after": p.After, "limit": p.Limit})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

//go:embed chunk_failures.sql
var chunkFailures string

// ChunkFailuresParams are chunk_failures.sql's: chunks of one submission and their shards
// (the same index in both), and how many errors of each to read.
type ChunkFailuresParams struct {
	SubmissionID int64
	ChunkIndexes []int32
	Shards       []int32
	Kept         int
	// MaxBytes, when positive, stops the page once its rows, as an answer writes them
	// (ChunkFailuresRow.Size), would pass it; the page holds at least one row.
	MaxBytes int
}

// ChunkFailuresRow is one chunk of a failures page: its state ("failed" or "retrying"),
// retries, and last errors newest first (Errors, Consumers and Ats in the same order).
type ChunkFailuresRow struct {
	ChunkIndex int32       `db:"chunk_index"`
	State      string      `db:"state"`
	Retries    int64       `db:"retries"`
	Errors     []string    `db:"errors"`
	Consumers  []string    `db:"consumers"`
	Ats        []time.Time `db:"ats"`
}

// The parts of a failures page's chunk as an answer writes it, besides its strings: the
// field names, the index, the state, the retries and the punctuation (about 100 bytes);
// and of each of its errors, besides the error and the consumer: the field names, the
// time and the punctuation (about 60).
const (
	failureRowOverhead   = 128
	failureErrorOverhead = 96
)

// Size is at least the bytes r takes in an answer: JSON, whose strings can take up to six
// times their bytes (\u escapes), with the newest error written twice (as the chunk's
// error, and first of its errors).
func (r ChunkFailuresRow) Size() int {
	n := failureRowOverhead
	for i, e := range r.Errors {
		n += failureErrorOverhead + opsqtype.JSONStringLen(e)
		if i == 0 {
			n += opsqtype.JSONStringLen(e)
		}
	}
	for _, c := range r.Consumers {
		n += opsqtype.JSONStringLen(c)
	}
	return n
}

// ChunkFailures reads what a failures page says of each of p.ChunkIndexes, in chunk
// order: one row each, or, when the page stopped at p.MaxBytes, of the first ones only.
// The rows past the bound are never kept.
func (q Queries) ChunkFailures(ctx context.Context, p ChunkFailuresParams) ([]ChunkFailuresRow, error) {
	rows, err := q.db.Query(ctx, chunkFailures, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "chunk_indexes": p.ChunkIndexes, "shards": p.Shards, "kept": p.Kept,
	})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []ChunkFailuresRow
	size := 0
	for rows.Next() {
		r, err := pgx.RowToStructByName[ChunkFailuresRow](rows)
		if err != nil {
			return nil, err
		}
		size += r.Size()
		if p.MaxBytes > 0 && size > p.MaxBytes && len(page) > 0 {
			return page, nil // closing rows discards the rest as it comes
		}
		page = append(page, r)
	}
	return page, rows.Err()
}

//go:embed submission_pause.sql
var submissionPause string

// SubmissionPauseParams are submission_pause.sql's and submission_resume.sql's.
type SubmissionPauseParams struct {
	ID int64
}

// SubmissionPause pauses an in-progress submission whose lock the caller holds
// (SubmissionLockAny): its pending chunks wait until it is resumed. It returns how many
// chunks it took out of opsq.chunks. It moves a row per pending chunk (see the statement).
func (q Queries) SubmissionPause(ctx context.Context, p SubmissionPauseParams) (int64, error) {
	var n int64
	err := q.db.QueryRow(ctx, submissionPause, pgx.NamedArgs{"id": p.ID}).Scan(&n)
	return n, err
}

//go:embed submission_resume.sql
var submissionResume string

// SubmissionResumeRow is how many chunks a resume made reservable on one shard.
type SubmissionResumeRow struct {
	Shard int   `db:"shard"`
	N     int64 `db:"n"`
}

// SubmissionResume resumes an in-progress submission whose lock the caller holds
// (SubmissionLockAny): the chunks its pause held are reservable again (or wait for its
// not_before). It returns the chunks made reservable, per shard.
func (q Queries) SubmissionResume(ctx context.Context, p SubmissionPauseParams) ([]SubmissionResumeRow, error) {
	return collect[SubmissionResumeRow](ctx, q.db, submissionResume, pgx.NamedArgs{"id": p.ID})
}
