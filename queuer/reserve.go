package queuer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/claims"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/strategy"
)

// ReserveRequest is what a consumer asks for. The api package validates the bounds.
type ReserveRequest struct {
	Max      int
	Strategy strategy.Node
	Lease    time.Duration
	Wait     time.Duration
	Consumer string
	// Forwarded marks a request another instance forwarded here: it is answered from this
	// instance's shards only, at once, so that forwarding never loops.
	Forwarded bool
}

// Chunk is one reserved chunk as the consumer gets it.
type Chunk struct {
	Token             string
	SubmissionID      int64
	ChunkIndex        int32
	Input             []byte // nil in object-storage mode
	Prefix            *string
	Metadata          string
	StrategicMetadata json.RawMessage
	Retries           int32
	ExpiresAt         time.Time
}

// Bounds of one reserve scan.
const (
	// scanRowsMax bounds the rows one request reads past chunks that are reserved already,
	// so that a backlog made mostly of reserved chunks cannot make a reserve slow.
	scanRowsMax = 20_000
	batchMax    = 1_000
)

// Reserve reserves up to req.Max chunks: from this instance's shards; when they have none,
// from another instance that has some (forwarding); when nobody has any, it waits up to
// req.Wait for work to appear (woken by NOTIFY and local releases, not by polling).
func (q *Queuer) Reserve(ctx context.Context, req ReserveRequest) ([]Chunk, error) {
	var deadline <-chan time.Time
	if req.Wait > 0 && !req.Forwarded {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		woken := q.work.next() // taken before looking, so that no wake-up is missed
		chunks, err := q.reserveLocal(ctx, req)
		if err == nil && len(chunks) > 0 && ctx.Err() != nil {
			// The consumer went away: give the chunks back rather than let their leases run
			// out and count an attempt each.
			q.undo(chunks)
			return nil, ctx.Err()
		}
		if err != nil || len(chunks) > 0 || req.Forwarded {
			return chunks, err
		}
		if chunks, err = q.forward(ctx, req); err != nil || len(chunks) > 0 {
			return chunks, err
		}
		if deadline == nil {
			return []Chunk{}, nil
		}
		select {
		case <-woken:
		case <-deadline:
			return []Chunk{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// candidate is one row of a reserve scan.
type candidate struct {
	key     reserver.Key
	shard   int
	retries int32
	input   []byte
	order   int // random_order
}

// reserveLocal reserves from this instance's reservable shards.
func (q *Queuer) reserveLocal(ctx context.Context, req ReserveRequest) ([]Chunk, error) {
	leases := q.claims.Reservable()
	if len(leases) == 0 {
		return []Chunk{}, nil
	}
	shards := make([]int32, len(leases))
	generation := make(map[int]int64, len(leases))
	for i, l := range leases {
		shards[i] = int32(l.Shard)
		generation[l.Shard] = l.Generation
	}
	scan := newScan(req.Strategy, shards)
	epoch := q.tombs.begin()
	defer q.tombs.end(epoch)
	out := make([]Chunk, 0, req.Max)
	scanned := 0
	limit := min(req.Max+4, batchMax)
	for len(out) < req.Max && scanned < scanRowsMax {
		query, args, ok := scan.next(limit)
		if !ok {
			// Every shard was read to its end: none has a free chunk left for us.
			q.markUnavailable(leases)
			break
		}
		rows, err := q.pool.Query(ctx, query, args)
		if err != nil {
			return q.undo(out), fmt.Errorf("reading candidates: %w", err)
		}
		var free []candidate
		n := 0
		var c candidate
		_, err = pgx.ForEachRow(rows, []any{&c.key.SubmissionID, &c.key.ChunkIndex, &c.shard, &c.retries, &c.input, &c.order}, func() error {
			n++
			scan.saw(c)
			if !q.reserver.IsReserved(c.key) && !q.tombs.has(c.key) {
				free = append(free, c)
			}
			return nil
		})
		if err != nil {
			return q.undo(out), fmt.Errorf("reading candidates: %w", err)
		}
		scanned += n
		if n < limit {
			scan.exhausted()
		}
		if len(free) > 0 {
			if out, err = q.take(ctx, req, free, generation, out); err != nil {
				return q.undo(out), err
			}
		}
		limit = min(limit*2, batchMax)
	}
	return out, nil
}

// take reserves free candidates in the reserver until out holds req.Max chunks.
func (q *Queuer) take(ctx context.Context, req ReserveRequest, free []candidate, generation map[int]int64, out []Chunk) ([]Chunk, error) {
	infos, err := q.submissionInfos(ctx, free)
	if err != nil {
		return out, err
	}
	expires := time.Now().Add(req.Lease)
	for _, c := range free {
		if len(out) == req.Max {
			break
		}
		info, ok := infos[c.key.SubmissionID]
		if !ok {
			continue // the submission finished since the scan
		}
		gen := generation[c.shard]
		tok := newToken(c.key, c.shard, gen, c.retries).String()
		if !q.reserver.Reserve(reserver.Reservation{
			Token: tok, Key: c.key, Shard: c.shard, Generation: gen, Retries: c.retries,
			Consumer: req.Consumer, ExpiresAt: expires, Values: info.values,
		}) {
			continue // another request took it meanwhile
		}
		if q.tombs.has(c.key) {
			q.reserver.Release(tok) // finished or retried since the scan read it
			continue
		}
		if l, ok := q.claims.Lease(c.shard); !ok || l.Generation != gen || l.Draining {
			q.reserver.Release(tok) // the shard was lost meanwhile: not ours to hand out
			continue
		}
		ch := Chunk{
			Token: tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex,
			Prefix: info.prefix, Metadata: info.metadata, StrategicMetadata: info.strategic,
			Retries: c.retries, ExpiresAt: expires,
		}
		if info.prefix == nil {
			ch.Input = c.input
		}
		out = append(out, ch)
	}
	return out, nil
}

// undo releases chunks reserved by a request that then failed.
func (q *Queuer) undo(out []Chunk) []Chunk {
	for _, c := range out {
		q.reserver.Release(c.Token)
	}
	return nil
}

// scan walks a strategy's candidate order in batches, resuming after the last row seen.
type scan struct {
	kind   strategy.Kind
	shards []int32
	// random: the deck is cut at offset; the first range is [offset, 65536), the second
	// [0, offset).
	offset, before int
	second         bool
	done           bool
	// Where the next batch starts (after this key).
	afterOrder int
	afterKey   reserver.Key
}

func newScan(n strategy.Node, shards []int32) *scan {
	s := &scan{kind: n.Kind, shards: shards}
	switch n.Kind {
	case strategy.Random:
		s.offset = rand.N(1 << 16)
		s.afterOrder, s.before = s.offset, 1<<16
		s.afterKey = reserver.Key{SubmissionID: 0, ChunkIndex: 0} // before any real chunk at that order
	case strategy.OldestFirst:
		s.afterKey = reserver.Key{SubmissionID: 0, ChunkIndex: 0}
	case strategy.NewestFirst:
		s.afterKey = reserver.Key{SubmissionID: 1<<63 - 1, ChunkIndex: 1<<31 - 1}
	}
	return s
}

// next returns the query of the next batch, or false when the order is exhausted.
func (s *scan) next(limit int) (string, pgx.NamedArgs, bool) {
	if s.done {
		return "", nil, false
	}
	args := pgx.NamedArgs{
		"shards": s.shards, "limit": limit,
		"after_submission": s.afterKey.SubmissionID, "after_chunk": s.afterKey.ChunkIndex,
	}
	switch s.kind {
	case strategy.OldestFirst:
		return opsqsql.ReserveOldestFirst, args, true
	case strategy.NewestFirst:
		return opsqsql.ReserveNewestFirst, args, true
	default:
		args["after_order"], args["before_order"] = s.afterOrder, s.before
		return opsqsql.ReserveRandom, args, true
	}
}

// saw records the last row read.
func (s *scan) saw(c candidate) {
	s.afterKey = c.key
	s.afterOrder = c.order
}

// exhausted is called when a batch came back short: the current range has no more rows.
func (s *scan) exhausted() {
	if s.kind == strategy.Random && !s.second && s.offset > 0 {
		s.second = true
		s.afterOrder, s.before = -1, s.offset
		s.afterKey = reserver.Key{}
		return
	}
	s.done = true
}

// submissionInfo is what a consumer gets with each chunk of a submission, cached.
type submissionInfo struct {
	metadata   string
	strategic  json.RawMessage
	values     map[string]string // strategic metadata, key -> canonical JSON value
	prefix     *string
	maxRetries int32
}

// infoCache holds the submissionInfo of in-progress submissions. Entries go when the
// submission finishes (NOTIFY); the whole cache is dropped when it grows past its bound.
type infoCache struct {
	mu struct {
		sync.Mutex
		byID map[int64]*submissionInfo
	}
}

const infoCacheMax = 100_000

func newInfoCache() *infoCache {
	c := &infoCache{}
	c.mu.byID = map[int64]*submissionInfo{}
	return c
}

func (c *infoCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.byID, id)
}

// submissionInfos returns the infos of the candidates' submissions that are in progress.
func (q *Queuer) submissionInfos(ctx context.Context, cands []candidate) (map[int64]*submissionInfo, error) {
	out := make(map[int64]*submissionInfo, 4)
	var missing []int64
	q.infos.mu.Lock()
	for _, c := range cands {
		id := c.key.SubmissionID
		if _, ok := out[id]; ok {
			continue
		}
		if info, ok := q.infos.mu.byID[id]; ok {
			out[id] = info
		} else if !containsID(missing, id) {
			missing = append(missing, id)
		}
	}
	q.infos.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := q.pool.Query(ctx, opsqsql.SubmissionInfo, pgx.NamedArgs{"ids": missing})
	if err != nil {
		return nil, fmt.Errorf("reading submissions: %w", err)
	}
	var id int64
	var info submissionInfo
	_, err = pgx.ForEachRow(rows, []any{&id, &info.metadata, &info.strategic, &info.prefix, &info.maxRetries}, func() error {
		in := info
		in.strategic = append(json.RawMessage(nil), info.strategic...)
		var values map[string]json.RawMessage
		if err := json.Unmarshal(in.strategic, &values); err != nil {
			return fmt.Errorf("strategic metadata of %d: %w", id, err)
		}
		in.values = make(map[string]string, len(values))
		for k, v := range values {
			in.values[k] = string(v)
		}
		out[id] = &in
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading submissions: %w", err)
	}
	q.infos.mu.Lock()
	if len(q.infos.mu.byID) > infoCacheMax {
		q.infos.mu.byID = map[int64]*submissionInfo{}
	}
	for _, id := range missing {
		if info, ok := out[id]; ok {
			q.infos.mu.byID[id] = info
		}
	}
	q.infos.mu.Unlock()
	return out, nil
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// markUnavailable notes that these shards had no free chunk at the last full scan; the
// owner publishes it at renewal, for other instances' forwarding.
func (q *Queuer) markUnavailable(leases []claims.Lease) {
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	for _, l := range leases {
		q.avail.mu.empty[l.Shard] = true
	}
}
