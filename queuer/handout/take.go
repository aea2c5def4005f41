package handout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"opsq/claims"
	"opsq/queuer/submissions"
	"opsq/queuer/tokens"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

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
	tok := tokens.New(c.key, c.shard, gen, c.retries).Signed(r.p.cfg.Keys).String()
	if !r.p.reserver.Reserve(reserver.Reservation{
		Token: tok, Key: c.key, Shard: c.shard, Generation: gen, Retries: c.retries,
		Consumer: ask.Consumer, ReservedAt: r.reserved, ExpiresAt: r.expires, Values: c.info.values, Pairs: c.info.pairs,
	}) {
		return false, nil // another request took it meanwhile
	}
	if r.p.tombs.stale(c.key, c.retries) {
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
