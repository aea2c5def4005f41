package sql

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed idempotency_claim.sql
var idempotencyClaim string

// IdempotencyClaimParams are idempotency_claim.sql's.
type IdempotencyClaimParams struct {
	Tenant       string
	Key          string
	SubmissionID int64
}

// IdempotencyClaim takes p.Key for p.SubmissionID. It reports false when another
// submission holds the key already (IdempotencyLookup finds it); a concurrent transaction
// taking the same key makes it wait for that one to end.
func (q Queries) IdempotencyClaim(ctx context.Context, p IdempotencyClaimParams) (bool, error) {
	var id int64
	err := q.db.QueryRow(ctx, idempotencyClaim, pgx.NamedArgs{"tenant": p.Tenant, "key": p.Key, "submission_id": p.SubmissionID}).Scan(&id)
	if err = notFound(err); err == ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

//go:embed tx_hold_limit.sql
var txHoldLimit string

// TxHoldLimit bounds how long the transaction it runs in may hold its locks: a session idle
// in it longer than limit is ended and a statement of it running longer than twice limit
// is cancelled, by PostgreSQL (whole milliseconds, at least 1; tx_hold_limit.sql says why
// twice).
func (q Queries) TxHoldLimit(ctx context.Context, limit time.Duration) error {
	var a, b string
	return q.db.QueryRow(ctx, txHoldLimit, pgx.NamedArgs{"ms": max(limit.Milliseconds(), 1)}).Scan(&a, &b)
}

//go:embed idempotency_lookup.sql
var idempotencyLookup string

// IdempotencyLookupParams are idempotency_lookup.sql's.
type IdempotencyLookupParams struct {
	Tenant string
	Key    string
}

// IdempotencyLookup returns the id of the submission that holds p.Key; ErrNotFound when
// none does.
func (q Queries) IdempotencyLookup(ctx context.Context, p IdempotencyLookupParams) (int64, error) {
	var id int64
	err := q.db.QueryRow(ctx, idempotencyLookup, pgx.NamedArgs{"tenant": p.Tenant, "key": p.Key}).Scan(&id)
	return id, notFound(err)
}

//go:embed submission_insert.sql
var submissionInsert string

//go:embed submission_insert_completed.sql
var submissionInsertCompleted string

// SubmissionInsertParams are submission_insert.sql's and submission_insert_completed.sql's.
type SubmissionInsertParams struct {
	ID          int64
	ChunksTotal int64
	Priority    int64
	// MaxRetries nil means the default_max_retries setting.
	MaxRetries        *int
	Metadata          string
	StrategicMetadata string // a JSON object
	Prefix            *string
	// CreatedByKey is the id of the API key that made it (0: none, keys off); a producer
	// key cancels only its own. A submission without chunks, complete at once, keeps none.
	CreatedByKey int64
	// Tenant owns the submission.
	Tenant string
}

func (p SubmissionInsertParams) args() pgx.NamedArgs {
	return pgx.NamedArgs{
		"id": p.ID, "chunks_total": p.ChunksTotal, "priority": p.Priority, "max_retries": p.MaxRetries,
		"metadata": p.Metadata, "strategic_metadata": p.StrategicMetadata, "prefix": p.Prefix,
		"created_by_key": p.CreatedByKey, "tenant": p.Tenant,
	}
}

// SubmissionInsert inserts an in-progress submission (its chunks are inserted apart).
func (q Queries) SubmissionInsert(ctx context.Context, p SubmissionInsertParams) error {
	_, err := q.db.Exec(ctx, submissionInsert, p.args())
	return err
}

// SubmissionInsertCompleted inserts a submission without chunks, completed at once.
func (q Queries) SubmissionInsertCompleted(ctx context.Context, p SubmissionInsertParams) error {
	_, err := q.db.Exec(ctx, submissionInsertCompleted, p.args())
	return err
}

//go:embed strategic_metadata_insert.sql
var strategicMetadataInsert string

// StrategicMetadataInsertParams are strategic_metadata_insert.sql's.
type StrategicMetadataInsertParams struct {
	SubmissionID      int64
	StrategicMetadata string // a JSON object
	Tenant            string // indexed under the key "@tenant"
}

// StrategicMetadataInsert indexes a submission's strategic metadata, one row per key, and
// its tenant.
func (q Queries) StrategicMetadataInsert(ctx context.Context, p StrategicMetadataInsertParams) error {
	_, err := q.db.Exec(ctx, strategicMetadataInsert, pgx.NamedArgs{"submission_id": p.SubmissionID, "strategic_metadata": p.StrategicMetadata, "tenant": p.Tenant})
	return err
}

// SubmissionStatusRow is one row of the opsq.submission_status view.
type SubmissionStatusRow struct {
	ID                int64           `db:"id"`
	State             string          `db:"state"`
	ChunksTotal       int64           `db:"chunks_total"`
	ChunksDone        int64           `db:"chunks_done"`
	ChunksFailed      int64           `db:"chunks_failed"`
	ChunksSkipped     int64           `db:"chunks_skipped"`
	Paused            bool            `db:"paused"`
	Priority          int64           `db:"priority"`
	Metadata          string          `db:"metadata"`
	StrategicMetadata json.RawMessage `db:"strategic_metadata"`
	Prefix            *string         `db:"prefix"`
	CreatedAt         time.Time       `db:"created_at"`
	FinishedAt        *time.Time      `db:"finished_at"`
	FailedChunkIndex  *int64          `db:"failed_chunk_index"`
	Error             *string         `db:"error"`
	OnFailure         json.RawMessage `db:"on_failure"`
	NotBefore         *time.Time      `db:"not_before"`
	Tenant            string          `db:"tenant"`
}

//go:embed submission_lifecycle_insert.sql
var submissionLifecycleInsert string

// SubmissionLifecycleInsertParams are submission_lifecycle_insert.sql's: a submission's
// lifecycle settings (none of them set: the defaults, and no row is needed).
type SubmissionLifecycleInsertParams struct {
	ID        int64
	OnFailure json.RawMessage // as the producer gave it
	// MaxFailed: the submission fails once more than this many chunks failed; nil never.
	MaxFailed      *int64
	BackoffInitial time.Duration
	BackoffFactor  float64
	BackoffMax     time.Duration
	NotBefore      *time.Time
}

// SubmissionLifecycleInsert records a submission's lifecycle settings.
func (q Queries) SubmissionLifecycleInsert(ctx context.Context, p SubmissionLifecycleInsertParams) error {
	_, err := q.db.Exec(ctx, submissionLifecycleInsert, pgx.NamedArgs{
		"id": p.ID, "on_failure": string(p.OnFailure), "max_failed": p.MaxFailed,
		"backoff_initial_ms": p.BackoffInitial.Milliseconds(), "backoff_factor": p.BackoffFactor,
		"backoff_max_ms": p.BackoffMax.Milliseconds(), "not_before": p.NotBefore,
	})
	return err
}

//go:embed submission_trace_insert.sql
var submissionTraceInsert string

// SubmissionTraceInsertParams are submission_trace_insert.sql's.
type SubmissionTraceInsertParams struct {
	ID          int64
	Traceparent string // checked by the caller: 55 characters, the W3C format
}

// SubmissionTraceInsert records the traceparent a submission was sent with.
func (q Queries) SubmissionTraceInsert(ctx context.Context, p SubmissionTraceInsertParams) error {
	_, err := q.db.Exec(ctx, submissionTraceInsert, pgx.NamedArgs{"id": p.ID, "traceparent": p.Traceparent})
	return err
}

//go:embed submission_status.sql
var submissionStatus string

// SubmissionStatusParams are submission_status.sql's.
type SubmissionStatusParams struct {
	ID int64
}

// SubmissionStatus reads a submission's state; ErrNotFound when there is none.
func (q Queries) SubmissionStatus(ctx context.Context, p SubmissionStatusParams) (SubmissionStatusRow, error) {
	return collectOne[SubmissionStatusRow](ctx, q.db, submissionStatus, pgx.NamedArgs{"id": p.ID})
}

//go:embed submission_list.sql
var submissionList string

//go:embed submission_list_by_metadata.sql
var submissionListByMetadata string

//go:embed submission_list_by_metadata_tenant.sql
var submissionListByMetadataTenant string

// SubmissionListParams are submission_list.sql's, with Key set
// submission_list_by_metadata.sql's, and with Key and Tenant set
// submission_list_by_metadata_tenant.sql's.
type SubmissionListParams struct {
	State *string // nil for any
	// Phase, when set with State in_progress, selects the submissions in that phase:
	// "running" (neither paused nor before their not_before), "paused", or "scheduled"
	// (not paused, before their not_before).
	Phase *string
	// Key and Value (JSON), when Key is set, select submissions whose strategic metadata has
	// key = value.
	Key   string
	Value string
	// Tenant, when set, selects that tenant's submissions only.
	Tenant *string
	After  *int64 // the last id of the previous page; nil for the first
	Limit  int
	// MaxBytes, when positive, stops the page once its rows' text (metadata, strategic
	// metadata, prefix, error) and a fixed share per row pass it; the page holds at least
	// one row.
	MaxBytes int
}

// listRowOverhead is what a row of a page weighs besides its text: its other fields as an
// answer writes them.
const listRowOverhead = 512

// Size is about the bytes r takes in an answer.
func (r SubmissionStatusRow) Size() int {
	n := listRowOverhead + len(r.Metadata) + len(r.StrategicMetadata) + len(r.OnFailure)
	if r.Prefix != nil {
		n += len(*r.Prefix)
	}
	if r.Error != nil {
		n += len(*r.Error)
	}
	return n
}

// SubmissionList reads a page of submissions, newest first. cut reports that the page
// stopped at p.MaxBytes, before p.Limit rows: more may follow.
func (q Queries) SubmissionList(ctx context.Context, p SubmissionListParams) (page []SubmissionStatusRow, cut bool, err error) {
	args := pgx.NamedArgs{"limit": p.Limit, "state": p.State, "phase": p.Phase, "after": p.After, "tenant": p.Tenant}
	query := submissionList
	switch {
	case p.Key != "" && p.Tenant != nil:
		// The tenant's rows first, so that the time of the page never depends on how
		// many of another tenant's submissions have the key.
		v, _ := json.Marshal(*p.Tenant) // a string always marshals
		query = submissionListByMetadataTenant
		args["key"], args["value"], args["tenant_value"] = p.Key, p.Value, string(v)
	case p.Key == "" && p.Tenant != nil:
		v, _ := json.Marshal(*p.Tenant)
		p.Key, p.Value = TenantKey, string(v)
		fallthrough
	case p.Key != "":
		query = submissionListByMetadata
		args["key"], args["value"] = p.Key, p.Value
	}
	rows, err := q.db.Query(ctx, query, args)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		r, err := pgx.RowToStructByName[SubmissionStatusRow](rows)
		if err != nil {
			return nil, false, err
		}
		size += r.Size()
		if p.MaxBytes > 0 && size > p.MaxBytes && len(page) > 0 {
			return page, true, nil // closing rows discards the rest as it comes
		}
		page = append(page, r)
	}
	return page, false, rows.Err()
}

