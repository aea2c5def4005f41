package sql

import (
	"context"
	_ "embed"
	"errors"
	"math"

	"github.com/jackc/pgx/v5"
)

// Many small submissions at once (queuer.SubmitMany, queuer.CancelMany), for tools such as
// the benchmark.

//go:embed submissions_insert_many.sql
var submissionsInsertMany string

// SubmissionsInsertManyParams are submissions_insert_many.sql's: per submission (the same
// index in each slice) what SubmissionInsertParams holds for one, without object storage.
type SubmissionsInsertManyParams struct {
	IDs         []int64
	ChunksTotal []int32
	Priority    []int64
	// MaxRetries nil means the default_max_retries setting.
	MaxRetries        []*int32
	Metadata          []string
	StrategicMetadata []string // JSON objects
	Tenants           []string
}

// SubmissionsInsertMany inserts in-progress submissions (their chunks are inserted apart),
// as SubmissionInsert inserts one.
func (q Queries) SubmissionsInsertMany(ctx context.Context, p SubmissionsInsertManyParams) error {
	_, err := q.db.Exec(ctx, submissionsInsertMany, pgx.NamedArgs{
		"ids": p.IDs, "chunks_total": p.ChunksTotal, "priority": p.Priority,
		"max_retries": p.MaxRetries, "metadata": p.Metadata, "strategic_metadata": p.StrategicMetadata,
		"tenants": p.Tenants,
	})
	return err
}

//go:embed strategic_metadata_insert_many.sql
var strategicMetadataInsertMany string

// StrategicMetadataInsertManyParams are strategic_metadata_insert_many.sql's: per
// submission (the same index in each slice) its strategic metadata, a JSON object.
type StrategicMetadataInsertManyParams struct {
	IDs               []int64
	StrategicMetadata []string
	Tenants           []string
}

// StrategicMetadataInsertMany indexes the strategic metadata of many submissions, as
// StrategicMetadataInsert does for one.
func (q Queries) StrategicMetadataInsertMany(ctx context.Context, p StrategicMetadataInsertManyParams) error {
	_, err := q.db.Exec(ctx, strategicMetadataInsertMany, pgx.NamedArgs{"ids": p.IDs, "strategic_metadata": p.StrategicMetadata, "tenants": p.Tenants})
	return err
}

//go:embed chunks_skip_submissions.sql
var chunksSkipSubmissions string

// ChunksSkipSubmissionsParams are chunks_skip_submissions.sql's.
type ChunksSkipSubmissionsParams struct {
	SubmissionIDs []int64
}

// ChunksSkipSubmissions deletes the reservable chunks of submissions that are no longer
// in progress, in one statement, not one per submission.
func (q Queries) ChunksSkipSubmissions(ctx context.Context, p ChunksSkipSubmissionsParams) error {
	_, err := q.db.Exec(ctx, chunksSkipSubmissions, pgx.NamedArgs{"submission_ids": p.SubmissionIDs})
	return err
}

// SubmissionsCancelParams are those of submission_cancel.sql run for each of IDs.
type SubmissionsCancelParams struct {
	IDs []int64
}

// SubmissionsCancel moves the submissions of p.IDs that are in progress to
// submissions_cancelled, as SubmissionCancel moves one, sent together in one batch (one
// round trip), and returns the ids it moved, in the order of p.IDs. The others (finished,
// or unknown) are left as they are. Their chunks stay: ChunksSkipSubmissions.
func (q Queries) SubmissionsCancel(ctx context.Context, p SubmissionsCancelParams) ([]int64, error) {
	var b pgx.Batch
	for _, id := range p.IDs {
		// Each one's chunks are moved in this transaction (ChunksSkipSubmissions): all counted now.
		b.Queue(submissionCancel, pgx.NamedArgs{"id": id, "skip_now": int64(math.MaxInt64)})
	}
	results := q.db.SendBatch(ctx, &b)
	var moved []int64
	for range p.IDs {
		var id, total, pending int64
		err := results.QueryRow().Scan(&id, &total, &pending)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			results.Close()
			return nil, err
		default:
			moved = append(moved, id)
		}
	}
	return moved, results.Close()
}

//go:embed submissions_notify_dropped.sql
var submissionsNotifyDropped string

// SubmissionsNotifyDroppedParams are submissions_notify_dropped.sql's: the submissions,
// and the channels told of them.
type SubmissionsNotifyDroppedParams struct {
	IDs      []int64
	Released string // gets '*' and the id of each, for the reservations of its chunks
	Finished string // gets the id of each
}

// SubmissionsNotifyDropped tells every instance that submissions p.IDs finished with
// chunks it may hold reservations of (they failed or were cancelled), and whoever waits
// for them, at the commit of db's transaction when db is one.
func (q Queries) SubmissionsNotifyDropped(ctx context.Context, p SubmissionsNotifyDroppedParams) error {
	_, err := q.db.Exec(ctx, submissionsNotifyDropped, pgx.NamedArgs{"ids": p.IDs, "released": p.Released, "finished": p.Finished})
	return err
}
