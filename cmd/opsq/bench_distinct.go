package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/client"
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

//go:embed bench_distinct_cancel.sql
var distinctCancelSQL string

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
		groupDigits(b.n), groupDigits(b.values), distinctKey, formatDuration(took))

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
	req := client.ReserveRequest{Max: 1, Strategy: distinctStrategy, Lease: "5m", Consumer: "bench-distinct"}
	reserves, _, err := r.timeReserves(ctx, c, req, "distinct", func(ch client.ReservedChunk) {
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

	r.line.show("distinct: completing the held reservations")
	notCompleted, err := held.release(ctx, c)
	if err != nil {
		return err
	}
	if notCompleted > 0 {
		r.broke("distinct: %d of the %d held reservations answered other than %q on complete (lease %s, none expired)",
			notCompleted, r.cfg.distinctHeld, client.StatusCompleted, distinctHeldLease)
	}
	r.line.show("distinct: cancelling the submissions")
	cancelled = true
	if err := r.cancelDistinct(ctx, b); err != nil {
		return err
	}

	st := summarize(reserves)
	at := fmt.Sprintf("%s submissions, %d held, ", groupDigits(b.n), r.cfg.distinctHeld)
	p50 := measured("distinct.reserve_p50", at+"reserve p50", inMillis(st.P50), unitMillis).want("<=", distinctP50TargetMs)
	if b.n != benchDistinctSubmissionsDefault {
		p50 = p50.note("the target is for %s submissions", groupDigits(benchDistinctSubmissionsDefault))
	}
	unsaturated := b.values - int64(heldValues)
	r.report.add(
		p50,
		measured("distinct.reserve_p90", at+"reserve p90", inMillis(st.P90), unitMillis),
		measured("distinct.reserve_p99", at+"reserve p99", inMillis(st.P99), unitMillis),
		measured("distinct.reserve_max", at+"reserve max", inMillis(st.Max), unitMillis),
		measured("distinct.saturated", "timed reserves that gave a saturated value", float64(saturated), unitCount).want("==", 0).
			note("of %d, with %s of %s values (about %s chunks) unsaturated; a random pick would give about %d",
				st.N, groupDigits(unsaturated), groupDigits(b.values), groupDigits(unsaturated*b.n/b.values),
				randomSaturatedHits(st.N, heldValues, b.values)),
		measured("distinct.held_values", fmt.Sprintf("values saturated by the %d held reservations", r.cfg.distinctHeld),
			float64(heldValues), unitCount).note("prefer_distinct, max %d: one value each; held through instance 0, like every reserve", distinctMax),
	)
	if foreign > 0 {
		r.report.add(measured("distinct.other_chunks", "timed reserves that gave a chunk of another submission", float64(foreign), unitCount).
			note("left over from earlier workloads"))
	}
	r.say("distinct: reserve p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples); %d gave a saturated value; %d held over %d values",
		inMillis(st.P50), inMillis(st.P90), inMillis(st.P99), inMillis(st.Max), st.N, saturated, r.cfg.distinctHeld, heldValues)
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

// insertDistinct inserts the workload's submissions and wakes the instances, and returns
// them and how long the insert took.
//
// It bypasses the API: 200 000 submissions posted one by one are 200 000 transactions,
// minutes of setup for a workload that measures reserves, not inserts. So it writes, in
// one transaction with COPY, the rows queuer.Submit would write for each (its submission,
// its strategic metadata and its chunk, with the same shard and random_order), then sends
// the NOTIFY that Submit sends, once for all.
func (r *benchRun) insertDistinct(ctx context.Context) (distinctBacklog, time.Duration, error) {
	b := distinctBacklog{first: distinctFirstID, n: r.cfg.distinctSubmissions, values: r.cfg.distinctValues}
	conn, err := r.connectScratch(ctx)
	if err != nil {
		return b, 0, err
	}
	defer conn.Close(context.Background())

	var copied atomic.Int64
	start := time.Now()
	stop := r.showProgress(func() string {
		return fmt.Sprintf("distinct: inserting %s submissions with COPY: %d%%", groupDigits(b.n), percent(copied.Load(), 3*b.n))
	})
	defer stop()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT value::int FROM opsq.settings WHERE key = 'shard_count'").Scan(&b.shards); err != nil {
			return fmt.Errorf("reading shard_count: %w", err)
		}
		if b.shards != r.env.shardCount {
			return fmt.Errorf("shard_count is %d in opsq.settings but %d in /v1/cluster", b.shards, r.env.shardCount)
		}
		for _, t := range []struct {
			table   string
			columns []string
			row     func(i int64) []any
		}{
			{"submissions", []string{"id", "chunks_total", "max_retries", "strategic_metadata"}, b.submissionRow},
			{"strategic_metadata", []string{"key", "value", "submission_id"}, b.metadataRow},
			{"chunks", []string{"submission_id", "chunk_index", "shard", "random_order", "input"}, b.chunkRow},
		} {
			n, err := tx.CopyFrom(ctx, pgx.Identifier{"opsq", t.table}, t.columns, pgx.CopyFromSlice(int(b.n), func(i int) ([]any, error) {
				copied.Add(1)
				return t.row(int64(i)), nil
			}))
			if err != nil {
				return fmt.Errorf("copying into opsq.%s: %w", t.table, err)
			}
			if n != b.n {
				return fmt.Errorf("copying into opsq.%s: %d rows copied; want %d", t.table, n, b.n)
			}
		}
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, 'all')", queuer.ChannelWork); err != nil {
			return fmt.Errorf("notifying the instances: %w", err)
		}
		return nil
	})
	if err != nil {
		return b, 0, fmt.Errorf("inserting %s submissions: %w", groupDigits(b.n), err)
	}
	return b, time.Since(start), nil
}