//go:embed submission_cancel.sql
var submissionCancel string

// SubmissionCancelParams are submission_cancel.sql's.
type SubmissionCancelParams struct {
	ID int64
	// SkipNow: a submission with at most this many chunks pending has them all counted
	// skipped now (the caller moves them in the same transaction); one with more keeps its
	// count, and the caller moves and counts them by slices (ChunksSkipRange).
	SkipNow int64
}

// SubmissionCancelRow is what SubmissionCancel moved.
type SubmissionCancelRow struct {
	ID          int64 `db:"id"`
	ChunksTotal int64 `db:"chunks_total"`
	Pending     int64 `db:"pending"` // chunks neither done nor failed
}

// SubmissionCancel moves an in-progress submission to submissions_cancelled (its chunks
// stay: ChunksSkipSubmission, or ChunksSkipRange by slices). It returns ErrNotFound when
// no submission in progress has the id.
func (q Queries) SubmissionCancel(ctx context.Context, p SubmissionCancelParams) (SubmissionCancelRow, error) {
	return collectOne[SubmissionCancelRow](ctx, q.db, submissionCancel, pgx.NamedArgs{"id": p.ID, "skip_now": p.SkipNow})
}

//go:embed submission_ended_lock.sql
var submissionEndedLock string

// SubmissionEndedLockParams are submission_ended_lock.sql's.
type SubmissionEndedLockParams struct {
	ID int64
	// Failed: the submission failed; else it was cancelled.
	Failed bool
}

