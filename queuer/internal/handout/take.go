package handout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"opsq/claims"
	"opsq/queuer/internal/tokens"
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

// The take: a candidate the scan found free is handed out once it passes every admission
// check, in the order below; the first check that refuses it ends its take, and one undo
// gives back what the checks before took (the check that refused is the reason). The
// checks that take nothing come first, so that a candidate passed over costs neither a
// reservation nor a statement. Then the reservation in memory makes it this run's against every other
// request here, and what must still hold once it is ours is checked: not finished since
// the scan, the shard still ours, then the database: the shard's in-flight count, the
// max_simultaneous slots, and last the rate_limit tokens, since a token is spent as soon
// as it is taken (rates.go says why that matters).

// admission is one check of a take, in the order a take runs them.
type admission uint8

const (
	// Before the reservation: a refusal has nothing to give back.

	admitRoom     admission = iota // a request has room for it (run.room)
	admitValue                     // no max_simultaneous value of it was refused a slot earlier in the run
	admitThrottle                  // no consumer's throttle keeps it back
	admitFairTurn                  // no weighted_fair others' turn passes over it
	admitRateSeen                  // no rate_limit bucket of its values was found empty a moment ago
	admitReserve                   // reserved in memory: refused when another request took it meanwhile

	// After the reservation: a refusal releases it; a failure gives it back.

	admitFresh   // neither finished nor retried since the scan read it (tombstones)
	admitLease   // its shard is still held under the run's generation, and not draining
	admitPublish // the shard's in-flight count published: refused when the shard was lost
	admitSlots   // a max_simultaneous slot of each limited value (holds)
	admitTokens  // a rate_limit token of each limited value (rates)

	admissions // how many checks there are
)

// taking is a candidate on its way through a take's admission checks: what the checks
// work out, and what the undo gives back.
type taking struct {
	c    candidate
	size int    // what it takes in an answer (run.room)
	gen  int64  // the generation the run holds its shard under; set by admitReserve
	tok  string // its signed token; set by admitReserve
}

// take hands out candidate c if every admission check admits it, in order. It reports
// false when one refused it, and the error when one failed; either way after undo gave
// back what the checks before took.
func (r *run) take(ctx context.Context, c candidate, f frame) (bool, error) {
	t := taking{c: c, size: c.inputBytes + c.info.bytes}
	for a := range admissions {
		if ok, err := r.admit(ctx, a, &t, &f); !ok || err != nil {
			r.undo(ctx, &t, a, f.limits, err)
			return false, err
		}
	}
	r.handOut(&t, f)
	return true, nil
}

// admit runs check a of t's take: it reports whether t passes it, or the error that
// fails the take.
func (r *run) admit(ctx context.Context, a admission, t *taking, f *frame) (bool, error) {
	c := &t.c
	switch a {
	case admitRoom:
		return r.room(t.size), nil // false: every answer is as large as it may be
	case admitValue:
		return !r.valueFull(*c, f.limits), nil
	case admitThrottle:
		return !r.p.throttled(*c), nil
	case admitFairTurn:
		return !fairPasses(*c, *f), nil
	case admitRateSeen:
		// Its bucket found empty, it is passed over before it is reserved, so that it costs
		// no publication of its shard's in-flight count, nor a hold.
		return len(f.rates) == 0 || !r.p.rates.empty(c.info.values, f.rates), nil
	case admitReserve:
		return r.reserve(t), nil
	case admitFresh:
		return !r.p.tombs.stale(c.key, c.attempt), nil
	case admitLease:
		l, ok := r.p.cfg.Claims.Lease(c.shard)
		return ok && l.Generation == t.gen && !l.Draining, nil // else not ours to hand out
	case admitPublish:
		return r.publish(ctx, t)
	case admitSlots:
		return r.holdSlots(ctx, t, f.limits)
	case admitTokens:
		return r.takeTokens(ctx, t, f.rates)
	}
	panic("handout: no admission check of that number")
}

