package submissions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
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
	// Traceparent is the W3C traceparent the producer sent, handed out with each chunk;
	// "" for none. The caller has checked it (55 characters, the W3C format).
	Traceparent string
	// After is the submissions it starts after (its parents, at most MaxParents, of its
	// tenant; dependencies.go); nil for none. AfterPolicy is AfterCompleted ("" too) or
	// AfterFinished.
	After       []int64
	AfterPolicy string

	// HoldLimit, when > 0, bounds how long the transaction that takes the idempotency key
	// and inserts the submission may hold its locks (sql/tx_hold_limit.sql): a statement of
	// it running longer is cancelled, and a session idle in it longer (its process
	// SIGSTOPped) is ended by PostgreSQL, so that another instance's submit of the same key
	// waits that long at most. A stop in the middle of the chunks' COPY is not bounded
	// (PostgreSQL does not cancel a COPY waiting for its client's data). A schedule's runs
	// set it; a producer's submits do not.
	HoldLimit time.Duration
	// held: its chunks wait on its parents (set by Submit from After).
	held bool
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

// SliceRows is how many chunks of a large object-storage submission go in per committed
// slice (submitSliced).
const SliceRows = 100_000

// Submit inserts a submission and its chunks in one transaction: either all of it exists
// afterwards or none of it does. The chunks are streamed into PostgreSQL with COPY, so
// memory stays flat whatever their number. chunks is ignored in object-storage mode, where
// a submission of more than SliceRows chunks goes in by slices (submitSliced). A submission
// that would take its tenant past a quota is refused with a *QuotaError, and nothing of it
// stays.
func (s *Store) Submit(ctx context.Context, sub NewSubmission, chunks Chunks) (Created, error) {
	sub.Tenant = cmp.Or(sub.Tenant, TenantDefault)
	if len(sub.After) > 0 {
		held, err := s.checkParents(ctx, sub)
		if err != nil {
			return Created{}, err
		}
		sub.held = held
	}
	id, err := s.cfg.IDs.Next()
	if err != nil {
		return Created{}, err
	}
	if sub.Prefix != "" && sub.ChunkCount > int64(s.SliceRows()) {
		created, err := s.submitSliced(ctx, id, sub)
		if err == nil && !created.Existing {
			s.childInserted(ctx, id, sub)
		}
		return created, err
	}
	src := s.chunkSource(id, sub)
	src.chunks = chunks
	if sub.Prefix != "" {
		src.chunks, src.count = nil, sub.ChunkCount
	}
	created, err := s.insert(ctx, id, sub, func(db opsqsql.Queries) (int64, error) {
		if _, err := db.ChunksCopy(ctx, opsqsql.ChunksCopyParams{Rows: src, Waiting: waits(sub)}); err != nil {
			if src.err != nil {
				return 0, src.err // the caller's error, as it gave it
			}
			return 0, fmt.Errorf("copying chunks: %w", err)
		}
		return src.n, nil
	})
	if err != nil || created.Existing {
		return created, err
	}
	s.inserted(ctx, id, sub, created.ChunksTotal)
	s.childInserted(ctx, id, sub)
	return created, nil
}

// insert inserts submission id in one transaction: it takes sub's idempotency key (or
// answers the submission that holds it, Existing, with nothing inserted), has chunks
// insert its chunks (or count those inserted already) and say how many there are, checks
// the tenant's quotas for them, and inserts the submission's row, which makes them
// reservable. Either all of it commits or none of it does.
func (s *Store) insert(ctx context.Context, id int64, sub NewSubmission, chunks func(db opsqsql.Queries) (int64, error)) (Created, error) {
	var created Created
	err := opsqsql.InTx(ctx, s.cfg.Pool, func(db opsqsql.Queries) error {
		if sub.HoldLimit > 0 {
			if err := db.TxHoldLimit(ctx, sub.HoldLimit); err != nil {
				return fmt.Errorf("bounding the submit's locks: %w", err)
			}
		}
		if sub.IdempotencyKey != "" {
			existing, found, err := claimIdempotencyKey(ctx, db, sub.Tenant, sub.IdempotencyKey, id)
			if err != nil {
				return err
			}
			if found {
				created = Created{ID: existing, Existing: true}
				return nil
			}
		}
		n, err := chunks(db)
		if err != nil {
			return err
		}
		if n > 0 {
			// Once the chunks are counted (an NDJSON body is counted as it streams in).
			if err := checkQuota(ctx, db, sub.Tenant, n); err != nil {
				return err
			}
		}
		if err := s.insertSubmission(ctx, db, id, sub, n); err != nil {
			return err
		}
		created = Created{ID: id, ChunksTotal: n}
		return nil
	})
	if err != nil {
		return Created{}, err
	}
	return created, nil
}