// cancelDistinct cancels the workload's submissions that are still in progress and deletes
// their chunks, in one statement rather than one DELETE request each. It sends no NOTIFY:
// none of their chunks is reserved any more, so the instances have nothing to drop, and
// the submission infos they cached only take room until their cache is next cleared.
func (r *benchRun) cancelDistinct(ctx context.Context, b distinctBacklog) error {
	ctx, cancel := context.WithTimeout(ctx, benchDatabaseTimeout)
	defer cancel()
	conn, err := r.connectScratch(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, distinctCancelSQL, pgx.NamedArgs{"first": b.first, "last": b.first + b.n - 1}); err != nil {
		return fmt.Errorf("cancelling the %s submissions: %w", groupDigits(b.n), err)
	}
	return nil
}

// connectScratch opens a connection to the scratch database.
func (r *benchRun) connectScratch(ctx context.Context) (*pgx.Conn, error) {
	url, err := scratchURL(r.env.adminURL, r.env.dbName)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to the scratch database %s: %w", r.env.dbName, err)
	}
	return conn, nil
}

// holdDistinct reserves --distinct-held chunks with distinctStrategy through c, and keeps
// them in h.
func (r *benchRun) holdDistinct(ctx context.Context, c *client.Client, h *distinctHeld) error {
	want := r.cfg.distinctHeld
	var n atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("distinct: %d / %d reservations held", n.Load(), want)
	})
	defer stop()
	for len(h.tokens) < want {
		req := client.ReserveRequest{Max: min(distinctHoldBatch, want-len(h.tokens)), Strategy: distinctStrategy,
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
// first, first+1, …; submission i has company_id i % values. Its methods return the rows
// of submission i, as COPY takes them.
type distinctBacklog struct {
	first, n, values int64
	shards           int
}

func (b distinctBacklog) id(i int64) int64    { return b.first + i }
func (b distinctBacklog) value(i int64) int64 { return i % b.values }

// submissionRow is the row of opsq.submissions: id, chunks_total, max_retries,
// strategic_metadata.
func (b distinctBacklog) submissionRow(i int64) []any {
	metadata := json.RawMessage(`{"` + distinctKey + `": ` + strconv.FormatInt(b.value(i), 10) + `}`)
	return []any{b.id(i), int32(1), int32(distinctMaxRetries), metadata}
}

// metadataRow is the row of opsq.strategic_metadata: key, value, submission_id.
func (b distinctBacklog) metadataRow(i int64) []any {
	return []any{distinctKey, json.RawMessage(strconv.FormatInt(b.value(i), 10)), b.id(i)}
}

// chunkRow is the row of opsq.chunks: submission_id, chunk_index, shard, random_order,
// input.
func (b distinctBacklog) chunkRow(i int64) []any {
	id := b.id(i)
	input := strconv.AppendInt([]byte("distinct operation "), i, 10)
	return []any{id, int32(0), int32(queuer.ShardOf(id, 0, b.shards)), int32(queuer.RandomOrder(id, 0, b.shards)),
		append(input, " of the opsq bench"...)}
}

// holds reports whether ch is the chunk of one of the submissions.
func (b distinctBacklog) holds(ch client.ReservedChunk) bool {
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
func (h *distinctHeld) add(ch client.ReservedChunk) {
	h.tokens = append(h.tokens, ch.Token)
	if v, ok := ch.StrategicMetadata[distinctKey]; ok {
		h.byValue[v.String()]++
	}
}

// saturated reports whether ch's value has distinctMax or more reservations held.
func (h *distinctHeld) saturated(ch client.ReservedChunk) bool {
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
		completions := make([]client.Completion, len(batch))
		for i, tok := range batch {
			completions[i] = client.Completion{Token: tok, Output: "ok"}
		}
		results, err := c.Complete(ctx, completions...)
		if err != nil {
			return notCompleted, fmt.Errorf("completing the held chunks: %w", err)
		}
		for _, res := range results {
			if res.Status != client.StatusCompleted {
				notCompleted++
			}
		}
		h.tokens = h.tokens[len(batch):]
	}
	clear(h.byValue)
	return notCompleted, nil
}
