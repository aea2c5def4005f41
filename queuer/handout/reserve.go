package handout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/api/wire"
	"opsq/claims"
	"opsq/queuer/notify"
	"opsq/queuer/submissions"
	"opsq/queuer/tokens"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/strategy"
)

// Request is what a consumer asks for. The api package validates the bounds.
type Request struct {
	Max      int
	Strategy strategy.Node
	Lease    time.Duration
	Wait     time.Duration
	Consumer string
	// MaxBytes bounds the answer: it stops adding chunks once they hold this many bytes of
	// input, metadata and strategic metadata; it always holds at least one chunk. 0: no
	// bound.
	MaxBytes int
	// Forwarded marks a request another instance forwarded here: it is answered from this
	// instance's shards only, at once, so that forwarding never loops.
	Forwarded bool
	// Tenants confines the request to the chunks of these tenants' submissions (a
	// consumer key limited to them, DESIGN.md §8); nil: every tenant. The scans filter
	// by tenant as a select_only does, so they do not read the other tenants' chunks one
	// by one when the tenants have few submissions in progress.
	Tenants []string
}

// confined reports whether req is limited to some tenants.
func (req Request) confined() bool { return req.Tenants != nil }

// Chunk is one reserved chunk as the consumer gets it.
type Chunk struct {
	Token             string
	SubmissionID      int64
	ChunkIndex        int32
	Input             []byte // nil in object-storage mode
	Prefix            *string
	Metadata          string
	StrategicMetadata json.RawMessage
	// StrategicValues is StrategicMetadata decoded, once per submission and shared by its
	// chunks: read-only. Nil when the chunk came from another instance.
	StrategicValues map[string]wire.MetadataValue
	Retries         int32
	ExpiresAt       time.Time
	// Traceparent is the W3C traceparent its submission was sent with; "" for none.
	Traceparent string
}

// Bounds of one reserve request.
const (
	// scanRowsMax bounds the rows one request reads past chunks it cannot take (reserved
	// already, saturated, over a limit), so that no backlog can make a reserve slow.
	scanRowsMax = 20_000
	batchMax    = 1_000
)

// candidate is one row of a reserve scan.
type candidate struct {
	key     reserver.Key
	shard   int
	retries int32
	// attempt is the chunk's attempt (its attempt_base + retries, migrations/00016): what
	// its token, its reservation and the tombstones name. retries is what the consumer is
	// told.
	attempt int32
	input   []byte
	// inputBytes is what input takes in an answer (jsonStringLen), kept when a deferred
	// copy drops the input.
	inputBytes int
	order      int   // random_order
	negPrio    int64 // custom_priority: the negated priority
	info       *submissionInfo
}

// candidateOf is the candidate of a row of a candidate query.
func candidateOf(r opsqsql.CandidatesStreamRow) candidate {
	return candidate{
		key: reserver.Key{SubmissionID: r.SubmissionID, ChunkIndex: r.ChunkIndex}, shard: r.Shard,
		retries: r.Retries, attempt: r.AttemptBase + r.Retries, input: r.Input, order: r.RandomOrder, negPrio: r.NegPriority,
	}
}

// position is where c is in its leaf's order.
func (c candidate) position() strategy.Position {
	return strategy.Position{Priority: c.negPrio, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex}
}

// run is one scan of this instance's shards for one or more reserve requests of the same
// strategy and lease (see shared.go): the strategy tree walked node by node, each leaf a
// streaming scan of candidates. The chunks it takes go to the requests in order: the first
// until it is full (its Max, or its MaxBytes), then the next.
type run struct {
	p          *Path
	strategy   strategy.Node
	asks       []Request
	shards     []int32
	generation map[int]int64
	expires    time.Time
	reserved   time.Time // when the run began: its reservations' ReservedAt
	out        []Chunk
	// want is how many chunks the requests ask for together.
	want    int
	scanned int
	// ends[i] is where the chunks of request i end in out, for the requests filled
	// already; the one being filled is asks[len(ends)].
	ends []int
	// bytes is what the request being filled holds, as its answer writes it.
	bytes int
	// fullValues are the max_simultaneous values refused a slot in this run: further
	// candidates of them are skipped without asking the database again.
	fullValues map[valuePair]bool
	// exhaustive is false once any scan stopped before the end of its order, or skipped a
	// chunk for a strategy's reason: only an exhaustive empty run proves the shards empty.
	exhaustive bool
	// epoch is the run's tombstone epoch, begun before any of its scans; held are the
	// epochs of the buffers it took candidates from. It ends them all when it is done.
	epoch uint64
	held  []uint64
	turnCap
}