// submitSliced inserts a large object-storage submission: its chunks by committed slices
// of SliceRows, then, in one last transaction, its submission row, which makes them
// reservable: until then no reserve hands them out (a chunk whose submission is not in
// progress is passed over, queuer/internal/handout) and no promoter moves them (chunks_promote.sql
// joins the submission). A submission refused or cut half-way (an error, the client gone,
// OPSQ_MAX_INGEST_TIME) leaves no rolled-back transaction bigger than one slice, and no
// transaction open longer than one slice takes, for vacuum to wait on; the slices that
// were committed are removed the same way, one slice per transaction.
func (s *Store) submitSliced(ctx context.Context, id int64, sub NewSubmission) (Created, error) {
	db := opsqsql.New(s.cfg.Pool)
	if sub.IdempotencyKey != "" {
		// Before the slices: a repeat costs a lookup, not the rows. The key is taken in the
		// last transaction, which finds it if another took it meanwhile.
		existing, err := db.IdempotencyLookup(ctx, opsqsql.IdempotencyLookupParams{Tenant: sub.Tenant, Key: sub.IdempotencyKey})
		if err == nil {
			return Created{ID: existing, Existing: true}, nil
		}
		if !errors.Is(err, opsqsql.ErrNotFound) {
			return Created{}, fmt.Errorf("looking up idempotency key: %w", err)
		}
	}
	// Before the slices too, so that a submission over a quota writes nothing; the last
	// transaction checks again under the tenant's lock.
	if err := opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error { return checkQuota(ctx, q, sub.Tenant, sub.ChunkCount) }); err != nil {
		return Created{}, err
	}
	// Recorded before the first slice, so that the slices of an instance that dies before
	// the last go with the resume job (ResumeSlices) rather than stay.
	if err := db.IngestBegin(ctx, id, s.cfg.Instance, sub.ChunkCount); err != nil {
		return Created{}, fmt.Errorf("recording the ingest by slices: %w", err)
	}
	var done int64 // chunks [0, done) are committed
	created, err := func() (Created, error) {
		for done < sub.ChunkCount {
			src := s.chunkSource(id, sub)
			src.n, src.count = done, min(done+int64(s.SliceRows()), sub.ChunkCount)
			if _, err := db.ChunksCopy(ctx, opsqsql.ChunksCopyParams{Rows: src, Waiting: waits(sub)}); err != nil {
				if src.err != nil {
					return Created{}, src.err
				}
				return Created{}, fmt.Errorf("copying chunks %d to %d: %w", done, src.count, err)
			}
			done = src.count
			if s.cfg.AfterSlice != nil {
				s.cfg.AfterSlice(done)
			}
		}
		return s.insert(ctx, id, sub, func(db opsqsql.Queries) (int64, error) {
			if ours, err := db.IngestEnd(ctx, id); err != nil {
				return 0, fmt.Errorf("ending the ingest by slices: %w", err)
			} else if !ours {
				return 0, errors.New("the ingest was taken for dead and its slices removed (its instance silent for a minute); submit again")
			}
			return done, nil
		})
	}()
	if err != nil || created.Existing {
		if s.removeSlices(ctx, id, done) {
			s.endIngest(ctx, id)
		}
		return created, err
	}
	s.inserted(ctx, id, sub, done)
	return created, nil
}

// removeSlices removes the committed chunks [0, done) of a submission that was not
// inserted, one slice per transaction, whether or not ctx has ended, and reports whether
// it removed them all. What it cannot remove (the database gone meanwhile) it logs; the
// resume job removes it later (ResumeSlices).
func (s *Store) removeSlices(ctx context.Context, id, done int64) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeSlicesTimeout)
	defer cancel()
	db := opsqsql.New(s.cfg.Pool)
	for from := int64(0); from < done; from += int64(s.SliceRows()) {
		to := min(from+int64(s.SliceRows()), done)
		err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
			return db.ChunksDeleteRange(ctx, opsqsql.ChunksDeleteRangeParams{SubmissionID: id, From: int32(from), To: int32(to)})
		})
		if err != nil {
			s.cfg.Log.ErrorContext(ctx, "removing the chunks of a submission cut while it was inserted; the resume job removes them within minutes",
				slog.Int64("submission_id", id), slog.Int64("from", from), slog.Int64("chunks", done), slog.Any("error", err))
			return false
		}
	}
	return true
}

// endIngest deletes the record of an ingest by slices whose slices are removed.
func (s *Store) endIngest(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeSlicesTimeout)
	defer cancel()
	if _, err := opsqsql.New(s.cfg.Pool).IngestEnd(ctx, id); err != nil {
		s.cfg.Log.WarnContext(ctx, "ending the record of a cut ingest; the resume job ends it", slog.Int64("submission_id", id), slog.Any("error", err))
	}
}

