package handout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"opsq/queuer/opsqtype"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/strategy"
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
	// inputBytes is what input takes in an answer (opsqtype.JSONStringLen), kept when a deferred
	// copy drops the input.
	inputBytes int
	order      int             // random_order
	negPrio    int64           // custom_priority: the negated priority
	row        opsqsql.RowAddr // where its row was read, for its reservation (reserver.Reservation.Row)
	info       *submissionInfo
}

// candidateOf is the candidate of a row of a candidate query.
func candidateOf(r opsqsql.CandidatesStreamRow) candidate {
	return candidate{
		key: reserver.Key{SubmissionID: r.SubmissionID, ChunkIndex: r.ChunkIndex}, shard: r.Shard,
		retries: r.Retries, attempt: r.AttemptBase + r.Retries, input: r.Input, order: r.RandomOrder, negPrio: r.NegPriority,
		row: r.Row,
	}
}

// position is where c is in its leaf's order.
func (c candidate) position() strategy.Position {
	return strategy.Position{Priority: c.negPrio, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex}
}

// selectOnly scans a rare value's submissions one by one (submissions), and nothing at all
// for a value no submission in progress has. Over a then that is not a leaf, it hands the
// rare value's few submissions down (frame.only), for the leaves to read them alone; under
// another select_only's few submissions, it reads those of both.
func (r *run) selectOnly(ctx context.Context, filter strategy.Filter, then strategy.Node, f frame) (bool, []int64, error) {
	ids, err := r.p.matching(ctx, filter)
	if err != nil || len(ids) == 0 {
		return true, nil, err // nothing in progress has that value: nothing to scan for
	}
	if len(ids) > fewSubmissions {
		return false, nil, nil // many: the leaves filter (under f.only, if any)
	}
	if f.only != nil {
		ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !slices.Contains(f.only, id) })
		if len(ids) == 0 {
			return true, nil, nil
		}
	}
	if then.Kind.Leaf() {
		return true, nil, r.submissions(ctx, then.Kind, ids, f)
	}
	return false, ids, nil
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
// random, and each shard in a query costs an index scan of its own.
const randomWindow = 8

// leaf takes what it may of a leaf's buffer (buffer.go), then streams the leaf's candidates
// and takes what it may; the scan of a buffered leaf reads more rows than it needs, and
// leaves those it did not take in a new buffer. Random reads the shards a window at a
// time, in random order; the ordered leaves read all shards in one merged order.
func (r *run) leaf(ctx context.Context, kind strategy.Kind, f frame) error {
	if f.only != nil {
		return r.submissions(ctx, kind, f.only, f) // a rare value's few submissions, above
	}
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
// batch asks for fillRows rows more than the answers want, and the free rows of the
// batch that fills the answers that they did not take become fill's buffer. (It used to
// ask for fillRows rows, then read on for fillRows more once the answers were full: two
// queries a scan, and up to twice what a buffer keeps; the rows cut off were read again
// by later scans, a quarter of the rows read in a burn-down, docs/capacity.md.)
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
		limit = min(limit+fillRows(r.want), batchMax)
	}
	lead, leadRun := true, 0 // the run of reserved chunks the scan starts with
	var leadEnd strategy.Position
	var rest []candidate // fill: the free rows read and not taken, in order
	for !r.full() {
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
		left, err := r.takeBatch(ctx, batch, f)
		if err != nil {
			return err
		}
		rest = left // those the answers, once full, did not look at
		if s.Done() || (n < limit && !s.Exhausted()) {
			break // read to the end of its order
		}
		limit = min(limit*2, batchMax)
	}
	if r.full() {
		r.exhaustive = false
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
	err := opsqsql.New(r.p.scans).CandidatesStream(ctx, opsqsql.CandidatesStreamParams{Query: query, Args: args, Local: r.p.cfg.ScanNode != ""}, func(row opsqsql.CandidatesStreamRow) error {
		n++
		c := candidateOf(row)
		c.inputBytes = opsqtype.JSONStringLen(c.input)
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
