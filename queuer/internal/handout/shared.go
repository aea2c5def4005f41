package handout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/panics"
)

// Reserves that look for work here at the same moment, with the same strategy and lease,
// share one run of the strategy (one scan), whose chunks are dealt out in the order the
// reserves came. A run per strategy and lease is under way at a time; the reserves that
// come while it runs wait for the next one, which serves them all, up to batchMax chunks
// (a reserve that asks for more runs alone). So 10 000 parked consumers woken by 10 000
// new chunks cost about ten scans, not 10 000 (DESIGN.md §6), and a lone consumer's
// reserve runs at once, as before.

// RunTimeoutDefault bounds one shared run (Config.RunTimeout). It is not tied to any one
// reserve: each of them stops waiting when its own context ends, and the chunks it would
// have had are given back.
const RunTimeoutDefault = 10 * time.Second

// ErrRunTimeout is the error of the reserves of a shared run that ran out of its bound
// (Config.RunTimeout) before its candidate reads ended: the database is slow, or the
// strategy reads far. It is the database's state, not a fault of the request: the API
// answers it 503 with Retry-After.
var ErrRunTimeout = errors.New("the reserve's run read candidates for longer than its bound")

// shared is the runs under way, by strategy and lease. Safe for concurrent use.
type shared struct {
	mu     sync.Mutex
	groups map[shareKey]*shareGroup
}

// shareKey is what reserves sharing a run have in common.
type shareKey struct {
	strategy string
	lease    time.Duration
	tenants  string // the request's Tenants; "" for all
}

// shareGroup is the reserves waiting for the next run of one strategy and lease. A group
// exists while its goroutine runs.
type shareGroup struct {
	queue []*ask
}

// ask is one reserve waiting for a shared run.
type ask struct {
	req    Request
	state  atomic.Int32   // askWaiting, then askAnswered or askLeft, whichever comes first
	answer chan askAnswer // holds the answer once askAnswered
}

const (
	askWaiting int32 = iota
	askAnswered
	askLeft // its reserve ended: chunks taken for it are given back
)

type askAnswer struct {
	chunks []Chunk
	err    error
}

func newShared() *shared { return &shared{groups: map[shareKey]*shareGroup{}} }

// Reserve reserves from this instance's shards for req, in the next shared run of its
// strategy and lease. It neither forwards nor waits: it answers [] when the shards have
// nothing for req.
func (p *Path) Reserve(ctx context.Context, req Request) ([]Chunk, error) {
	a := &ask{req: req, answer: make(chan askAnswer, 1)}
	k := shareKey{strategy: req.Strategy.String(), lease: req.Lease}
	if req.confined() {
		k.tenants = "|" + strings.Join(req.Tenants, ",") // "|": a list of none is not all
	}
	s := p.shared
	s.mu.Lock()
	g, running := s.groups[k]
	if !running {
		g = &shareGroup{}
		s.groups[k] = g
	}
	g.queue = append(g.queue, a)
	s.mu.Unlock()
	if !running {
		go p.serveShared(k, g)
	}
	select {
	case ans := <-a.answer:
		return ans.chunks, ans.err
	case <-ctx.Done():
		if !a.state.CompareAndSwap(askWaiting, askLeft) {
			p.GiveBack((<-a.answer).chunks) // answered meanwhile: nobody will read it
		}
		return nil, ctx.Err()
	}
}

// serveShared runs the strategy of k for the reserves queued in g, a batch after another,
// until none is left.
func (p *Path) serveShared(k shareKey, g *shareGroup) {
	for {
		asks := p.shared.take(k, g)
		if len(asks) == 0 {
			return
		}
		reqs := make([]Request, len(asks))
		for i, a := range asks {
			reqs[i] = a.req
		}
		bound := cmp.Or(p.cfg.RunTimeout, RunTimeoutDefault)
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		var out [][]Chunk
		// A panic in the strategy's walk ends this run with an error for its reserves
		// (500 each), not the instance.
		err := panics.Run(ctx, p.cfg.Log, "shared reserve run", func() (err error) {
			out, err = p.reserveFor(ctx, reqs)
			return err
		})
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%s): %w", ErrRunTimeout, bound, err)
		}
		cancel()
		var back []Chunk
		for i, a := range asks {
			ans := askAnswer{err: err}
			if err == nil {
				ans.chunks = out[i]
			}
			if a.state.CompareAndSwap(askWaiting, askAnswered) {
				a.answer <- ans
			} else {
				back = append(back, ans.chunks...)
			}
		}
		p.GiveBack(back)
	}
}

// take dequeues the next batch of g: the reserves still waiting, in order, as many as ask
// for batchMax chunks together, and at least one. With none left it removes g.
func (s *shared) take(k shareKey, g *shareGroup) []*ask {
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []*ask
	want, i := 0, 0
	for ; i < len(g.queue); i++ {
		a := g.queue[i]
		if a.state.Load() != askWaiting {
			continue // gone before its run
		}
		if len(batch) > 0 && want+a.req.Max > batchMax {
			break
		}
		batch = append(batch, a)
		want += a.req.Max
	}
	rest := copy(g.queue, g.queue[i:])
	clear(g.queue[rest:])
	g.queue = g.queue[:rest]
	if len(batch) == 0 {
		delete(s.groups, k)
	}
	return batch
}