// turnCap is how many chunks a walk's answer may hold in a weighted_fair value's turn
// (limit); 0: no cap. A run and a preview each have one.
type turnCap struct{ cap int }

// reached reports whether have chunks fill the turn.
func (c *turnCap) reached(have int) bool { return c.cap > 0 && have >= c.cap }

// turnRoom is how many more chunks fit, of want, with have held.
func (c *turnCap) turnRoom(want, have int) int {
	n := want - have
	if c.cap > 0 {
		n = min(n, c.cap-have)
	}
	return max(n, 0)
}

// limit caps the turn at n (within any cap already set) until the function it returns.
func (c *turnCap) limit(n int) func() {
	old := c.cap
	c.cap = n
	if old > 0 {
		c.cap = min(old, n)
	}
	return func() { c.cap = old }
}

// reserveFor reserves from this instance's reservable shards for asks, which share
// asks[0]'s strategy and lease, in one run: out[i] is what asks[i] gets (never nil).
func (p *Path) reserveFor(ctx context.Context, asks []Request) ([][]Chunk, error) {
	leases := p.cfg.Claims.Reservable()
	if len(leases) == 0 {
		out := make([][]Chunk, len(asks))
		for i := range out {
			out[i] = []Chunk{}
		}
		return out, nil
	}
	now := p.cfg.Now()
	r := &run{p: p, strategy: asks[0].Strategy, asks: asks, generation: make(map[int]int64, len(leases)),
		expires: now.Add(asks[0].Lease), reserved: now, exhaustive: true}
	for _, a := range asks {
		r.want += a.Max
	}
	r.out = make([]Chunk, 0, min(r.want, batchMax))
	r.shards = make([]int32, len(leases))
	for i, l := range leases {
		r.shards[i] = int32(l.Shard)
		r.generation[l.Shard] = l.Generation
	}
	since := p.cfg.Availability.Announced() // before the scan reads anything
	r.epoch = p.tombs.begin()
	defer func() {
		p.tombs.end(r.epoch)
		for _, e := range r.held {
			p.tombs.end(e)
		}
	}()
	if err := walkTenants(ctx, r, r.strategy, asks[0].Tenants); err != nil {
		p.GiveBack(r.out)
		return nil, err
	}
	if len(r.out) == 0 && r.exhaustive {
		p.cfg.Availability.MarkUnavailable(leases, since) // every order was read to its end: nothing free here
	}
	return r.answers(), nil
}

// answers cuts out into the chunks of each request.
func (r *run) answers() [][]Chunk {
	out := make([][]Chunk, len(r.asks))
	from := 0
	for i := range out {
		to := len(r.out)
		if i < len(r.ends) {
			to = r.ends[i]
		}
		out[i] = r.out[from:to:to]
		from = to
	}
	return out
}

func (r *run) full() bool { return r.answerFull() || r.scanned >= scanRowsMax }

func (r *run) scanBound() bool { return r.scanned >= scanRowsMax && !r.answerFull() }

// answerFull reports whether the requests may take no more chunks: each has its Max, or
// its MaxBytes.
func (r *run) answerFull() bool {
	return len(r.ends) >= len(r.asks) || r.reached(len(r.out))
}

func (r *run) count() int { return len(r.out) }

func (r *run) space() int { return r.turnRoom(r.want, len(r.out)) }

func (r *run) fairState(n strategy.Node) *drr { return r.p.fair.of(n) }

func (r *run) partial() { r.exhaustive = false }

// filling is the request being filled and how many chunks it holds.
func (r *run) filling() (Request, int) {
	held := len(r.out)
	if len(r.ends) > 0 {
		held -= r.ends[len(r.ends)-1]
	}
	return r.asks[len(r.ends)], held
}

