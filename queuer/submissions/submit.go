package submissions

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/queuer/notify"
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
	// Tenant owns the submission; "" is TenantDefault. The caller has checked it
	// (CheckTenant) and that its key may submit for it.
	Tenant string
	// Lifecycle is what the submission does when work goes wrong, and when it may start.
	Lifecycle Lifecycle
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

// Submit inserts a submission and its chunks in one transaction: either all of it exists
// afterwards or none of it does. The chunks are streamed into PostgreSQL with COPY, so
// memory stays flat whatever their number. chunks is ignored in object-storage mode.
// A submission that would take its tenant past a quota is refused with a *QuotaError, and
// nothing of it stays.
func (s *Store) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	sub.Tenant = cmp.Or(sub.Tenant, TenantDefault)
	id, err := s.cfg.IDs.Next()
	if err != nil {
		return Created{}, err
	}
	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return Created{}, fmt.Errorf("inserting submission: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit

	if sub.IdempotencyKey != "" {
		existing, found, err := claimIdempotencyKey(ctx, tx, sub.Tenant, sub.IdempotencyKey, id)
		if err != nil {
			return Created{}, err
		}
		if found {
			return Created{ID: existing, Existing: true}, nil
		}
	}

	// Chunks that may not be handed out yet (not_before) wait in chunks_waiting, out of the
	// table the reserves read, until the promoter moves them (waiting.go).
	waits := sub.Lifecycle.NotBefore.After(time.Now())
	table, columns := "chunks", []string{"submission_id", "chunk_index", "shard", "random_order", "input"}
	src := &chunkRows{id: id, shards: s.shardCount, chunks: chunks, row: make([]any, 5)}
	if waits {
		table, columns = "chunks_waiting", append(columns, "ready_at")
		src.row = make([]any, 6)
		src.row[5] = sub.Lifecycle.NotBefore
	}
	if sub.Prefix != "" {
		src.chunks, src.count = nil, sub.ChunkCount
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"opsq", table}, columns, src); err != nil {
		if src.err != nil {
			return Created{}, src.err // the caller's error, as it gave it
		}
		return Created{}, fmt.Errorf("copying chunks: %w", err)
	}

	if src.n > 0 {
		// Once the chunks are counted (an NDJSON body is counted as it streams in).
		if err := checkQuota(ctx, tx, sub.Tenant, src.n); err != nil {
			return Created{}, err
		}
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
		CreatedByKey: sub.CreatedByKey, Tenant: sub.Tenant,
	}
	insert, announce := db.SubmissionInsert, func() error { return s.announceWork(ctx, tx, id, src.n) }
	if waits {
		announce = func() error { return nil } // the promoter announces them when they are due
	}
	if src.n == 0 {
		insert, announce = db.SubmissionInsertCompleted, func() error { return notify.SendFinished(ctx, tx, id) }
	}
	if err := insert(ctx, p); err != nil {
		return Created{}, fmt.Errorf("inserting submission: %w", err)
	}
	if err := db.StrategicMetadataInsert(ctx, opsqsql.StrategicMetadataInsertParams{
		SubmissionID: id, StrategicMetadata: string(metadata), Tenant: sub.Tenant,
	}); err != nil {
		return Created{}, fmt.Errorf("inserting strategic metadata: %w", err)
	}
	if lp, ok := sub.Lifecycle.params(id, src.n); ok {
		if err := db.SubmissionLifecycleInsert(ctx, lp); err != nil {
			return Created{}, fmt.Errorf("inserting the lifecycle settings: %w", err)
		}
	}
	if err := announce(); err != nil {
		return Created{}, fmt.Errorf("notifying: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Created{}, fmt.Errorf("committing submission: %w", err)
	}
	s.ingested.Add(src.n)
	if src.n > 0 && !waits {
		// At once, not only when the NOTIFY comes back: a reserve here after the submit sees
		// its chunks wherever they sort.
		s.cfg.Bus.Raise(notify.NewWork{Shards: s.shardsOf(id, src.n), Chunks: int(min(src.n, 1<<31-1)), Local: true})
	}
	return Created{ID: id, ChunksTotal: src.n}, nil
}

// shardsOf names the shards that n new chunks of submission id went to, so that each
// instance wakes as many waiters as they can serve: nil when they cover every shard, else
// the shard of each.
func (s *Store) shardsOf(id, n int64) []int {
	if n >= int64(s.shardCount) {
		return nil
	}
	shards := make([]int, n)
	for i := range shards {
		shards[i] = ShardOf(id, i, s.shardCount)
	}
	return shards
}

// announceWork tells every instance, at the commit of tx, where n new chunks of
// submission id are.
func (s *Store) announceWork(ctx context.Context, tx pgx.Tx, id, n int64) error {
	if shards := s.shardsOf(id, n); shards != nil {
		return notify.SendWork(ctx, tx, shards)
	}
	return notify.SendWorkAll(ctx, tx, n)
}

// claimIdempotencyKey takes tenant's key for submission id, or finds the submission of the
// tenant that holds it. A concurrent transaction holding the same key makes this wait for
// it to finish.
func claimIdempotencyKey(ctx context.Context, tx pgx.Tx, tenant, key string, id int64) (existing int64, found bool, err error) {
	db := opsqsql.New(tx)
	claimed, err := db.IdempotencyClaim(ctx, opsqsql.IdempotencyClaimParams{Tenant: tenant, Key: key, SubmissionID: id})
	if err != nil {
		return 0, false, fmt.Errorf("claiming idempotency key: %w", err)
	}
	if claimed {
		return 0, false, nil
	}
	existing, err = db.IdempotencyLookup(ctx, opsqsql.IdempotencyLookupParams{Tenant: tenant, Key: key})
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
