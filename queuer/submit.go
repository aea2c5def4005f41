package queuer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
)

// NewSubmission is what a producer inserts, its chunks aside. The caller (the api package)
// has validated it.
type NewSubmission struct {
	Metadata string
	// StrategicMetadata is a JSON object whose values are integers or strings; nil or empty
	// for none.
	StrategicMetadata json.RawMessage
	Priority          int64
	// MaxRetries nil means the default_max_retries setting.
	MaxRetries     *int
	IdempotencyKey string
	// Prefix selects object-storage mode: the submission has ChunkCount chunks, Prefix+index,
	// and opsq stores no content.
	Prefix     string
	ChunkCount int64
	// CreatedByKey is the id of the API key that submits it (opsq.api_keys), 0 for none
	// (OPSQ_AUTH=off): a producer key cancels only its own submissions.
	CreatedByKey int64
}

// Chunks yields the contents of a submission's chunks in order. Next returns io.EOF after
// the last one; any other error aborts the insert and is returned as it is. The slice may
// be reused by the next call.
type Chunks interface {
	Next() ([]byte, error)
}

// Created reports an inserted submission. Existing is true when the idempotency key named a
// submission inserted before, whose id is returned instead.
type Created struct {
	ID          int64
	ChunksTotal int64
	Existing    bool
}

// Notification channels.
const (
	// ChannelWork announces chunks that became reservable and names their shards
	// (workPayload): "all:N" for N chunks over every shard, "3,17" for a chunk on each
	// shard named, "all" for anything may have changed.
	ChannelWork = "opsq_work"
	// ChannelFinished carries the id of a submission that reached a final state.
	ChannelFinished = "opsq_finished"
)

// Submit inserts a submission and its chunks in one transaction: either all of it exists
// afterwards or none of it does. The chunks are streamed into PostgreSQL with COPY, so
// memory stays flat whatever their number. chunks is ignored in object-storage mode.
func (s *submissions) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	id, err := s.ids.next()
	if err != nil {
		return Created{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Created{}, fmt.Errorf("inserting submission: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit

	if sub.IdempotencyKey != "" {
		existing, found, err := claimIdempotencyKey(ctx, tx, sub.IdempotencyKey, id)
		if err != nil {
			return Created{}, err
		}
		if found {
			return Created{ID: existing, Existing: true}, nil
		}
	}

	src := &chunkRows{id: id, shards: s.shardCount, chunks: chunks, row: make([]any, 5)}
	if sub.Prefix != "" {
		src.chunks, src.count = nil, sub.ChunkCount
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"opsq", "chunks"},
		[]string{"submission_id", "chunk_index", "shard", "random_order", "input"}, src); err != nil {
		if src.err != nil {
			return Created{}, src.err // the caller's error, as it gave it
		}
		return Created{}, fmt.Errorf("copying chunks: %w", err)
	}

	metadata := sub.StrategicMetadata
	if len(metadata) == 0 {
		metadata = json.RawMessage("{}")
	}
	var prefix *string
	if sub.Prefix != "" {
		prefix = &sub.Prefix
	}
	db := opsqsql.New(tx)
	p := opsqsql.SubmissionInsertParams{
		ID: id, ChunksTotal: src.n, Priority: sub.Priority, MaxRetries: sub.MaxRetries,
		Metadata: sub.Metadata, StrategicMetadata: string(metadata), Prefix: prefix,
		CreatedByKey: sub.CreatedByKey,
	}
	insert, channel, payload := db.SubmissionInsert, ChannelWork, workPayload(id, src.n, s.shardCount)
	if src.n == 0 {
		insert, channel, payload = db.SubmissionInsertCompleted, ChannelFinished, strconv.FormatInt(id, 10)
	}
	if err := insert(ctx, p); err != nil {
		return Created{}, fmt.Errorf("inserting submission: %w", err)
	}
	if err := db.StrategicMetadataInsert(ctx, opsqsql.StrategicMetadataInsertParams{
		SubmissionID: id, StrategicMetadata: string(metadata),
	}); err != nil {
		return Created{}, fmt.Errorf("inserting strategic metadata: %w", err)
	}
	if err := notify(ctx, tx, channel, payload); err != nil {
		return Created{}, fmt.Errorf("notifying: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Created{}, fmt.Errorf("committing submission: %w", err)
	}
	s.ingested.Add(src.n)
	return Created{ID: id, ChunksTotal: src.n}, nil
}

// workPayload names the shards that n new chunks of submission id went to, so that each
// instance wakes as many waiters as they can serve (onWork): "all:n" when they cover every
// shard, else a list such as "3,17".
func workPayload(id, n int64, shards int) string {
	if n >= int64(shards) {
		return "all:" + strconv.FormatInt(n, 10)
	}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ShardOf(id, int(i), shards)))
	}
	return b.String()
}

// claimIdempotencyKey takes key for submission id, or finds the submission that holds it.
// A concurrent transaction holding the same key makes this wait for it to finish.
func claimIdempotencyKey(ctx context.Context, tx pgx.Tx, key string, id int64) (existing int64, found bool, err error) {
	db := opsqsql.New(tx)
	claimed, err := db.IdempotencyClaim(ctx, opsqsql.IdempotencyClaimParams{Key: key, SubmissionID: id})
	if err != nil {
		return 0, false, fmt.Errorf("claiming idempotency key: %w", err)
	}
	if claimed {
		return 0, false, nil
	}
	existing, err = db.IdempotencyLookup(ctx, opsqsql.IdempotencyLookupParams{Key: key})
	if err != nil {
		return 0, false, fmt.Errorf("looking up idempotency key: %w", err)
	}
	return existing, true, nil
}

// chunkRows feeds COPY: one row per chunk, from chunks, or count rows without content in
// object-storage mode (chunks nil).
type chunkRows struct {
	id     int64
	shards int
	chunks Chunks
	count  int64 // object-storage mode
	n      int64 // rows produced
	row    []any
	err    error
}

var _ pgx.CopyFromSource = (*chunkRows)(nil)

func (r *chunkRows) Next() bool {
	var input []byte
	if r.chunks == nil {
		if r.n >= r.count {
			return false
		}
	} else {
		b, err := r.chunks.Next()
		if err == io.EOF {
			return false
		}
		if err != nil {
			r.err = err
			return false
		}
		input = b
		if input == nil {
			input = []byte{} // an empty chunk, not a missing one
		}
	}
	if r.n > math.MaxInt32 {
		r.err = fmt.Errorf("a submission holds at most %d chunks", int64(math.MaxInt32)+1)
		return false
	}
	fillChunkRow(r.row, r.id, int(r.n), r.shards, input)
	r.n++
	return true
}

// fillChunkRow fills row, as COPY into opsq.chunks takes it, with chunk idx of submission
// id: its shard and random order, and its input.
func fillChunkRow(row []any, id int64, idx, shards int, input []byte) {
	row[0] = id
	row[1] = int32(idx)
	row[2] = int32(ShardOf(id, idx, shards))
	row[3] = int32(RandomOrder(id, idx, shards))
	row[4] = input
}

func (r *chunkRows) Values() ([]any, error) { return r.row, nil }
func (r *chunkRows) Err() error             { return r.err }
