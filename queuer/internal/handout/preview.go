package handout

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"opsq/claims"
	"opsq/queuer/opsqtype"
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
	StrategicValues map[string]opsqtype.MetadataValue
}

// Preview returns the chunks a reserve of req would hand out now, in order, reserving
// nothing: the strategy tree walked as a reserve walks it (walk), each leaf the same candidate
// query (strategy.CandidateQuery), but over every enabled shard of the cluster rather than
// this instance's own (a reserve forwards to the owners of the others). Chunks reserved on
// this instance are left out; those reserved on other instances cannot be told apart and
// are shown. prefer_distinct and max_simultaneous count the chunks of the preview itself
// and this instance's reservations. It reads at most as many rows as a reserve does.
func (p *Path) Preview(ctx context.Context, req Request) ([]PreviewChunk, error) {
	cl, err := claims.LoadCluster(ctx, p.cfg.Pool)
	if err != nil {
		return nil, err
	}
	disabled := make(map[int]bool, len(cl.Disabled))
	for _, s := range cl.Disabled {
		disabled[s] = true
	}
	pv := &preview{p: p, max: max(req.Max, 1), seen: map[reserver.Key]bool{}, counts: map[valuePair]int{}}
	for s := range p.shardCount {
		if !disabled[s] {
			pv.shards = append(pv.shards, int32(s))
		}
	}
	if len(pv.shards) == 0 {
		return []PreviewChunk{}, nil
	}
	if err := walkTenants(ctx, pv, req.Strategy, req.Tenants); err != nil {
		return nil, err
	}
	if pv.out == nil {
		pv.out = []PreviewChunk{}
	}
	return pv.out, nil
}

// preview is one Preview: a run that takes nothing.
type preview struct {
	p       *Path
	max     int
	shards  []int32
	out     []PreviewChunk
	seen    map[reserver.Key]bool
	counts  map[valuePair]int // chunks of the preview per strategic value
	scanned int
	turnCap
	fairs map[string]*drr // copies of the instance's weighted_fair rings
}

func (p *preview) full() bool {
	return len(p.out) >= p.max || p.reached(len(p.out)) || p.scanned >= scanRowsMax
}

func (p *preview) scanBound() bool {
	return p.scanned >= scanRowsMax && len(p.out) < p.max && !p.reached(len(p.out))
}

func (p *preview) count() int { return len(p.out) }

func (p *preview) space() int { return p.turnRoom(p.max, len(p.out)) }

func (p *preview) partial() {}

// fairState is a copy of the instance's ring, kept for the preview: a preview shows the
// turns a reserve would give, and moves nothing.
func (p *preview) fairState(n strategy.Node) *drr {
	k := n.String()
	if d, ok := p.fairs[k]; ok {
		return d
	}
	if p.fairs == nil {
		p.fairs = map[string]*drr{}
	}
	d := p.p.fair.of(n).clone()
	p.fairs[k] = d
	return d
}

var _ walker = (*preview)(nil)

// selectOnly has the leaves filter: a preview reads over every shard, and takes nothing.
func (p *preview) selectOnly(context.Context, strategy.Filter, strategy.Node, frame) (bool, []int64, error) {
	return false, nil, nil
}

// others has the others' turn read then as it is: a preview reads over every shard, and
// takes nothing.
func (p *preview) others(context.Context, string, []string, strategy.Node, frame) (bool, error) {
	return false, nil
}

// tenants previews nothing for tenants with nothing in progress; else the leaves filter.
func (p *preview) tenants(ctx context.Context, tenants []string, _ strategy.Node, _ frame) (bool, error) {
	subs, err := p.p.tenantSubmissions(ctx, tenants)
	return err != nil || len(subs.ids) == 0, err
}

// deferred lists prefer_distinct's saturated candidates after all.
func (p *preview) deferred(_ context.Context, cands []candidate, f frame) error {
	for _, c := range cands {
		if p.full() {
			break
		}
		p.take(c, f)
	}
	return nil
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
		err := opsqsql.New(p.p.scans).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args, Local: p.p.cfg.ScanNode != ""}, func(row opsqsql.CandidatesStreamRow) error {
			n++
			c := candidateOf(row)
			cur.Saw(c.position(), c.order)
			if !p.seen[c.key] && !p.p.reserver.IsReserved(c.key) && !p.p.tombs.has(c.key) {
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
			infos, err := p.p.infos.get(ctx, batch)
			if err != nil {
				return err
			}
			for _, c := range batch {
				if p.full() {
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
		if v, ok := c.info.values[ru.key]; ok && p.counts[valuePair{ru.key, v}]+p.p.reserver.InflightValue(ru.key, v) >= ru.max {
			return true
		}
	}
	return false
}

// take adds c to the preview unless a max_simultaneous rule is full for one of its values,
// a throttle keeps it back, or a rate_limit bucket of one of its values was empty at this
// instance's last look (a preview takes no token: it may show more than a reserve takes).
func (p *preview) take(c candidate, f frame) {
	if p.seen[c.key] || p.over(c, f.limits) || p.p.throttled(c) || p.p.rates.empty(c.info.values, f.rates) || fairPasses(c, f) {
		return
	}
	p.seen[c.key] = true
	for _, s := range f.fairs {
		s.add(c.info.values)
	}
	for k, v := range c.info.values {
		p.counts[valuePair{k, v}]++
	}
	p.out = append(p.out, PreviewChunk{
		SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex, Shard: c.shard,
		StrategicMetadata: c.info.strategic, StrategicValues: c.info.decoded,
	})
}