// SubmissionEndedLock locks the row of a cancelled (or, with p.Failed, failed)
// submission for the rest of db's transaction, and returns the error its skipped chunks
// record. ErrNotFound when it is not so (any more).
func (q Queries) SubmissionEndedLock(ctx context.Context, p SubmissionEndedLockParams) (string, error) {
	var msg string
	if OnCitus() {
		found, err := q.lockFirstCitus(ctx, submissionEndedLockCitus, pgx.NamedArgs{"id": p.ID, "failed": p.Failed}, &msg)
		if err == nil && !found {
			err = ErrNotFound
		}
		return msg, err
	}
	return msg, notFound(q.db.QueryRow(ctx, submissionEndedLock, pgx.NamedArgs{"id": p.ID, "failed": p.Failed}).Scan(&msg))
}

//go:embed submissions_unmoved.sql
var submissionsUnmoved string

// SubmissionsUnmovedParams are submissions_unmoved.sql's.
type SubmissionsUnmovedParams struct {
	After time.Duration // how long ago they ended, at least
	Limit int
}

// SubmissionsUnmovedRow is an ended submission whose pending chunks are not all moved.
type SubmissionsUnmovedRow struct {
	ID          int64     `db:"id"`
	ChunksTotal int64     `db:"chunks_total"`
	Failed      bool      `db:"failed"`
	FinishedAt  time.Time `db:"finished_at"`
}

