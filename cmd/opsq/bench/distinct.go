package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
	"opsq/queuer"
)

// The distinct workload of "opsq bench": the reserve latency of prefer_distinct, DESIGN.md
// §6: "PreferDistinct with 200 000 single-chunk submissions: p50 reserve ≤ 5 ms".

const (
	// distinctKey is the strategic metadata key the submissions carry and the strategy
	// prefers distinct values of.
	distinctKey = "company_id"
	// distinctMax is prefer_distinct's max: one chunk in flight saturates a value.
	distinctMax = 1
	// distinctFirstID is the id of the first submission; the others follow it. The
	// instances' snowflake ids are milliseconds since queuer.IDEpoch shifted left by 22
	// bits: 2^40 is 262 s after that epoch (2024-01-01), long before any instance ran, so
	// no id an instance makes can fall among the workload's.
	distinctFirstID int64 = 1 << 40
	// distinctMaxRetries is the max_retries of the submissions: the default_max_retries
	// setting's default.
	distinctMaxRetries = 10
	// distinctHoldBatch is how many chunks each reserve of the held ones asks for.
	distinctHoldBatch = 100
	// distinctHeldLease is the lease of the held reservations: longer than any run.
	distinctHeldLease = "1h"
	// distinctCompleteBatch is how many held reservations one complete request gives back.
	distinctCompleteBatch = 1000
)

// distinctStrategy is the strategy of every reserve of the workload.
var distinctStrategy = json.RawMessage(`{"prefer_distinct": {"key": "company_id", "max": 1, "then": "random"}}`)

// distinct inserts --distinct-submissions single-chunk submissions (untimed), holds
// --distinct-held reservations taken with prefer_distinct, so that as many values are
// saturated, then times --samples reserves of one chunk with the same strategy, as the
// latency workload does, each followed by an untimed complete. It then completes the held
// reservations and cancels the submissions, so that later workloads find neither. Every
// reserve goes through instance 0: an instance counts the chunks in flight of its own
// reservations only, so held reservations saturate their values on the instance that holds
// them.
func (r *benchRun) distinct(ctx context.Context) error {
	c := r.env.clients[0]
	b, took, err := r.insertDistinct(ctx)
	if err != nil {
		return err
	}
	cancelled := false
	defer func() {
		if !cancelled {
			_ = r.cancelDistinct(context.WithoutCancel(ctx), b) // the database is dropped anyway
		}
	}()
	r.say("distinct: inserted %s single-chunk submissions over %s values of %s in %s (COPY into the scratch database)",
		progress.GroupDigits(b.n), progress.GroupDigits(b.values), distinctKey, progress.Duration(took))

	held := newDistinctHeld()
	defer func() {
		// Even after Ctrl-C: a reservation left would hold up the instances' shutdown.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchDatabaseTimeout)
		defer cancel()
		_, _ = held.release(ctx, c)
	}()
	if err := r.holdDistinct(ctx, c, held); err != nil {
		return err
	}
	heldValues := held.values()

	var saturated, foreign int
	req := wire.ReserveRequest{Max: 1, Strategy: distinctStrategy, Lease: "5m", Consumer: "bench-distinct"}
	reserves, _, err := r.timeReserves(ctx, c, req, r.cfg.Samples, "distinct", func(ch wire.ReservedChunk) {
		switch {
		case !b.holds(ch):
			foreign++
		case held.saturated(ch):
			saturated++
		}
	})
	if err != nil {
		return err
	}

	r.line.Show("distinct: completing the held reservations")
	notCompleted, err := held.release(ctx, c)
	if err != nil {
		return err
	}
	if notCompleted > 0 {
		r.broke("distinct: %d of the %d held reservations answered other than %q on complete (lease %s, none expired)",
			notCompleted, r.cfg.DistinctHeld, wire.StatusCompleted, distinctHeldLease)
	}
	r.line.Show("distinct: cancelling the submissions")
	cancelled = true
	if err := r.cancelDistinct(ctx, b); err != nil {
		return err
	}

	st := summarize(reserves)
	at := fmt.Sprintf("%s submissions, %d held, ", progress.GroupDigits(b.n), r.cfg.DistinctHeld)
	p50 := measured("distinct.reserve_p50", at+"reserve p50", inMillis(st.P50), unitMillis).want("<=", distinctP50TargetMs)
	if b.n != DistinctSubmissionsDefault {
		p50 = p50.note("the target is for %s submissions", progress.GroupDigits(DistinctSubmissionsDefault))
	}
	unsaturated := b.values - int64(heldValues)
	r.report.add(
		p50,
		measured("distinct.reserve_p90", at+"reserve p90", inMillis(st.P90), unitMillis),
		measured("distinct.reserve_p99", at+"reserve p99", inMillis(st.P99), unitMillis),
		measured("distinct.reserve_max", at+"reserve max", inMillis(st.Max), unitMillis),
		measured("distinct.saturated", "timed reserves that gave a saturated value", float64(saturated), unitCount).want("==", 0).
			note("of %d, with %s of %s values (about %s chunks) unsaturated; a random pick would give about %d",
				st.N, progress.GroupDigits(unsaturated), progress.GroupDigits(b.values), progress.GroupDigits(unsaturated*b.n/b.values),
				randomSaturatedHits(st.N, heldValues, b.values)),
		measured("distinct.held_values", fmt.Sprintf("values saturated by the %d held reservations", r.cfg.DistinctHeld),
			float64(heldValues), unitCount).note("prefer_distinct, max %d: one value each; held through instance 0, like every reserve", distinctMax),
	)
	if foreign > 0 {
		r.report.add(measured("distinct.other_chunks", "timed reserves that gave a chunk of another submission", float64(foreign), unitCount).
			note("left over from earlier workloads"))
	}
	r.say("distinct: reserve p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples); %d gave a saturated value; %d held over %d values",
		inMillis(st.P50), inMillis(st.P90), inMillis(st.P99), inMillis(st.Max), st.N, saturated, r.cfg.DistinctHeld, heldValues)
	return nil
}

