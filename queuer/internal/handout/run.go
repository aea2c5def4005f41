package handout

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
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
	// chunks (a chunk from another instance has its own): read-only.
	StrategicValues map[string]opsqtype.MetadataValue
	Retries         int32
	ExpiresAt       time.Time
	// Traceparent is the W3C traceparent its submission was sent with; "" for none.
	Traceparent string
}

// key is the chunk's key in the reserver.
func (ch Chunk) key() reserver.Key {
	return reserver.Key{SubmissionID: ch.SubmissionID, ChunkIndex: ch.ChunkIndex}
}

// Bounds of one reserve request.
const (
	// scanRowsMax bounds the rows one request reads past chunks it cannot take (reserved
	// already, saturated, over a limit), so that no backlog can make a reserve slow.
	scanRowsMax = 20_000
	batchMax    = 1_000
)

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
		shards[i] = p.shardOf(c)
		freed[i] = notify.Freed{Key: c.key(), Shard: shards[i], Retries: notify.NotRetried, Token: c.Token}
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoNotifyTimeout)
	defer cancel()
	p.holds.release(ctx, tokens)
	p.cfg.Bus.Raise(notify.ChunksFreed{Chunks: freed}) // the waiters here at once; the NOTIFY wakes those elsewhere
	if err := notify.SendWork(ctx, opsqsql.New(p.cfg.Pool), shards); err != nil {
		p.cfg.Log.Warn("announcing chunks given back", slog.Int("chunks", len(out)), slog.Any("error", err))
	}
}

// shardOf is the shard that holds ch.
func (p *Path) shardOf(ch Chunk) int {
	return opsqtype.ShardOf(ch.SubmissionID, int(ch.ChunkIndex), p.shardCount)
}

// undoNotifyTimeout bounds the statements of a GiveBack, which runs whether or not the
// request that reserved is still there.
const undoNotifyTimeout = 5 * time.Second
