package queuer

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"opsq/api/wire"
	"opsq/claims"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/strategy"
)

// PreviewChunk is a chunk that a reserve would hand out (Preview).
type PreviewChunk struct {
	SubmissionID      int64
	ChunkIndex        int32
	Shard             int
	StrategicMetadata json.RawMessage
	// StrategicValues is StrategicMetadata decoded; read-only, shared by the submission's
	// chunks.
	StrategicValues map[string]wire.MetadataValue
}

// Preview returns the chunks a reserve of req would hand out now, in order, reserving
// nothing: the strategy tree walked as a reserve walks it, each leaf the same candidate
// query (strategy.CandidateQuery), but over every enabled shard of the cluster rather than
// this instance's own (a reserve forwards to the owners of the others). Chunks reserved on
// this instance are left out; those reserved on other instances cannot be told apart and
// are shown. prefer_distinct and max_simultaneous count the chunks of the preview itself
// and this instance's reservations. It reads at most as many rows as a reserve does.
func (q *Queuer) Preview(ctx context.Context, req ReserveRequest) ([]PreviewChunk, error) {
	cl, err := claims.LoadCluster(ctx, q.pool)
	if err != nil {
		return nil, err
	}
	disabled := make(map[int]bool, len(cl.Disabled))
	for _, s := range cl.Disabled {
		disabled[s] = true
	}
	p := &preview{q: q, max: max(req.Max, 1), seen: map[reserver.Key]bool{}, counts: map[valuePair]int{}}
	for s := range q.shardCount {
		if !disabled[s] {
			p.shards = append(p.shards, int32(s))
		}
	}
	if len(p.shards) == 0 {
		return []PreviewChunk{}, nil
	}
	if err := p.node(ctx, req.Strategy, frame{}); err != nil {
		return nil, err
	}
	if p.out == nil {
		p.out = []PreviewChunk{}
	}
	return p.out, nil
}

// preview is one Preview: a run that takes nothing.
type preview struct {
	q       *Queuer
	max     int
	shards  []int32
	out     []PreviewChunk
	seen    map[reserver.Key]bool
	counts  map[valuePair]int // chunks of the preview per strategic value
	scanned int
}

func (p *preview) full() bool { return len(p.out) >= p.max || p.scanned >= scanRowsMax }

func (p *preview) node(ctx context.Context, n strategy.Node, f frame) error {
	switch n.Kind {
	case strategy.OrElse:
		if err := p.node(ctx, *n.First, f); err != nil || p.full() {
			return err
		}
		return p.node(ctx, *n.Fallback, f)
	case strategy.SelectOnly:
		f.filters = append(append([]strategy.Filter(nil), f.filters...), n.Filter())
		return p.node(ctx, *n.Then, f)
	case strategy.MaxSimultaneous:
		f.limits = append(append([]rule(nil), f.limits...), rule{n.Key, n.Max})
		return p.node(ctx, *n.Then, f)
	case strategy.PreferDistinct:
		var deferred []candidate
		f.distinct = append(append([]rule(nil), f.distinct...), rule{n.Key, n.Max})
		f.deferred = &deferred
		if err := p.node(ctx, *n.Then, f); err != nil {
			return err
		}
		f.distinct, f.deferred = f.distinct[:len(f.distinct)-1], nil
		for _, c := range deferred {
			if len(p.out) >= p.max {
				break
			}
			p.take(c, f)
		}
		return nil
	default:
		return p.leaf(ctx, n.Kind, f)
	}
}

// leaf reads a leaf's candidates in its order, batch by batch, like run.scanShards.
func (p *preview) leaf(ctx context.Context, kind strategy.Kind, f frame) error {
	query, fargs := strategy.CandidateQuery(kind, f.filters, p.shards)
	cur := strategy.NewCursor(kind)
	limit := min(p.max+4, batchMax)
	for !p.full() {
		args := pgx.NamedArgs(cur.Args(limit))
		for k, v := range fargs {
			args[k] = v
		}
		var batch []candidate
		n := 0
		err := opsqsql.New(p.q.scans).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args}, func(row opsqsql.CandidatesStreamRow) error {
			n++
			c := candidateOf(row)
			cur.Saw(c.position(), c.order)
			if !p.seen[c.key] && !p.q.reserver.IsReserved(c.key) && !p.q.tombs.has(c.key) {
				c.input = nil
				batch = append(batch, c)
			}
			return nil
		})
		if err != nil {
			return err
		}
		p.scanned += n
		if len(batch) > 0 {
			infos, err := p.q.infos.get(ctx, batch)
			if err != nil {
				return err
			}
			for _, c := range batch {
				if len(p.out) >= p.max {
					return nil
				}
				if c.info = infos[c.key.SubmissionID]; c.info == nil {
					continue
				}
				if f.deferred != nil && p.over(c, f.distinct) {
					*f.deferred = append(*f.deferred, c)
					continue
				}
				p.take(c, f)
			}
		}
		if n < limit && !cur.Exhausted() {
			return nil // read to the end of its order
		}
		limit = min(limit*2, batchMax)
	}
	return nil
}

// over reports whether a rule counts max or more chunks of c's value: in the preview and
// reserved on this instance.
func (p *preview) over(c candidate, rules []rule) bool {
	for _, ru := range rules {
		if v, ok := c.info.values[ru.key]; ok && p.counts[valuePair{ru.key, v}]+p.q.reserver.InflightValue(ru.key, v) >= ru.max {
			return true
		}
	}
	return false
}

// take adds c to the preview unless a max_simultaneous rule is full for one of its values.
func (p *preview) take(c candidate, f frame) {
	if p.seen[c.key] || p.over(c, f.limits) {
		return
	}
	p.seen[c.key] = true
	for k, v := range c.info.values {
		p.counts[valuePair{k, v}]++
	}
	p.out = append(p.out, PreviewChunk{
		SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex, Shard: c.shard,
		StrategicMetadata: c.info.strategic, StrategicValues: c.info.decoded,
	})
}