// randomSaturatedHits is about how many of n reserves would give a saturated value if they
// picked chunks at random: saturated of values values, each with as many chunks.
func randomSaturatedHits(n, saturated int, values int64) int {
	if values == 0 {
		return 0
	}
	return int(float64(n)*float64(saturated)/float64(values) + 0.5)
}

// insertDistinct inserts the workload's submissions, and returns them and how long the
// insert took.
//
// It bypasses the API: 200 000 submissions posted one by one are 200 000 transactions,
// minutes of setup for a workload that measures reserves, not inserts. So it has the
// engine insert them in bulk (queuer.SubmitMany: in one transaction with COPY, the rows
// Submit would write for each, then one NOTIFY for all).
func (r *benchRun) insertDistinct(ctx context.Context) (distinctBacklog, time.Duration, error) {
	b := distinctBacklog{first: distinctFirstID, n: r.cfg.DistinctSubmissions, values: r.cfg.DistinctValues}
	var copied atomic.Int64
	start := time.Now()
	stop := r.showProgress(func() string {
		return fmt.Sprintf("distinct: inserting %s submissions with COPY: %d%%", progress.GroupDigits(b.n), progress.Percent(copied.Load(), 3*b.n))
	})
	defer stop()
	if err := queuer.SubmitMany(ctx, r.env.pool, b.n, b.submission, copied.Store); err != nil {
		return b, 0, fmt.Errorf("inserting %s submissions: %w", progress.GroupDigits(b.n), err)
	}
	return b, time.Since(start), nil
}

// cancelDistinct cancels the workload's submissions that are still in progress, with the
// engine's cancel (queuer.CancelMany: many per transaction rather than one DELETE request
// each).
func (r *benchRun) cancelDistinct(ctx context.Context, b distinctBacklog) error {
	ids := make([]int64, b.n)
	for i := range ids {
		ids[i] = b.id(int64(i))
	}
	var done atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("distinct: cancelling the submissions: %d%%", progress.Percent(done.Load(), b.n))
	})
	defer stop()
	if _, err := queuer.CancelMany(ctx, r.env.pool, ids, func(n int) { done.Store(int64(n)) }); err != nil {
		return fmt.Errorf("cancelling the %s submissions: %w", progress.GroupDigits(b.n), err)
	}
	return nil
}

