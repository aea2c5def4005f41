package submissions

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	opsqsql "opsq/sql"
)

// Bulk operations, for tools that load or clear a backlog of many tiny submissions (the
// benchmark): Submit and Cancel take a transaction per submission, minutes for hundreds of
// thousands. These write the same rows through the same statements, many per transaction.
// They need no running instance, only the pool of a migrated database.

// SmallSubmission is one submission of SubmitMany.
type SmallSubmission struct {
	// ID is the submission's id, which the caller chooses: unique, and never one that an
	// instance mints. Instances mint snowflake ids of the current millisecond, so ids of a
	// millisecond before any instance ran (such as 1<<40, 262 s after IDEpoch, and up) are
	// safe.
	ID int64
	// Metadata, StrategicMetadata, Priority and MaxRetries are NewSubmission's.
	Metadata          string
	StrategicMetadata json.RawMessage
	Priority          int64
	MaxRetries        *int
	// Tenant owns the submission; "" is TenantDefault.
	Tenant string
	// Chunks are the chunks' inputs: one or more.
	Chunks [][]byte
}

// submitManyBatch is how many submissions SubmitMany writes per statement.
const submitManyBatch = 10_000

// SubmitMany inserts n submissions, submission i being at(i), in one transaction: either
// all of them exist afterwards or none does. Each gets the rows Submit would write for it
// (its chunks by COPY with the shard and random order Submit gives them, its submission
// row and its strategic metadata by the statements of Submit written for many), and one
// NOTIFY wakes every instance at the end. at may be called more than once for the same i
// and must return the same submission. progress, if not nil, is called with how many rows
// have been written so far (chunks, then submissions, then metadata rows are counted:
// 3·n for n single-chunk submissions).
func SubmitMany(ctx context.Context, pool *pgxpool.Pool, n int64, at func(i int64) SmallSubmission, progress func(rows int64)) error {
	if progress == nil {
		progress = func(int64) {}
	}
	settings, err := claims.LoadSettings(ctx, pool)
	if err != nil {
		return err
	}
	return opsqsql.InTx(ctx, pool, func(q opsqsql.Queries) error {
		src := &manyChunkRows{at: at, n: n, shards: settings.ShardCount, row: make([]any, len(opsqsql.ChunkCopyColumns)), progress: progress}
		if _, err := q.ChunksCopy(ctx, opsqsql.ChunksCopyParams{Rows: src}); err != nil {
			if src.err != nil {
				return src.err
			}
			return fmt.Errorf("copying chunks: %w", err)
		}
		for first := int64(0); first < n; first += submitManyBatch {
			rows := newSubmissionRows(at, first, min(first+submitManyBatch, n))
			if err := q.SubmissionsInsertMany(ctx, rows.params()); err != nil {
				return fmt.Errorf("inserting submissions: %w", err)
			}
			progress(src.rows + first + int64(len(rows.ids)))
			if err := q.StrategicMetadataInsertMany(ctx, opsqsql.StrategicMetadataInsertManyParams{
				IDs: rows.ids, StrategicMetadata: rows.strategicMetadata, Tenants: rows.tenants,
			}); err != nil {
				return fmt.Errorf("inserting strategic metadata: %w", err)
			}
		}
		progress(src.rows + 2*n)
		announced := int64(-1) // fewer chunks than shards: anywhere
		if src.rows >= int64(settings.ShardCount) {
			announced = src.rows
		}
		if err := notify.SendWorkAll(ctx, q, announced); err != nil {
			return fmt.Errorf("notifying: %w", err)
		}
		return nil
	})
}

// submissionRows are the columns of submissions_insert_many.sql.
type submissionRows struct {
	ids               []int64
	chunksTotal       []int32
	priority          []int64
	maxRetries        []*int32
	metadata          []string
	strategicMetadata []string
	tenants           []string
}