// SubmissionsUnmoved lists the submissions cancelled or failed p.After ago or more whose move
// by slices was cut: their counts fall short of their total. Oldest first, up to p.Limit.
func (q Queries) SubmissionsUnmoved(ctx context.Context, p SubmissionsUnmovedParams) ([]SubmissionsUnmovedRow, error) {
	return collect[SubmissionsUnmovedRow](ctx, q.db, submissionsUnmoved, pgx.NamedArgs{"after_secs": p.After.Seconds(), "limit": p.Limit})
}

//go:embed ingest_begin.sql
var ingestBegin string

// IngestBegin records that a large object-storage submission begins to go in by slices.
func (q Queries) IngestBegin(ctx context.Context, id int64, instance string, chunkCount int64) error {
	_, err := q.db.Exec(ctx, ingestBegin, pgx.NamedArgs{"submission_id": id, "instance": instance, "chunk_count": chunkCount})
	return err
}

//go:embed ingest_end.sql
var ingestEnd string

// IngestEnd deletes the record of an ingest by slices and reports whether there was one.
func (q Queries) IngestEnd(ctx context.Context, id int64) (bool, error) {
	tag, err := q.db.Exec(ctx, ingestEnd, pgx.NamedArgs{"submission_id": id})
	return tag.RowsAffected() > 0, err
}

//go:embed ingests_dead.sql
var ingestsDead string

// IngestsDeadRow is an ingest by slices whose instance is gone.
type IngestsDeadRow struct {
	SubmissionID int64 `db:"submission_id"`
	ChunkCount   int64 `db:"chunk_count"`
}

// IngestsDead lists the ingests by slices whose instance is gone, oldest first.
func (q Queries) IngestsDead(ctx context.Context, limit int) ([]IngestsDeadRow, error) {
	return collect[IngestsDeadRow](ctx, q.db, ingestsDead, pgx.NamedArgs{"limit": limit})
}