// next moves on to the next request: the one being filled is full.
func (r *run) next() {
	r.ends = append(r.ends, len(r.out))
	r.bytes = 0
}

// room reports whether a request has room for a chunk of size bytes, moving on from the
// one being filled when the chunk would take it past its MaxBytes (a request always has
// room for one chunk).
func (r *run) room(size int) bool {
	for !r.answerFull() {
		a, held := r.filling()
		if held == 0 || a.MaxBytes <= 0 || r.bytes+size <= a.MaxBytes {
			return true
		}
		r.next()
	}
	return false
}

// valuePair is one strategic metadata key and canonical value.
type valuePair struct{ key, value string }

var _ walker = (*run)(nil)

// selectOnly scans a rare value's submissions one by one (submissions), and nothing at all
// for a value no submission in progress has.
func (r *run) selectOnly(ctx context.Context, filter strategy.Filter, then strategy.Node, f frame) (bool, error) {
	ids, err := r.p.matching(ctx, filter)
	if err != nil || len(ids) == 0 {
		return true, err // nothing in progress has that value: nothing to scan for
	}
	if len(ids) <= fewSubmissions && then.Kind.Leaf() {
		return true, r.submissions(ctx, then.Kind, ids, f)
	}
	return false, nil
}

// tenants scans nothing for tenants with nothing in progress, and the few submissions of
// tenants that hold few chunks one by one (tenants.go says why).
func (r *run) tenants(ctx context.Context, tenants []string, then strategy.Node, f frame) (bool, error) {
	subs, err := r.p.tenantSubmissions(ctx, tenants)
	if err != nil || len(subs.ids) == 0 {
		return true, err
	}
	if len(subs.ids) <= fewSubmissions && subs.pending <= fewTenantChunks && then.Kind.Leaf() {
		return true, r.submissions(ctx, then.Kind, subs.ids, f)
	}
	return false, nil
}

// deferred takes prefer_distinct's saturated candidates after all. The deferred copies
// hold no input: the inputs of those taken are read again.
func (r *run) deferred(ctx context.Context, cands []candidate, f frame) error {
	from := len(r.out)
	for _, c := range cands {
		if r.answerFull() {
			break
		}
		if _, err := r.take(ctx, c, f); err != nil {
			return err
		}
	}
	return r.reread(ctx, from)
}

// fewSubmissions is how many submissions with a select_only value are scanned one by one
// rather than by filtering the leaf's scan of the whole backlog.
const fewSubmissions = 64

// matching returns the in-progress submissions whose strategic metadata has the filter's
// key = one of its values, oldest first, up to fewSubmissions+1 of them: one ordered
// index scan per value, remembered until new work arrives (cachedSubs): a weighted_fair
// value's turn asks it at every reserve.
func (p *Path) matching(ctx context.Context, filter strategy.Filter) ([]int64, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "select_only %q", filter.Key)
	filter.Each(func(value []byte) { fmt.Fprintf(&key, " %s", value) })
	subs, err := p.cachedSubs(key.String(), func() (tenantSubs, error) {
		var ids []int64
		var err error
		filter.Each(func(value []byte) {
			if err != nil {
				return
			}
			var some []int64
			some, err = opsqsql.New(p.cfg.Pool).SelectOnlyAny(ctx, opsqsql.SelectOnlyAnyParams{Key: filter.Key, Value: string(value), Limit: fewSubmissions + 1})
			if err != nil {
				err = fmt.Errorf("looking for submissions with %s = %s: %w", filter.Key, value, err)
			}
			ids = append(ids, some...)
		})
		if err != nil {
			return tenantSubs{}, err
		}
		if filter.Values != nil {
			slices.Sort(ids)
			ids = ids[:min(len(ids), fewSubmissions+1)]
		}
		return tenantSubs{ids: ids}, nil
	})
	return subs.ids, err
}

// fairOthersKnownMax is the most values a weighted_fair ring may know for its others'
// turn to look for the submissions without them first (run.others); past it, the turn
// scans the backlog, passing over the known values' chunks.
const fairOthersKnownMax = 1_000