// undo gives back what the checks before a took for t, which a refused (err nil) or
// failed: nothing before the reservation. Refused after it, t's reservation is released,
// and its max_simultaneous slots too once they were taken. Failed after it (a statement
// failed), its chunk is given back like a failed reserve's chunks: its in-flight count may
// read 0, so it is not safe to hand out, and a waiter that saw it reserved may have parked.
func (r *run) undo(ctx context.Context, t *taking, a admission, limits []rule, err error) {
	switch {
	case a <= admitReserve:
		// Nothing was taken yet: a refused reservation holds nothing.
	case err != nil:
		r.p.GiveBack([]Chunk{{Token: t.tok, SubmissionID: t.c.key.SubmissionID, ChunkIndex: t.c.key.ChunkIndex}})
	default:
		r.p.reserver.Release(t.tok)
		if a > admitSlots && len(limits) > 0 {
			r.p.holds.release(ctx, []string{t.tok})
		}
	}
}

// reserve reserves t in the reserver, for the request being filled, under a token signed
// for the generation the run holds its shard under. It reports false when another request
// took it meanwhile.
func (r *run) reserve(t *taking) bool {
	c := &t.c
	ask, _ := r.filling()
	t.gen = r.generation[c.shard]
	t.tok = tokens.New(c.key, c.shard, t.gen, c.attempt).Signed(r.p.cfg.Keys).String()
	return r.p.reserver.Reserve(reserver.Reservation{
		Token: t.tok, Key: c.key, Shard: c.shard, Generation: t.gen, Retries: c.attempt, Row: uint64(c.row),
		Consumer: ask.Consumer, ReservedAt: r.reserved, ExpiresAt: r.expires, Values: c.info.values, Pairs: c.info.pairs,
	})
}

// publish publishes the in-flight count of t's shard (claims). It reports false when the
// shard was lost meanwhile: not ours to hand out.
func (r *run) publish(ctx context.Context, t *taking) (bool, error) {
	err := r.p.cfg.Claims.Publish(ctx, t.c.shard, t.gen)
	if errors.Is(err, claims.ErrShardLost) {
		return false, nil
	}
	return err == nil, err
}

// holdSlots takes a global max_simultaneous slot of every limited value of t (holds). It
// reports false when a value had none left: that value is full for the rest of the run
// (valueFull).
func (r *run) holdSlots(ctx context.Context, t *taking, limits []rule) (bool, error) {
	if len(limits) == 0 {
		return true, nil
	}
	refused, err := r.p.holds.take(ctx, t.tok, t.c, t.gen, limits)
	if err != nil || refused == nil {
		return err == nil, err
	}
	if r.fullValues == nil {
		r.fullValues = map[valuePair]bool{}
	}
	r.fullValues[valuePair{refused.key, t.c.info.values[refused.key]}] = true
	return false, nil
}

// takeTokens takes a rate_limit token of every limited value of t (rates), all or none. It
// reports false when a bucket had none left.
func (r *run) takeTokens(ctx context.Context, t *taking, rules []rateRule) (bool, error) {
	if len(rules) == 0 {
		return true, nil
	}
	refused, _, err := r.p.rates.take(ctx, t.c.info.values, rules)
	return err == nil && refused == nil, err
}

// handOut adds t's chunk to the answer of the request being filled, moving on to the
// next request once it has its Max, and counts it.
func (r *run) handOut(t *taking, f frame) {
	c := &t.c
	ch := Chunk{
		Token: t.tok, SubmissionID: c.key.SubmissionID, ChunkIndex: c.key.ChunkIndex,
		Prefix: c.info.prefix, Metadata: c.info.metadata, StrategicMetadata: c.info.strategic,
		StrategicValues: c.info.decoded, Retries: c.retries, ExpiresAt: r.expires,
		Traceparent: c.info.traceparent,
	}
	if c.info.prefix == nil {
		ch.Input = c.input
	}
	r.out = append(r.out, ch)
	r.bytes += t.size
	for _, s := range f.fairs {
		s.add(c.info.values)
	}
	r.p.countValues(*c, f.counted)
	if ask, held := r.filling(); held >= ask.Max {
		r.next()
	}
	r.p.reserved.Add(1)
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
			chunks = append(chunks, opsqsql.Chunk{Shard: r.p.shardOf(ch), SubmissionID: ch.SubmissionID, ChunkIndex: ch.ChunkIndex})
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
			in, ok := inputs[ch.key()]
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