// removeSlicesTimeout bounds the removal of a cut submission's slices.
const removeSlicesTimeout = 10 * time.Minute

// SliceRows is how many chunks go in per slice of a large object-storage submission, and
// how many chunk indexes a slice of a large cancel or fail moves (Config.SliceRows).
func (s *Store) SliceRows() int { return cmp.Or(s.cfg.SliceRows, SliceRows) }

// chunkSource is a COPY source for the chunks of submission id, to be given its chunks or
// count; they go to opsq.chunks_waiting, with their ready_at, when sub waits for its
// not_before (waits), out of the table the reserves read until the promoter moves them
// (waiting.go).
func (s *Store) chunkSource(id int64, sub NewSubmission) *chunkRows {
	src := &chunkRows{id: id, shards: s.shardCount, row: make([]any, len(opsqsql.ChunkCopyColumns))}
	if waits(sub) {
		src.row = make([]any, len(opsqsql.ChunkCopyColumns)+1)
		src.row[len(opsqsql.ChunkCopyColumns)] = sub.Lifecycle.NotBefore
		if sub.held { // until its parents let it start, as a pause holds them
			src.row[len(opsqsql.ChunkCopyColumns)] = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
		}
	}
	return src
}

// insertSubmission inserts, in q's transaction, the row of submission id of n chunks (which makes them
// reservable), its strategic metadata and lifecycle, and the NOTIFY of its work.
func (s *Store) insertSubmission(ctx context.Context, q opsqsql.Queries, id int64, sub NewSubmission, n int64) error {
	metadata := sub.StrategicMetadata
	if len(metadata) == 0 {
		metadata = json.RawMessage("{}")
	}
	var prefix *string
	if sub.Prefix != "" {
		prefix = &sub.Prefix
	}
	db := q
	p := opsqsql.SubmissionInsertParams{
		ID: id, ChunksTotal: n, Priority: sub.Priority, MaxRetries: sub.MaxRetries,
		Metadata: sub.Metadata, StrategicMetadata: string(metadata), Prefix: prefix,
		CreatedByKey: sub.CreatedByKey, Tenant: sub.Tenant,
	}
	insert, announce := db.SubmissionInsert, func() error { return s.announceWork(ctx, q, id, n) }
	if waits(sub) {
		announce = func() error { return nil } // the promoter announces them when they are due
	}
	if n == 0 && !sub.held { // a child without chunks completes when its parents let it start
		insert, announce = db.SubmissionInsertCompleted, func() error { return notify.SendFinished(ctx, q, id) }
	}
	if err := insert(ctx, p); err != nil {
		return fmt.Errorf("inserting submission: %w", err)
	}
	if err := db.StrategicMetadataInsert(ctx, opsqsql.StrategicMetadataInsertParams{
		SubmissionID: id, StrategicMetadata: string(metadata), Tenant: sub.Tenant,
	}); err != nil {
		return fmt.Errorf("inserting strategic metadata: %w", err)
	}
	if lp, ok := sub.Lifecycle.params(id, n); ok {
		if err := db.SubmissionLifecycleInsert(ctx, lp); err != nil {
			return fmt.Errorf("inserting the lifecycle settings: %w", err)
		}
	}
	if len(sub.After) > 0 {
		if err := db.DependenciesInsert(ctx, opsqsql.DependenciesInsertParams{
			Child: id, Parents: sub.After, Policy: cmp.Or(sub.AfterPolicy, AfterCompleted), Waiting: sub.held,
		}); err != nil {
			return fmt.Errorf("inserting the parents: %w", err)
		}
		if sub.held {
			if err := notify.SendParents(ctx, q, sub.After...); err != nil {
				return fmt.Errorf("notifying: %w", err)
			}
		}
	}
	if sub.Traceparent != "" {
		if err := db.SubmissionTraceInsert(ctx, opsqsql.SubmissionTraceInsertParams{ID: id, Traceparent: sub.Traceparent}); err != nil {
			return fmt.Errorf("inserting the traceparent: %w", err)
		}
	}
	if err := announce(); err != nil {
		return fmt.Errorf("notifying: %w", err)
	}
	return nil
}

// waits reports whether sub's chunks wait for its not_before, or for its parents.
func waits(sub NewSubmission) bool { return sub.held || sub.Lifecycle.NotBefore.After(time.Now()) }