// fairOthers returns the in-progress submissions whose strategic metadata has no value of
// key among known, oldest first, up to fewSubmissions+1 of them, remembered until new
// work arrives (cachedSubs).
func (p *Path) fairOthers(ctx context.Context, key string, known []string) ([]int64, error) {
	subs, err := p.cachedSubs(fmt.Sprintf("weighted_fair others %q %q", key, known), func() (tenantSubs, error) {
		ids, err := opsqsql.New(p.cfg.Pool).FairOthersAny(ctx, opsqsql.FairOthersAnyParams{Key: key, Known: known, Limit: fewSubmissions + 1})
		if err != nil {
			return tenantSubs{}, fmt.Errorf("looking for submissions without the values of %s a weighted_fair knows: %w", key, err)
		}
		return tenantSubs{ids: ids}, nil
	})
	return subs.ids, err
}

// others serves a weighted_fair's turn of the others (known, the values of key the ring
// has turns for) as selectOnly serves a rare value: nothing at all when every submission
// in progress has one of the known values, and the few without one submission by
// submission; otherwise the turn scans the backlog, passing over the known values'
// chunks, which when they are most of it costs up to the scan bound.
func (r *run) others(ctx context.Context, key string, known []string, then strategy.Node, f frame) (bool, error) {
	if len(known) > fairOthersKnownMax {
		return false, nil
	}
	ids, err := r.p.fairOthers(ctx, key, known)
	if err != nil || len(ids) == 0 {
		return true, err
	}
	if len(ids) <= fewSubmissions && then.Kind.Leaf() {
		return true, r.submissions(ctx, then.Kind, ids, f)
	}
	return false, nil
}