//go:embed submission_ended_settle.sql
var submissionEndedSettle string

// SubmissionEndedSettle counts as skipped the uncounted rest of a cancelled (or, with
// failed, failed) submission none of whose chunks is left pending; it reports whether it
// changed the row.
func (q Queries) SubmissionEndedSettle(ctx context.Context, id int64, failed bool) (bool, error) {
	var n int
	err := q.db.QueryRow(ctx, submissionEndedSettle, pgx.NamedArgs{"id": id, "failed": failed}).Scan(&n)
	return n > 0, err
}

//go:embed results_stream.sql
var resultsStream string

// ResultsStreamParams are results_stream.sql's.
type ResultsStreamParams struct {
	SubmissionID int64
}

// ResultsStreamRow is one chunk's output.
type ResultsStreamRow struct {
	ChunkIndex int64
	Output     []byte
}

// ResultsStream calls fn with each completed chunk's output of a submission, in chunk
// order, as it streams from the database; a row's Output is valid only during the call.
func (q Queries) ResultsStream(ctx context.Context, p ResultsStreamParams, fn func(ResultsStreamRow) error) error {
	rows, err := q.db.Query(ctx, resultsStream, pgx.NamedArgs{"submission_id": p.SubmissionID})
	if err != nil {
		return err
	}
	var r ResultsStreamRow
	_, err = pgx.ForEachRow(rows, []any{&r.ChunkIndex, &r.Output}, func() error { return fn(r) })
	return err
}

//go:embed submission_info.sql
var submissionInfo string

// SubmissionInfoParams are submission_info.sql's.
type SubmissionInfoParams struct {
	IDs []int64
}

// SubmissionInfoRow is what a consumer gets with each chunk of an in-progress submission.
type SubmissionInfoRow struct {
	ID                int64
	Metadata          string
	StrategicMetadata json.RawMessage
	Prefix            *string
	MaxRetries        int32
	Tenant            string
	// Traceparent is the W3C traceparent the submission was sent with; nil for none.
	Traceparent *string
}

// SubmissionInfo reads the in-progress submissions of p.IDs, in no order; fn is called
// for each, and its row's slices are valid only during the call.
func (q Queries) SubmissionInfo(ctx context.Context, p SubmissionInfoParams, fn func(SubmissionInfoRow) error) error {
	rows, err := q.db.Query(ctx, submissionInfo, pgx.NamedArgs{"ids": p.IDs})
	if err != nil {
		return err
	}
	var r SubmissionInfoRow
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Metadata, &r.StrategicMetadata, &r.Prefix, &r.MaxRetries, &r.Tenant, &r.Traceparent}, func() error { return fn(r) })
	return err
}

//go:embed select_only_any.sql
var selectOnlyAny string

// SelectOnlyAnyParams are select_only_any.sql's.
type SelectOnlyAnyParams struct {
	Key   string
	Value string // JSON
	Limit int
}

// SelectOnlyAny returns the ids of the first in-progress submissions whose strategic
// metadata has key = value, oldest first.
func (q Queries) SelectOnlyAny(ctx context.Context, p SelectOnlyAnyParams) ([]int64, error) {
	rows, err := q.db.Query(ctx, selectOnlyAny, pgx.NamedArgs{"key": p.Key, "value": p.Value, "limit": p.Limit})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

//go:embed fair_others_any.sql
var fairOthersAny string

// FairOthersAnyParams are fair_others_any.sql's.
type FairOthersAnyParams struct {
	Key   string
	Known []string // canonical JSON values
	Limit int
}

// FairOthersAny returns the ids of the first in-progress submissions whose strategic
// metadata has no value of key among known (or no key), oldest first.
func (q Queries) FairOthersAny(ctx context.Context, p FairOthersAnyParams) ([]int64, error) {
	rows, err := q.db.Query(ctx, fairOthersAny, pgx.NamedArgs{"key": p.Key, "known": p.Known, "limit": p.Limit})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