// inserted counts and announces here, at once, n chunks of submission id just committed,
// then has the planner's statistics refreshed if they lag far behind (Config.Ingested).
func (s *Store) inserted(ctx context.Context, id int64, sub NewSubmission, n int64) {
	s.ingested.Add(n)
	if n > 0 && !waits(sub) {
		// At once, not only when the NOTIFY comes back: a reserve here after the submit sees
		// its chunks wherever they sort.
		s.cfg.Bus.Raise(notify.NewWork{Shards: s.shardsOf(id, n), Chunks: int(min(n, 1<<31-1)), Local: true})
	}
	if s.cfg.Ingested != nil && n > 0 {
		s.cfg.Ingested(ctx, n)
	}
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
		shards[i] = opsqtype.ShardOf(id, i, s.shardCount)
	}
	return shards
}

// announceWork tells every instance, at the commit of q's transaction, where n new chunks of
// submission id are.
func (s *Store) announceWork(ctx context.Context, q opsqsql.Queries, id, n int64) error {
	if shards := s.shardsOf(id, n); shards != nil {
		return notify.SendWork(ctx, q, shards)
	}
	return notify.SendWorkAll(ctx, q, n)
}

// claimIdempotencyKey takes tenant's key for submission id, or finds the submission of the
// tenant that holds it. A concurrent transaction holding the same key makes this wait for
// it to finish.
func claimIdempotencyKey(ctx context.Context, q opsqsql.Queries, tenant, key string, id int64) (existing int64, found bool, err error) {
	db := q
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
// object-storage mode (chunks nil). It reads a window of chunks ahead (up to windowRows,
// and windowBytes of content) and writes the window's rows grouped by shard, in index
// order within each: consecutive chunks go to consecutive shards, and opsq.chunks is one
// table (migration 00026), so rows written in index order would put each shard's next
// chunk 64 rows further on, each on a page of its own; grouped, the chunks a reserve
// reads in a run (and a complete then deletes) share their heap pages, as they did in a
// shard's own partition (docs/capacity.md).
type chunkRows struct {
	id     int64
	shards int
	chunks Chunks
	count  int64 // object-storage mode
	n      int64 // chunks read
	row    []any
	err    error

	window  []windowRow // read ahead, sorted by shard
	next    int         // the next of window to write
	content []byte      // the window's inputs, end to end (Chunks may reuse its slice)
}

// windowRow is a chunk read ahead: its index, shard, and input within content.
type windowRow struct {
	idx, shard int
	from, to   int
	empty      bool // object-storage mode: no input
}

const (
	// windowRows is at most how many chunks chunkRows reads ahead: enough for runs of
	// several chunks a shard over 64 shards.
	windowRows = 4096
	// windowBytes bounds the inputs chunkRows holds read ahead.
	windowBytes = 1 << 20
)

var _ pgx.CopyFromSource = (*chunkRows)(nil)

func (r *chunkRows) Next() bool {
	if r.next >= len(r.window) && !r.fill() {
		return false
	}
	w := r.window[r.next]
	r.next++
	var input []byte
	if !w.empty {
		input = r.content[w.from:w.to:w.to]
		if input == nil {
			input = []byte{} // an empty chunk, not a missing one
		}
	}
	fillChunkRow(r.row, r.id, w.idx, r.shards, input)
	return true
}

// fill reads the next window and sorts it by shard; false at the end or on an error.
func (r *chunkRows) fill() bool {
	r.window, r.next, r.content = r.window[:0], 0, r.content[:0]
	for len(r.window) < windowRows && len(r.content) < windowBytes {
		w := windowRow{idx: int(r.n)}
		if r.chunks == nil {
			if r.n >= r.count {
				break
			}
			w.empty = true
		} else {
			b, err := r.chunks.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.err = err
				return false
			}
			w.from = len(r.content)
			r.content = append(r.content, b...) // an empty chunk stays an empty one, not a missing one
			w.to = len(r.content)
		}
		if r.n > math.MaxInt32 {
			r.err = fmt.Errorf("a submission holds at most %d chunks", int64(math.MaxInt32)+1)
			return false
		}
		w.shard = opsqtype.ShardOf(r.id, w.idx, r.shards)
		r.window = append(r.window, w)
		r.n++
	}
	slices.SortFunc(r.window, func(a, b windowRow) int {
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.idx, b.idx))
	})
	return len(r.window) > 0
}

// fillChunkRow fills row, as COPY into opsq.chunks takes it, with chunk idx of submission
// id: its shard and random order, and its input.
func fillChunkRow(row []any, id int64, idx, shards int, input []byte) {
	row[0] = id
	row[1] = int32(idx)
	row[2] = int32(opsqtype.ShardOf(id, idx, shards))
	row[3] = int32(opsqtype.RandomOrder(id, idx, shards))
	row[4] = input
}

func (r *chunkRows) Values() ([]any, error) { return r.row, nil }
func (r *chunkRows) Err() error             { return r.err }