// holdDistinct reserves --distinct-held chunks with distinctStrategy through c, and keeps
// them in h.
func (r *benchRun) holdDistinct(ctx context.Context, c *client.Client, h *distinctHeld) error {
	want := r.cfg.DistinctHeld
	var n atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("distinct: %d / %d reservations held", n.Load(), want)
	})
	defer stop()
	for len(h.tokens) < want {
		req := wire.ReserveRequest{Max: min(distinctHoldBatch, want-len(h.tokens)), Strategy: distinctStrategy,
			Lease: distinctHeldLease, Consumer: "bench-distinct-held"}
		chunks, err := c.Reserve(ctx, req)
		if err != nil {
			return fmt.Errorf("reserving the chunks to hold: %w", err)
		}
		if len(chunks) == 0 {
			return fmt.Errorf("a reserve gave no chunk with %d of %d held; want some (the backlog is not empty)", len(h.tokens), want)
		}
		for _, ch := range chunks {
			h.add(ch)
		}
		n.Store(int64(len(h.tokens)))
	}
	return nil
}

// distinctBacklog is the workload's submissions: n single-chunk submissions with ids
// first, first+1, …; submission i has company_id i % values.
type distinctBacklog struct {
	first, n, values int64
}

func (b distinctBacklog) id(i int64) int64    { return b.first + i }
func (b distinctBacklog) value(i int64) int64 { return i % b.values }

// submission is submission i, as the engine's bulk insert takes it.
func (b distinctBacklog) submission(i int64) queuer.SmallSubmission {
	retries := distinctMaxRetries
	input := strconv.AppendInt([]byte("distinct operation "), i, 10)
	return queuer.SmallSubmission{
		ID:                b.id(i),
		StrategicMetadata: json.RawMessage(`{"` + distinctKey + `": ` + strconv.FormatInt(b.value(i), 10) + `}`),
		MaxRetries:        &retries,
		Chunks:            [][]byte{append(input, " of the opsq bench"...)},
	}
}

// holds reports whether ch is the chunk of one of the submissions.
func (b distinctBacklog) holds(ch wire.ReservedChunk) bool {
	id, err := strconv.ParseInt(ch.SubmissionID, 10, 64)
	return err == nil && id >= b.first && id < b.first+b.n && ch.ChunkIndex == 0
}

// distinctHeld is the reservations the workload holds, and how many of them each value
// of distinctKey has. It is not safe for concurrent use.
type distinctHeld struct {
	tokens  []string
	byValue map[string]int // the value as JSON, such as 17
}

func newDistinctHeld() *distinctHeld {
	return &distinctHeld{byValue: map[string]int{}}
}

// add records a held reservation.
func (h *distinctHeld) add(ch wire.ReservedChunk) {
	h.tokens = append(h.tokens, ch.Token)
	if v, ok := ch.StrategicMetadata[distinctKey]; ok {
		h.byValue[v.String()]++
	}
}

// saturated reports whether ch's value has distinctMax or more reservations held.
func (h *distinctHeld) saturated(ch wire.ReservedChunk) bool {
	v, ok := ch.StrategicMetadata[distinctKey]
	return ok && h.byValue[v.String()] >= distinctMax
}

// values returns how many values the held reservations have.
func (h *distinctHeld) values() int { return len(h.byValue) }

// release completes the held reservations, and returns how many of them were answered
// other than "completed". The ones it gave back are no longer held, even on error.
func (h *distinctHeld) release(ctx context.Context, c *client.Client) (notCompleted int, err error) {
	for len(h.tokens) > 0 {
		batch := h.tokens[:min(len(h.tokens), distinctCompleteBatch)]
		completions := make([]wire.Completion, len(batch))
		for i, tok := range batch {
			completions[i] = wire.Completion{Token: tok, Output: "ok"}
		}
		results, err := c.Complete(ctx, completions...)
		if err != nil {
			return notCompleted, fmt.Errorf("completing the held chunks: %w", err)
		}
		for _, res := range results {
			if res.Status != wire.StatusCompleted {
				notCompleted++
			}
		}
		h.tokens = h.tokens[len(batch):]
	}
	clear(h.byValue)
	return notCompleted, nil
}