// submissions runs a leaf over a few submissions (a rare select_only value), one
// submission at a time, each in chunk order: oldest_first and custom_priority take them
// oldest first, newest_first newest first, random in random order.
func (r *run) submissions(ctx context.Context, kind strategy.Kind, ids []int64, f frame) error {
	// Buffered as a leaf's scan is (leaf): a scan reads fillRows rows at least, and keeps
	// those the answers did not take for the next reserves, so that a rare value's or a
	// small tenant's reserves do not each run a merge over every shard.
	var fill *bufferFill
	if buffered(f) {
		fill = &bufferFill{key: fmt.Sprintf("submissions %v|%s", ids, hintKey(kind, f.filters, r.shards)), era: r.p.buffers.era(kind)}
		if err := r.takeBuffered(ctx, fill.key, f); err != nil || r.full() {
			return err
		}
	}
	ids = append([]int64(nil), ids...)
	switch kind {
	case strategy.NewestFirst:
		slices.Reverse(ids)
	case strategy.Random:
		rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	query, fargs := strategy.SubmissionQuery(f.filters, r.shards)
	var rest []candidate // fill: the free rows read and not taken, in order
	defer func() {
		if fill != nil && len(rest) > 0 {
			r.p.buffers.install(fill.key, kind, rest, r.generation, r.epoch, fill.era)
		}
	}()
	for _, id := range ids {
		// A hint skips the run of reserved chunks a submission's scan starts with, as
		// scanShards' do: without it each reserve reads past every chunk the ones before
		// it took.
		hk := fmt.Sprintf("submission %d|%s", id, hintKey(strategy.OldestFirst, f.filters, r.shards))
		after := int32(-1)
		if p, ok := r.p.hints.get(hk); ok {
			after = p.ChunkIndex
		}
		lead, leadRun := true, 0
		limit := min(r.want-len(r.out)+4, batchMax)
		if fill != nil {
			limit = max(limit, fillRows(r.want))
		}
		for !r.full() {
			args := pgx.NamedArgs{"only_submission": id, "after_chunk": after, "limit": limit}
			for k, v := range fargs {
				args[k] = v
			}
			leadEnd := int32(-1)
			n, batch, err := r.fetch(ctx, query, args, func(c candidate) bool {
				after = c.key.ChunkIndex
				if lead && r.taken(c) {
					leadRun++
					leadEnd = c.key.ChunkIndex
				} else {
					lead = false
				}
				return true
			})
			if err != nil {
				return fmt.Errorf("submission %d: %w", id, err)
			}
			if leadRun >= hintMinRun && leadEnd >= 0 {
				r.p.hints.set(hk, strategy.Position{SubmissionID: id, ChunkIndex: leadEnd})
			}
			left, err := r.takeBatch(ctx, batch, f)
			if err != nil {
				return err
			}
			rest = append(rest, left...)
			if n < limit {
				break // this submission is read to its end
			}
			limit = min(limit*2, batchMax)
		}
		if r.full() {
			if len(r.out) < r.want {
				r.exhaustive = false
			}
			return nil
		}
	}
	return nil
}

// randomWindow is how many shards one random scan reads at a time: any shards will do for
// random, and each shard in a query costs a partition index scan.
const randomWindow = 8

// leaf takes what it may of a leaf's buffer (buffer.go), then streams the leaf's candidates
// and takes what it may; the scan of a buffered leaf reads more rows than it needs, and
// leaves those it did not take in a new buffer. Random reads the shards a window at a
// time, in random order; the ordered leaves read all shards in one merged order.
func (r *run) leaf(ctx context.Context, kind strategy.Kind, f frame) error {
	var fill *bufferFill
	if buffered(f) {
		fill = &bufferFill{key: hintKey(kind, f.filters, r.shards), era: r.p.buffers.era(kind)}
		if err := r.takeBuffered(ctx, fill.key, f); err != nil || r.full() {
			return err
		}
	}
	if kind != strategy.Random || len(r.shards) <= randomWindow {
		return r.scanShards(ctx, kind, f, r.shards, fill)
	}
	shards := append([]int32(nil), r.shards...)
	rand.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
	for i := 0; i < len(shards) && !r.full(); i += randomWindow {
		if err := r.scanShards(ctx, kind, f, shards[i:min(i+randomWindow, len(shards))], fill); err != nil {
			return err
		}
	}
	return nil
}

// bufferFill is the buffer a leaf's scan fills: its key, and the era of its kind
// (buffers.era) from before the scan.
type bufferFill struct {
	key string
	era uint64
}

// takeBuffered takes what it may of the candidates in key's buffer, each checked as a
// scanned one (fetch, then takeBatch): read under the generation the run holds its shard
// under, not reserved, not tombstoned. Those it did not look at go back to the buffer.
func (r *run) takeBuffered(ctx context.Context, key string, f frame) error {
	for !r.answerFull() {
		buf, cands := r.p.buffers.take(key, r.want-len(r.out)+4)
		if buf == nil {
			return nil
		}
		r.held = append(r.held, buf.epoch) // until the run ends: the candidates were read under it
		free := cands[:0]
		for _, c := range cands {
			if buf.generation[c.shard] == r.generation[c.shard] && !r.taken(c) {
				free = append(free, c)
			}
		}
		rest, err := r.takeBatch(ctx, free, f)
		r.p.buffers.putBack(buf, rest)
		if err != nil {
			return err
		}
	}
	return nil
}

// scanShards streams a leaf's candidates over shards, batch by batch, and takes what it
// may, until the request is full or the order is read to its end. With fill, its first
// batch asks for fillRows rows at least, it reads on past what the answers took until it
// has read fillRows more rows, and the free rows it did not take become fill's buffer.
func (r *run) scanShards(ctx context.Context, kind strategy.Kind, f frame, shards []int32, fill *bufferFill) error {
	query, fargs := strategy.CandidateQuery(kind, f.filters, shards)
	s := strategy.NewCursor(kind)
	var hk string
	if kind != strategy.Random {
		if fill != nil {
			hk = fill.key // the same key: an ordered leaf scans all the run's shards at once
		} else {
			hk = hintKey(kind, f.filters, shards)
		}
		if p, ok := r.p.hints.get(hk); ok {
			s.ResumeAt(p)
		}
	}
	limit := min(r.want-len(r.out)+4, batchMax)
	if fill != nil {
		limit = max(limit, fillRows(r.want))
	}
	lead, leadRun := true, 0 // the run of reserved chunks the scan starts with
	var leadEnd strategy.Position
	var rest []candidate // fill: the free rows read and not taken, in order
	extra := 0           // fill: the rows read once the answers were full
	for {
		full := r.full()
		if full {
			r.exhaustive = false
			more := fillRows(r.want)
			if fill == nil || extra >= more || len(rest) >= more || r.scanned >= scanRowsMax {
				break
			}
			limit = more - extra
		}
		args := s.Args(limit)
		for k, v := range fargs {
			args[k] = v
		}
		n, batch, err := r.fetch(ctx, query, args, func(c candidate) bool {
			if s.PassedResume(c.position()) {
				return false // wrapped around to where the scan began
			}
			s.Saw(c.position(), c.order)
			if r.taken(c) {
				if lead && !s.Wrapped() {
					leadRun++
					leadEnd = c.position()
				}
			} else {
				lead = false
			}
			return true
		})
		if err != nil {
			return err
		}
		if leadRun >= hintMinRun {
			r.p.hints.set(hk, leadEnd)
		}
		if full {
			extra += n
			rest = append(rest, batch...)
		} else {
			left, err := r.takeBatch(ctx, batch, f)
			if err != nil {
				return err
			}
			rest = append(rest, left...) // some only once the answers are full
		}
		if s.Done() || (n < limit && !s.Exhausted()) {
			break // read to the end of its order
		}
		limit = min(limit*2, batchMax)
	}
	if fill != nil && len(rest) > 0 {
		r.p.buffers.install(fill.key, kind, rest, r.generation, r.epoch, fill.era)
	}
	return nil
}

// fetch runs one candidate query and returns how many rows it read and those that are
// free (neither reserved nor tombstoned). seen is called with every row first; a row it
// returns false for is left out.
func (r *run) fetch(ctx context.Context, query string, args pgx.NamedArgs, seen func(candidate) bool) (int, []candidate, error) {
	var batch []candidate
	n := 0
	err := opsqsql.New(r.p.scans).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(row opsqsql.CandidatesStreamRow) error {
		n++
		c := candidateOf(row)
		c.inputBytes = jsonStringLen(c.input)
		if seen(c) && !r.taken(c) {
			batch = append(batch, c)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	r.scanned += n
	return n, batch, nil
}

// taken reports whether c is reserved here, or finished or retried since a running scan
// may have read it as it was.
func (r *run) taken(c candidate) bool {
	return r.p.reserver.IsReserved(c.key) || r.p.tombs.stale(c.key, c.attempt)
}

// takeBatch looks up the batch's submissions and takes its candidates in order. It returns
// the candidates it did not look at, once the answers were full.
func (r *run) takeBatch(ctx context.Context, batch []candidate, f frame) ([]candidate, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	infos, err := r.p.infos.get(ctx, batch)
	if err != nil {
		return nil, err
	}
	for i, c := range batch {
		if r.answerFull() {
			return batch[i:], nil
		}
		if c.info = infos[c.key.SubmissionID]; c.info == nil {
			continue // the submission finished since the scan
		}
		if ask, _ := r.filling(); ask.confined() && !slices.Contains(ask.Tenants, c.info.tenant) {
			continue // never: the scans filter by tenant; a second lock on the door
		}
		if f.deferred != nil && r.saturated(c, f.distinct) {
			// Keep the key, not the input: up to scanRowsMax rows may be deferred.
			c.input = nil
			*f.deferred = append(*f.deferred, c)
			r.exhaustive = false
			continue
		}
		if !r.room(c.inputBytes + c.info.bytes) {
			r.exhaustive = false
			return batch[i:], nil // c too is left: it did not fit
		}
		if ok, err := r.take(ctx, c, f); err != nil {
			return nil, err
		} else if !ok {
			r.exhaustive = false
		}
	}
	return nil, nil
}

// saturated reports whether a prefer_distinct rule counts max or more chunks of c's value
// in flight here.
func (r *run) saturated(c candidate, rules []rule) bool {
	for _, ru := range rules {
		if v, ok := c.info.values[ru.key]; ok && r.p.reserver.InflightValue(ru.key, v) >= ru.max {
			return true
		}
	}
	return false
}

// take reserves one candidate: in the reserver, then the global slots of max_simultaneous,
// then the tokens of rate_limit. It reports false when the candidate could not be taken.
func (r *run) take(ctx context.Context, c candidate, f frame) (bool, error) {
	size := c.inputBytes + c.info.bytes
	if !r.room(size) {
		return false, nil // every answer is as large as it may be
	}
	if r.valueFull(c, f.limits) || r.p.throttled(c) || fairPasses(c, f) {
		return false, nil
	}
	if len(f.rates) > 0 && r.p.rates.empty(c.info.values, f.rates) {
		// Its bucket was found empty a moment ago: passed over before it is reserved, so
		// that it costs no publication of its shard's in-flight count, nor a hold.
		return false, nil
	}
	ask, _ := r.filling()
	gen := r.generation[c.shard]
	tok := tokens.New(c.key, c.shard, gen, c.attempt).Signed(r.p.cfg.Keys).String()
	if !r.p.reserver.Reserve(reserver.Reservation{
		Token: tok, Key: c.key, Shard: c.shard, Generation: gen, Retries: c.attempt,
		Consumer: ask.Consumer, ReservedAt: r.reserved, ExpiresAt: r.expires, Values: c.info.values, Pairs: c.info.pairs,
	}) {
		return false, nil // another request took it meanwhile
	}
	if r.p.tombs.stale(c.key, c.attempt) {
		r.p.reserver.Release(tok) // finished or retried since the scan read it
		return false, nil
	}
	if l, ok := r.p.cfg.Claims.Lease(c.shard); !ok || l.Generation != gen || l.Draining {
		r.p.reserver.Release(tok) // the shard was lost meanwhile: not ours to hand out
		return false, nil
	}
	if err := r.p.cfg.Claims.Publish(ctx, c.shard, gen); err != nil {
		if errors.Is(err, claims.ErrShardLost) {
			r.p.reserver.Release(tok) // not ours to hand out
			return false, nil
		}
		// Its in-flight count may read 0: not safe to hand out. Given back like a failed
		// reserve's chunks: a waiter that saw it reserved may have parked.
		r.p.GiveBack([]Chunk{{Token: tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex}})
		return false, err
	}
	if len(f.limits) > 0 {
		refused, err := r.p.holds.take(ctx, tok, c, gen, f.limits)
		if err != nil {
			r.p.GiveBack([]Chunk{{Token: tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex}})
			return false, err
		}
		if refused != nil {
			r.p.reserver.Release(tok)
			if r.fullValues == nil {
				r.fullValues = map[valuePair]bool{}
			}
			r.fullValues[valuePair{refused.key, c.info.values[refused.key]}] = true
			return false, nil
		}
	}
	if len(f.rates) > 0 {
		// Last, once nothing else may refuse the chunk: a token is handed out as soon as
		// it is taken (rates.go says why that matters).
		refused, _, err := r.p.rates.take(ctx, c.info.values, f.rates)
		if err != nil {
			r.p.GiveBack([]Chunk{{Token: tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex}})
			return false, err
		}
		if refused != nil {
			r.p.reserver.Release(tok)
			if len(f.limits) > 0 {
				r.p.holds.release(ctx, []string{tok})
			}
			return false, nil
		}
	}
	ch := Chunk{
		Token: tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex,
		Prefix: c.info.prefix, Metadata: c.info.metadata, StrategicMetadata: c.info.strategic,
		StrategicValues: c.info.decoded, Retries: c.retries, ExpiresAt: r.expires,
		Traceparent: c.info.traceparent,
	}
	if c.info.prefix == nil {
		ch.Input = c.input
	}
	r.out = append(r.out, ch)
	r.bytes += size
	for _, s := range f.fairs {
		s.add(c.info.values)
	}
	r.p.countValues(c, f.counted)
	if _, held := r.filling(); held >= ask.Max {
		r.next()
	}
	r.p.reserved.Add(1)
	return true, nil
}

// throttled reports whether a consumer's throttle keeps c back (DESIGN.md §3): under every
// strategy, like a max_simultaneous of 0 for its value.
func (p *Path) throttled(c candidate) bool {
	return p.cfg.Throttles != nil && p.cfg.Throttles.Blocks(c.info.values, c.info.tenant)
}

// countValues counts a chunk handed out, per value of the keys counted (those of the
// rate_limit and weighted_fair nodes above it) and of the keys throttled, each key once.
func (p *Path) countValues(c candidate, counted []string) {
	vr := p.cfg.ValueRates
	if vr == nil {
		return
	}
	for _, key := range counted {
		if v, ok := c.info.values[key]; ok {
			vr.Add(key, v)
		}
	}
	if p.cfg.Throttles == nil {
		return
	}
	for _, key := range p.cfg.Throttles.Keys() {
		if v, ok := c.info.values[key]; ok && !slices.Contains(counted, key) {
			vr.Add(key, v)
		}
	}
}

// valueFull reports whether a max_simultaneous value of c was refused a slot earlier in
// this request. The memory is bounded by the candidates a request reads (scanRowsMax).
func (r *run) valueFull(c candidate, limits []rule) bool {
	if len(r.fullValues) == 0 {
		return false
	}
	for _, l := range limits {
		if v, ok := c.info.values[l.key]; ok && r.fullValues[valuePair{l.key, v}] {
			return true
		}
	}
	return false
}

// reread reads the inputs of the deferred chunks taken into r.out[from:], whose deferred
// copies dropped them. A chunk that is gone since the scan (finished) is given back.
func (r *run) reread(ctx context.Context, from int) error {
	var chunks []opsqsql.Chunk
	for _, ch := range r.out[from:] {
		if ch.Prefix == nil {
			shard := submissions.ShardOf(ch.SubmissionID, int(ch.ChunkIndex), r.p.shardCount)
			chunks = append(chunks, opsqsql.Chunk{Shard: shard, SubmissionID: ch.SubmissionID, ChunkIndex: ch.ChunkIndex})
		}
	}
	if len(chunks) == 0 {
		return nil
	}
	inputs := make(map[reserver.Key][]byte, len(chunks))
	err := opsqsql.New(r.p.cfg.Pool).ChunkInputs(ctx, opsqsql.ChunkInputsParams{Chunks: chunks}, func(c opsqsql.ChunkInputsRow) error {
		inputs[reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex}] = append([]byte{}, c.Input...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading deferred inputs: %w", err)
	}
	kept := r.out[:from]
	var gone []Chunk
	for _, ch := range r.out[from:] {
		if ch.Prefix == nil {
			in, ok := inputs[reserver.Key{SubmissionID: ch.SubmissionID, ChunkIndex: ch.ChunkIndex}]
			if !ok {
				gone = append(gone, ch)
				continue
			}
			ch.Input = in
		}
		kept = append(kept, ch)
	}
	r.out = kept
	if len(gone) > 0 {
		r.p.GiveBack(gone)
	}
	return nil
}

// GiveBack releases chunks reserved by a request that then failed (or whose consumer went
// away before the answer was written), and announces them like
// new work: a reserve that looked while they were reserved may have found nothing and
// parked, here or on another instance (which forwards here), and nothing else would wake it.
func (p *Path) GiveBack(out []Chunk) {
	if len(out) == 0 {
		return
	}
	tokens := make([]string, len(out))
	shards := make([]int, len(out))
	freed := make([]notify.Freed, len(out))
	for i, c := range out {
		tokens[i] = c.Token
		shards[i] = submissions.ShardOf(c.SubmissionID, int(c.ChunkIndex), p.shardCount)
		freed[i] = notify.Freed{Key: reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex},
			Shard: shards[i], Retries: notify.NotRetried, Token: c.Token}
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoNotifyTimeout)
	defer cancel()
	p.holds.release(ctx, tokens)
	p.cfg.Bus.Raise(notify.ChunksFreed{Chunks: freed}) // the waiters here at once; the NOTIFY wakes those elsewhere
	if err := notify.SendWork(ctx, p.cfg.Pool, shards); err != nil {
		p.cfg.Log.Warn("announcing chunks given back", slog.Int("chunks", len(out)), slog.Any("error", err))
	}
}

// undoNotifyTimeout bounds the statements of a GiveBack, which runs whether or not the
// request that reserved is still there.
const undoNotifyTimeout = 5 * time.Second