func newSubmissionRows(at func(int64) SmallSubmission, from, to int64) submissionRows {
	var r submissionRows
	for i := from; i < to; i++ {
		s := at(i)
		metadata := string(s.StrategicMetadata)
		if metadata == "" {
			metadata = "{}"
		}
		var maxRetries *int32
		if s.MaxRetries != nil {
			m := int32(*s.MaxRetries)
			maxRetries = &m
		}
		r.ids = append(r.ids, s.ID)
		r.chunksTotal = append(r.chunksTotal, int32(len(s.Chunks)))
		r.priority = append(r.priority, s.Priority)
		r.maxRetries = append(r.maxRetries, maxRetries)
		r.metadata = append(r.metadata, s.Metadata)
		r.strategicMetadata = append(r.strategicMetadata, metadata)
		r.tenants = append(r.tenants, cmp.Or(s.Tenant, TenantDefault))
	}
	return r
}

func (r submissionRows) params() opsqsql.SubmissionsInsertManyParams {
	return opsqsql.SubmissionsInsertManyParams{IDs: r.ids, ChunksTotal: r.chunksTotal, Priority: r.priority,
		MaxRetries: r.maxRetries, Metadata: r.metadata, StrategicMetadata: r.strategicMetadata,
		Tenants: r.tenants}
}

// manyChunkRows feeds COPY the chunks of submissions 0 to n-1, in order.
type manyChunkRows struct {
	at       func(int64) SmallSubmission
	n        int64
	shards   int
	sub      int64 // the submission whose chunks are being fed, once started
	started  bool
	cur      SmallSubmission
	idx      int // the next chunk of cur
	rows     int64
	row      []any
	err      error
	progress func(int64)
}

var _ pgx.CopyFromSource = (*manyChunkRows)(nil)

func (r *manyChunkRows) Next() bool {
	for !r.started || r.idx >= len(r.cur.Chunks) {
		if r.started {
			r.sub++
		}
		if r.sub >= r.n {
			return false
		}
		r.started, r.cur, r.idx = true, r.at(r.sub), 0
		if len(r.cur.Chunks) == 0 {
			r.err = fmt.Errorf("submission %d has no chunk: SubmitMany inserts submissions of one chunk or more", r.cur.ID)
			return false
		}
	}
	input := r.cur.Chunks[r.idx]
	if input == nil {
		input = []byte{} // an empty chunk, not a missing one
	}
	fillChunkRow(r.row, r.cur.ID, r.idx, r.shards, input)
	r.idx++
	r.rows++
	if r.rows%10_000 == 0 {
		r.progress(r.rows)
	}
	return true
}

func (r *manyChunkRows) Values() ([]any, error) { return r.row, nil }
func (r *manyChunkRows) Err() error             { return r.err }

// cancelManyBatch is how many submissions CancelMany cancels per transaction.
const cancelManyBatch = 1000

// CancelMany cancels the submissions ids that are in progress, as Cancel cancels each,
// many per transaction, and returns how many it cancelled: each moves to
// submissions_cancelled by Cancel's statement, then their chunks are deleted and the
// instances told (notify.SendDropped) by one statement each for the whole transaction, not
// one per submission. The others (finished,
// or unknown) are left as they are. progress, if not nil, is called with how many of ids
// have been handled so far.
func CancelMany(ctx context.Context, pool *pgxpool.Pool, ids []int64, progress func(done int)) (cancelled int64, err error) {
	for first := 0; first < len(ids); first += cancelManyBatch {
		batch := ids[first:min(first+cancelManyBatch, len(ids))]
		err := opsqsql.InTx(ctx, pool, func(q opsqsql.Queries) error {
			moved, err := q.SubmissionsCancel(ctx, opsqsql.SubmissionsCancelParams{IDs: batch})
			if err != nil {
				return err
			}
			if len(moved) == 0 {
				return nil
			}
			if err := q.ChunksSkipSubmissions(ctx, opsqsql.ChunksSkipSubmissionsParams{SubmissionIDs: moved}); err != nil {
				return err
			}
			if err := notify.SendDropped(ctx, q, moved...); err != nil {
				return err
			}
			cancelled += int64(len(moved))
			return nil
		})
		if err != nil {
			return cancelled, fmt.Errorf("cancelling submissions: %w", err)
		}
		if progress != nil {
			progress(first + len(batch))
		}
	}
	return cancelled, nil
}
