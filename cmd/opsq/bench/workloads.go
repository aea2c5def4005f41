package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
	"opsq/strategy"
)

// The workloads of "opsq bench", one method of benchRun each, and what they share.

// Targets of DESIGN.md §6.
const (
	ingestTargetChunks  = 1_000_000
	ingestTargetSeconds = 5
	latencyP50TargetMs  = 1
	latencyP99TargetMs  = 5
	latencyGrowthTarget = 2 // the larger backlog's percentiles over the smaller one's
	rssTargetMB         = 300
	burndownAim         = 1.5 // times River's rate
	riverCPUTarget      = 0.5 // opsq's PostgreSQL CPU per chunk over River's per job, at most
	riverWALTarget      = 0.2 // opsq's WAL per chunk over River's per job, at most
	distinctP50TargetMs = 5   // prefer_distinct, 200 000 single-chunk submissions
)

// randomStrategy is the JSON form of the random strategy.
var randomStrategy = json.RawMessage(`"random"`)

// burndownStallTimeout: a burn-down in which no chunk is completed for this long has lost
// chunks, or a server is stuck.
const burndownStallTimeout = 60 * time.Second

// ingest times one NDJSON submission of --ingest-chunks chunks, then cancels it so that
// it is not in the next workloads' backlog.
func (r *benchRun) ingest(ctx context.Context) error {
	n := r.cfg.IngestChunks
	created, took, err := r.submit(ctx, r.env.clients[0], n, "ingest")
	if err != nil {
		return err
	}
	defer r.discard(ctx, created.ID)
	secs := measured("ingest.seconds", progress.GroupDigits(n)+" chunks, one NDJSON submission", took.Seconds(), unitSeconds)
	if n == ingestTargetChunks {
		secs = secs.want("<=", ingestTargetSeconds)
	} else {
		secs = secs.note("the target, ≤ %d s, is for %s chunks", ingestTargetSeconds, progress.GroupDigits(ingestTargetChunks))
	}
	// Below the design's size, the request's fixed costs weigh on the rate: no target.
	rateRow := measured("ingest.rate", "rate", perSecond(n, took), unitRate)
	if n >= ingestTargetChunks {
		rateRow = rateRow.want(">=", ingestTargetChunks/ingestTargetSeconds).note("%s chunks in %d s", progress.GroupDigits(ingestTargetChunks), ingestTargetSeconds)
	}
	r.report.add(secs, rateRow)
	r.say("ingest: %s", progress.Submitted(n, took))

	r.line.Show("ingest: cancelling the submission")
	took, err = r.cancel(ctx, created.ID)
	if err != nil {
		return err
	}
	r.report.add(measured("ingest.cancel_seconds", "cancel the submission", took.Seconds(), unitSeconds).
		note("deletes its %s chunks; no target", progress.GroupDigits(n)))
	r.say("ingest: cancelled the submission in %s", progress.Duration(took))
	return nil
}

// burndown inserts --burndown-chunks chunks (untimed), then --consumers consumers reserve
// and complete them until the submission is completed.
func (r *benchRun) burndown(ctx context.Context) error {
	n := r.cfg.BurndownChunks
	var river *riverResult
	if r.cfg.River {
		res, err := r.river(ctx, n)
		if err != nil {
			return fmt.Errorf("River: %w", err)
		}
		river = &res
	}
	created, _, err := r.submit(ctx, r.env.clients[0], n, "burndown backlog")
	if err != nil {
		return err
	}
	defer r.discard(ctx, created.ID)
	statements, why := r.env.statementsSource(ctx)
	if err := clustertest.SleepCtx(ctx, statsFlushWait); err != nil { // the submission's counts flushed
		return err
	}
	countsBefore, countsErr := r.env.sampleCounts(ctx, statements)
	before, err := r.env.cost.sample(ctx)
	if err != nil {
		return err
	}
	b, err := r.burnDown(ctx, "burndown", created.ID, n, 0)
	if err != nil {
		return err
	}
	took := b.end.Sub(b.start)
	spent, err := r.env.cost.since(ctx, before)
	if err != nil {
		return err
	}
	countsAfter := countsBefore
	if countsErr == nil {
		countsAfter, countsErr = r.env.sampleCounts(ctx, statements) // the instances' CPU now, as the server's
		if err := clustertest.SleepCtx(ctx, statsFlushWait); err != nil {
			return err
		}
		if flushed, err := r.env.sampleCounts(ctx, statements); err == nil { // the counts once flushed
			countsAfter.stmts, countsAfter.xacts = flushed.stmts, flushed.xacts
		}
	}
	twice, err := r.checkBurnDown(ctx, b)
	if err != nil {
		return err
	}

	rateRow := measured("burndown.rate", fmt.Sprintf("%s chunks, %d consumers, max %d", progress.GroupDigits(n), r.cfg.Consumers, r.cfg.Max),
		perSecond(n, took), unitRate)
	switch {
	case river != nil:
		rateRow = rateRow.want(">=", river.JobsPerSecond).note("River's burn-down in this run (--river); the aim is %s chunks/s",
			progress.GroupDigits(int64(river.JobsPerSecond*burndownAim)))
	case r.cfg.RiverRate > 0:
		rateRow = rateRow.want(">=", r.cfg.RiverRate).note("River's bench (--river-rate); the aim is %s chunks/s",
			progress.GroupDigits(int64(r.cfg.RiverRate*burndownAim)))
	default:
		rateRow = rateRow.note("target: River's bench burn-down on the same PostgreSQL (measure it with --river); aim 1.5×")
	}
	cpuRow, walRow := r.costRows("burndown.pg_cpu_per_chunk", "burndown.wal_per_chunk", "chunk", spent, n)
	r.report.add(rateRow, cpuRow, walRow,
		measured("burndown.seconds", "seconds, first reserve to submission completed", took.Seconds(), unitSeconds),
		measured("burndown.handed_out_twice", "chunks handed out twice", float64(twice), unitCount).want("==", 0))
	if countsErr != nil {
		r.report.add(unavailable("burndown.instance_cpu_per_chunk", "opsq instances' CPU per chunk", unitMicros, countsErr.Error()))
	} else {
		r.report.add(instanceCostRows("burndown", countsBefore, countsAfter, n, nil, why)...)
	}
	if f := b.foreign.Load(); f > 0 {
		r.report.add(measured("burndown.other_chunks", "chunks of other submissions", float64(f), unitCount).note("left over from earlier workloads"))
	}
	if river != nil {
		r.report.add(river.rows(perSecond(n, took), n, spent)...)
	}
	cpu, wal := spent.perItem(n)
	r.say("burndown: %s chunks in %s (%s chunks/s), %d handed out twice; PostgreSQL %s, %.0f bytes of WAL per chunk", progress.GroupDigits(n), progress.Duration(took),
		progress.GroupDigits(progress.RoundSignificant(perSecond(n, took), 3)), twice, r.describeCPU(cpu, "chunk"), wal)
	return nil
}

// burnDown runs --consumers consumers, consumer i talking to instance i % --instances,
// that reserve (--max at a time) and finish the chunks of submission id, its n chunks
// inserted already, until every one is finished; label names it in the progress and in
// what broke. A consumer fails (retry true) failRate of its attempts at the submission's
// chunks, at random, and completes the rest; 0: it completes every one. checkBurnDown
// then checks the outcome.
func (r *benchRun) burnDown(ctx context.Context, label, id string, n int64, failRate float64) (*burndown, error) {
	// runCtx ends the burn-down: its consumers stop asking once it ends. Their requests run
	// on reqCtx, which ends only when the burn-down failed: once every chunk is finished,
	// each consumer finishes the request it is in (a reserve waits at most 1 s) rather than
	// walk away from it, so that no reserve of this burn-down is still waiting when the next
	// submission arrives: a reserve abandoned mid-wait could take that submission's chunks
	// and hold them until their lease ran out (seen under load; the server's side of it is
	// not understood yet).
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	reqCtx, cancelRequests := context.WithCancel(ctx)
	defer cancelRequests()
	context.AfterFunc(runCtx, func() {
		if !errors.Is(context.Cause(runCtx), errBurndownDone) {
			cancelRequests()
		}
	})
	b := &burndown{label: label, id: id, total: n, failRate: failRate, deliveries: make([]atomic.Int32, n), finish: cancel}
	if failRate > 0 {
		b.releases = make([]atomic.Int32, n)
	}
	b.start = time.Now()
	var wg sync.WaitGroup
	for i := range r.cfg.Consumers {
		c := r.env.clients[i%len(r.env.clients)]
		wg.Go(func() {
			if err := b.consume(runCtx, reqCtx, c, r.cfg.Max, fmt.Sprintf("bench-consumer-%d", i)); err != nil {
				cancel(err)
			}
		})
	}
	wg.Go(func() { b.watch(runCtx) })
	stop := r.showProgress(b.describe)
	wg.Wait()
	stop()
	if cause := context.Cause(runCtx); !errors.Is(cause, errBurndownDone) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w; %s", cause, r.whereChunksAre(ctx, id))
	}
	return b, nil
}

// whereChunksAre says where the unfinished chunks of submission id are, and who holds
// their shards: what a stalled burn-down's error needs to tell a lost chunk from an
// unserved shard.
func (r *benchRun) whereChunksAre(ctx context.Context, id string) string {
	rows, err := r.env.pool.Query(ctx, `
SELECT 'pending' AS t, c.shard, count(*), coalesce(sc.claimant, '-'), sc.generation, sc.inflight, sc.disabled,
       coalesce(round(extract(epoch FROM sc.soft_expires_at - now()))::text, '-')
FROM opsq.chunks c LEFT JOIN opsq.shard_claims sc ON sc.shard = c.shard
WHERE c.submission_id = $1::bigint GROUP BY c.shard, sc.claimant, sc.generation, sc.inflight, sc.disabled, sc.soft_expires_at
UNION ALL
SELECT 'waiting', w.shard, count(*), '-', 0, 0, false, '-' FROM opsq.chunks_waiting w WHERE w.submission_id = $1::bigint GROUP BY w.shard
ORDER BY 1, 2`, id)
	if err != nil {
		return "where the chunks are: " + err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var t, claimant, soft string
		var shard, n, gen, inflight int64
		var disabled bool
		if err := rows.Scan(&t, &shard, &n, &claimant, &gen, &inflight, &disabled, &soft); err != nil {
			return "where the chunks are: " + err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s %d on shard %d (claimant %s, generation %d, %d reserved, disabled %v, soft expiry in %ss)",
			t, n, shard, claimant, gen, inflight, disabled, soft))
	}
	return "unfinished chunks: " + strings.Join(parts, "; ")
}

// checkBurnDown checks what a finished burn-down's own figures cannot hide: the
// submission's final state, no chunk handed out while a reservation of it was live, none
// never handed out, every answer as expected. What it finds is recorded as broken, and the
// bench goes on. It returns how many chunks were handed out while reserved.
func (r *benchRun) checkBurnDown(ctx context.Context, b *burndown) (twice int64, err error) {
	st, err := r.env.clients[0].Status(ctx, b.id, 10*time.Second)
	if err != nil {
		return 0, fmt.Errorf("reading the submission's final state: %w", err)
	}
	n, failed, want := b.total, b.failed.Load(), wire.StateCompleted
	if failed > 0 {
		want = wire.StateFailed
	}
	if st.State != want || st.ChunksDone != n-failed || st.ChunksFailed != failed {
		r.broke("%s: every chunk was finished, %d of them failed for good, yet the submission is %s with %d of %d chunks done and %d failed; want %s",
			b.label, failed, st.State, st.ChunksDone, n, st.ChunksFailed, want)
	}
	twice, never := b.counts()
	if twice > 0 {
		r.broke("%s: %d chunks handed out while a reservation of them was live (lease 5m, none expired)", b.label, twice)
	}
	if never > 0 {
		r.broke("%s: %d chunks never handed out, yet the submission finished", b.label, never)
	}
	if o := b.otherStatus.Load(); o > 0 {
		r.broke("%s: %d completions or fails answered other than %q, %q or %q", b.label, o, wire.StatusCompleted, wire.StatusRetrying, wire.StatusFailed)
	}
	return twice, nil
}

// costRows are the rows of what PostgreSQL spent per item (a chunk, a job) over n items:
// its CPU, when measured, and its WAL.
func (r *benchRun) costRows(cpuKey, walKey, item string, spent pgSpent, n int64) (cpuRow, walRow benchRow) {
	cpu, wal := spent.perItem(n)
	cpuRow = measured(cpuKey, "PostgreSQL CPU per "+item, cpu, unitMicros).
		note("%s of CPU of the server's processes (/proc) over %s %ss", progress.Duration(spent.cpu), progress.GroupDigits(n), item)
	if !r.env.cost.cpuMeasured() {
		cpuRow = measured(cpuKey, "PostgreSQL CPU per "+item, 0, unitMicros).note("not measured: %s", r.env.cost.notLocal)
	}
	walRow = measured(walKey, "WAL bytes per "+item, wal, unitBytes).
		note("%s of WAL (pg_current_wal_insert_lsn) over %s %ss", progress.Bytes(spent.wal), progress.GroupDigits(n), item)
	return cpuRow, walRow
}

// describeCPU writes PostgreSQL's CPU per item for the progress lines: "41.2 µs of CPU per
// chunk", or "CPU not measured".
func (r *benchRun) describeCPU(micros float64, item string) string {
	if !r.env.cost.cpuMeasured() {
		return "CPU not measured"
	}
	return fmt.Sprintf("%.1f µs of CPU per %s", micros, item)
}

// errBurndownDone stops the consumers once every chunk is completed.
var errBurndownDone = errors.New("every chunk completed")

// burndown is the state of a running burn-down; its methods are safe for concurrent use.
type burndown struct {
	label    string // "burndown", or the workload and which of its burn-downs
	id       string
	total    int64
	failRate float64 // the share of attempts at the submission's chunks failed, retry true
	// deliveries counts the times each chunk was handed out, releases the attempts given
	// back by a fail (nil when failRate is 0): a chunk is reserved while deliveries exceed
	// releases. A release is counted before the fail is sent, so that the next delivery,
	// which the fail makes possible, sees it.
	deliveries []atomic.Int32
	releases   []atomic.Int32
	finish     context.CancelCauseFunc
	start      time.Time
	end        time.Time // written once, by the consumer that finishes the last chunk

	done        atomic.Int64 // chunks finished: completed, or failed for good
	failed      atomic.Int64 // chunks failed for good (their attempts spent)
	failures    atomic.Int64 // attempts failed (retry true)
	otherStatus atomic.Int64 // completions answered other than "completed", fails other than "retrying" or "failed"
	foreign     atomic.Int64 // chunks of other submissions
	twice       atomic.Int64 // chunks handed out while reserved already
}

// consume reserves chunks and completes them, or fails some (failRate), until stop ends;
// its requests run on ctx.
func (b *burndown) consume(stop, ctx context.Context, c *client.Client, max int, name string) error {
	req := wire.ReserveRequest{Max: max, Strategy: randomStrategy, Lease: "5m", Wait: "1s", Consumer: name}
	for stop.Err() == nil {
		chunks, err := c.Reserve(ctx, req)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reserving: %w", err)
		}
		if len(chunks) == 0 {
			continue // the rest is reserved by other consumers
		}
		completions, ours := make([]wire.Completion, 0, len(chunks)), make([]bool, 0, len(chunks))
		var fails []wire.ChunkFailure
		for _, ch := range chunks {
			own := b.delivered(ch)
			if own && b.failRate > 0 && rand.Float64() < b.failRate {
				b.releases[ch.ChunkIndex].Add(1)
				fails = append(fails, wire.ChunkFailure{Token: ch.Token, Error: "opsq bench: a failure at random (--failure-rate)", Retry: &retryTrue})
				continue
			}
			completions, ours = append(completions, wire.Completion{Token: ch.Token, Output: "ok"}), append(ours, own)
		}
		if len(fails) > 0 {
			results, err := c.Fail(ctx, fails...)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("failing: %w", err)
			}
			b.failures.Add(int64(len(fails)))
			for _, res := range results {
				switch res.Status {
				case wire.StatusRetrying:
				case wire.StatusFailed:
					b.failed.Add(1)
					b.finished()
				default:
					b.otherStatus.Add(1)
				}
			}
		}
		if len(completions) == 0 {
			continue
		}
		results, err := c.Complete(ctx, completions...)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("completing: %w", err)
		}
		for i, res := range results {
			switch {
			case res.Status != wire.StatusCompleted:
				b.otherStatus.Add(1)
			case ours[i]:
				b.finished()
			}
		}
	}
	return nil
}

// retryTrue is a fail's retry: the attempt counts, and the chunk is reservable again.
var retryTrue = true

// finished counts a chunk of the submission finished, and ends the burn-down at the last.
func (b *burndown) finished() {
	if b.done.Add(1) == b.total {
		b.end = time.Now()
		b.finish(errBurndownDone)
	}
}

// delivered counts a chunk handed out, and reports whether it is of the submission.
func (b *burndown) delivered(ch wire.ReservedChunk) bool {
	if ch.SubmissionID != b.id || ch.ChunkIndex < 0 || ch.ChunkIndex >= b.total {
		b.foreign.Add(1)
		return false
	}
	d := b.deliveries[ch.ChunkIndex].Add(1)
	if b.releases != nil {
		d -= b.releases[ch.ChunkIndex].Load()
	}
	if d == 2 {
		b.twice.Add(1)
	}
	return true
}

// counts returns how many chunks were handed out while a reservation of them was live,
// and how many never.
func (b *burndown) counts() (twice, never int64) {
	for i := range b.deliveries {
		if b.deliveries[i].Load() == 0 {
			never++
		}
	}
	return b.twice.Load(), never
}

// watch stops the burn-down when no chunk has been finished for burndownStallTimeout.
func (b *burndown) watch(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, since := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d := b.done.Load(); d != last {
			last, since = d, time.Now()
		} else if time.Since(since) > burndownStallTimeout {
			never := 0
			for i := range b.deliveries {
				if b.deliveries[i].Load() == 0 {
					never++
				}
			}
			b.finish(fmt.Errorf("no chunk finished for %s, %s of %s done (%d never handed out, %d answers other than completed/retrying/failed): chunks lost, or a server stuck",
				burndownStallTimeout, progress.GroupDigits(d), progress.GroupDigits(b.total), never, b.otherStatus.Load()))
			return
		}
	}
}

// describe is the progress line of the burn-down.
func (b *burndown) describe() string {
	done := b.done.Load()
	s := fmt.Sprintf("%s: %s / %s chunks done (%d%%), %s chunks/s, %d handed out twice", b.label, progress.GroupDigits(done), progress.GroupDigits(b.total),
		progress.Percent(done, b.total), progress.GroupDigits(progress.RoundSignificant(perSecond(done, time.Since(b.start)), 3)), b.twice.Load())
	if b.failRate > 0 {
		s += fmt.Sprintf(", %s attempts failed, %s chunks failed for good", progress.GroupDigits(b.failures.Load()), progress.GroupDigits(b.failed.Load()))
	}
	return s
}

// latencyMetadata is the strategic metadata of the latency backlog, so that the strategies
// that filter or count by it have something to work on: select_only(mode=preview, …)
// matches it, prefer_distinct and max_simultaneous count company_id.
var latencyMetadata = map[string]wire.MetadataValue{"company_id": wire.Int(7), "mode": wire.String("preview")}

// latency measures the reserve round trip at each --backlogs size: a fresh backlog of
// that size (the previous one cancelled), then one consumer, consumer 0, times --samples
// sequential reserves of one chunk with each of --strategies, each reserve followed by an
// untimed complete. With --waiting N, it then adds N chunks that wait (not_before a day
// ahead) and times the backlog again beside them. The targets are the random strategy's
// (DESIGN.md §6).
func (r *benchRun) latency(ctx context.Context) error {
	c := r.env.clients[0]
	var stats []latencyStats // random's, per backlog
	var prev []string        // the submissions of the previous backlog
	cancelPrev := func() error {
		for _, id := range prev {
			if _, err := r.cancel(ctx, id); err != nil {
				return err
			}
		}
		prev = nil
		return nil
	}
	for _, size := range r.cfg.Backlogs {
		if err := cancelPrev(); err != nil {
			return err
		}
		label := "latency backlog " + progress.GroupDigits(size)
		created, _, err := r.submitWith(ctx, c, size, label, latencyMetadata)
		if err != nil {
			return err
		}
		defer r.discard(ctx, created.ID)
		prev = append(prev, created.ID)
		if r.cfg.Vacuum {
			if err := r.vacuumChunks(ctx, label); err != nil {
				return err
			}
		}
		without, err := r.timeBacklog(ctx, c, size, label, nil)
		if err != nil {
			return err
		}
		if without != nil {
			stats = append(stats, *without)
		}
		if r.cfg.Waiting == 0 {
			continue
		}
		w, err := r.addWaiting(ctx, c, size)
		if err != nil {
			return err
		}
		defer r.discard(ctx, w.id)
		prev = append(prev, w.id)
		with, err := r.timeBacklog(ctx, c, size, fmt.Sprintf("%s beside %s waiting", label, progress.GroupDigits(w.n)), w)
		if err != nil {
			return err
		}
		r.waitingRows(size, w, without, with)
	}
	if err := cancelPrev(); err != nil {
		return err
	}
	if len(stats) < 2 || len(stats) != len(r.cfg.Backlogs) {
		return nil
	}
	small, large := 0, 0
	for i, size := range r.cfg.Backlogs {
		if size < r.cfg.Backlogs[small] {
			small = i
		}
		if size > r.cfg.Backlogs[large] {
			large = i
		}
	}
	growth := fmt.Sprintf("backlog %s over %s, ", progress.GroupDigits(r.cfg.Backlogs[large]), progress.GroupDigits(r.cfg.Backlogs[small]))
	r.report.add(
		measured("latency.growth_p50", growth+"p50", durationRatio(stats[large].P50, stats[small].P50), unitRatio).want("<=", latencyGrowthTarget),
		measured("latency.growth_p99", growth+"p99", durationRatio(stats[large].P99, stats[small].P99), unitRatio).want("<=", latencyGrowthTarget),
	)
	return nil
}

// timeBacklog times the reserves of each of --strategies on the backlog of size size and
// reports them; beside waiting chunks (w not nil), their rows say so, have no targets of
// their own, and any chunk of w handed out is counted. It returns the default strategy's
// figures, nil if it was not timed.
func (r *benchRun) timeBacklog(ctx context.Context, c *client.Client, size int64, label string, w *waitingChunks) (*latencyStats, error) {
	var random *latencyStats
	var seen func(wire.ReservedChunk)
	if w != nil {
		seen = func(ch wire.ReservedChunk) {
			if ch.SubmissionID == w.id {
				w.seen++
			}
		}
	}
	for _, n := range r.cfg.Strategies {
		js, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		req := wire.ReserveRequest{Max: 1, Strategy: js, Lease: "5m", Consumer: "bench-latency"}
		reserves, completes, err := r.timeReserves(ctx, c, req, r.cfg.Samples, label+", "+n.String(), seen)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		st, ct := summarize(reserves), summarize(completes)
		at, key := "backlog "+progress.GroupDigits(size)+", ", fmt.Sprintf("latency.%d.", size)
		if r.cfg.Vacuum {
			at = "backlog " + progress.GroupDigits(size) + " vacuumed, "
		}
		if w != nil {
			at = strings.TrimSuffix(at, ", ") + fmt.Sprintf(" beside %s waiting, ", progress.GroupDigits(w.n))
			key += "waiting."
		}
		if n.Kind != strategy.Random || len(r.cfg.Strategies) > 1 {
			at += n.String() + ", "
			key += n.String() + "."
		}
		p50 := measured(key+"reserve_p50", at+"reserve p50", inMillis(st.P50), unitMillis)
		p99 := measured(key+"reserve_p99", at+"reserve p99", inMillis(st.P99), unitMillis)
		if n.Equal(strategy.Default) {
			random = &st
			if w == nil {
				p50, p99 = p50.want("<=", latencyP50TargetMs), p99.want("<=", latencyP99TargetMs)
			}
		}
		r.report.add(p50,
			measured(key+"reserve_p90", at+"reserve p90", inMillis(st.P90), unitMillis),
			p99,
			measured(key+"reserve_max", at+"reserve max", inMillis(st.Max), unitMillis),
			measured(key+"complete_p50", at+"complete p50", inMillis(ct.P50), unitMillis).note("of the chunk just reserved; no target"),
			measured(key+"complete_p99", at+"complete p99", inMillis(ct.P99), unitMillis).note("no target"),
		)
		r.say("%s, %s: reserve p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples); complete p50 %.2f ms, p99 %.2f ms", label, n,
			inMillis(st.P50), inMillis(st.P90), inMillis(st.P99), inMillis(st.Max), st.N, inMillis(ct.P50), inMillis(ct.P99))
	}
	return random, nil
}

// waitingRows reports the backlog of size size timed beside the waiting chunks w against
// the same without them: the default strategy's p50 and p99 ratios (DESIGN.md §6: p50
// within 1.5×), and how many waiting chunks the timed reserves handed out (none may be).
func (r *benchRun) waitingRows(size int64, w *waitingChunks, without, with *latencyStats) {
	key := fmt.Sprintf("latency.%d.waiting_", size)
	at := fmt.Sprintf("backlog %s beside %s waiting over without, ", progress.GroupDigits(size), progress.GroupDigits(w.n))
	seenRow := measured(key+"handed_out", fmt.Sprintf("backlog %s: waiting chunks handed out", progress.GroupDigits(size)), float64(w.seen), unitCount)
	seenRow = seenRow.want("==", 0).note("not_before %s ahead", waitingNotBeforeFor)
	if w.seen > 0 {
		r.broke("latency: %d chunks of a submission with not_before %s ahead handed out beside backlog %s", w.seen, waitingNotBeforeFor, progress.GroupDigits(size))
	}
	r.report.add(seenRow)
	if without == nil || with == nil {
		return
	}
	p50 := measured(key+"p50_ratio", at+"reserve p50", durationRatio(with.P50, without.P50), unitRatio).want("<=", waitingP50Target)
	r.report.add(p50, measured(key+"p99_ratio", at+"reserve p99", durationRatio(with.P99, without.P99), unitRatio).note("no target"))
}

// vacuumChunks runs VACUUM ANALYZE on opsq.chunks (--vacuum), showing how long it has run.
func (r *benchRun) vacuumChunks(ctx context.Context, label string) error {
	start := time.Now()
	stop := r.showProgress(func() string {
		return fmt.Sprintf("%s: VACUUM ANALYZE opsq.chunks, %s", label, time.Since(start).Round(time.Second))
	})
	defer stop()
	if _, err := r.env.pool.Exec(ctx, "VACUUM ANALYZE opsq.chunks"); err != nil {
		return fmt.Errorf("%s: VACUUM ANALYZE opsq.chunks: %w", label, err)
	}
	stop()
	r.say("%s: VACUUM ANALYZE opsq.chunks took %s", label, time.Since(start).Round(time.Second))
	return nil
}

// timeReserves times samples reserves req (of one chunk), after latencyWarmup untimed
// ones, and the complete that follows each (apart: the reserve's time does not include it).
// seen, if not nil, is called with the chunk of each timed reserve, before its complete.
func (r *benchRun) timeReserves(ctx context.Context, c *client.Client, req wire.ReserveRequest, samples int, label string,
	seen func(wire.ReservedChunk)) (reserves, completes []time.Duration, err error) {
	reserves = make([]time.Duration, 0, samples)
	completes = make([]time.Duration, 0, samples)
	var timed atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("%s: %d / %d reserves timed", label, timed.Load(), samples)
	})
	defer stop()
	for i := range latencyWarmup + samples {
		start := time.Now()
		chunks, err := c.Reserve(ctx, req)
		took := time.Since(start)
		if err != nil {
			return nil, nil, fmt.Errorf("reserving: %w", err)
		}
		if len(chunks) != 1 {
			return nil, nil, fmt.Errorf("reserve %d gave %d chunks; want 1 (the backlog is not empty)", i+1, len(chunks))
		}
		if seen != nil && i >= latencyWarmup {
			seen(chunks[0])
		}
		start = time.Now()
		res, err := c.Complete(ctx, wire.Completion{Token: chunks[0].Token, Output: "ok"})
		if err != nil {
			return nil, nil, fmt.Errorf("completing: %w", err)
		}
		if res[0].Status != wire.StatusCompleted {
			return nil, nil, fmt.Errorf("completing a chunk just reserved: status %q; want %q", res[0].Status, wire.StatusCompleted)
		}
		if i >= latencyWarmup {
			reserves, completes = append(reserves, took), append(completes, time.Since(start))
			timed.Add(1)
		}
	}
	return reserves, completes, nil
}

// rss reads the resident memory of instance 0 while it holds --rss-reservations live
// reservations, all reserved from it alone.
func (r *benchRun) rss(ctx context.Context) error {
	inst, c := r.env.instances[0], r.env.clients[0]
	want := r.cfg.RSSReservations
	cl, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster: %w", err)
	}
	own, _ := shardsHeld(cl, inst.id)
	if own == 0 {
		return fmt.Errorf("instance %s holds no shard", inst.id)
	}
	// Every submission is spread over all shards: the backlog must give instance 0 enough
	// chunks of its own, since a reserve it cannot serve from them is forwarded.
	backlog := int64(math.Ceil(float64(want) * float64(cl.ShardCount) / float64(own) * 1.1))
	// Inserted through the last instance, so that the ingest's buffers are not in instance 0's memory.
	created, _, err := r.submit(ctx, r.env.clients[len(r.env.clients)-1], backlog, "rss backlog")
	if err != nil {
		return err
	}
	defer r.discard(ctx, created.ID) // and its reservations with it
	pid := inst.cmd.Process.Pid
	before, err := procStatusKB(pid, "VmRSS")
	if err != nil {
		return err
	}

	var reserved atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("rss: %s / %s chunks reserved from instance 0", progress.GroupDigits(reserved.Load()), progress.GroupDigits(want))
	})
	for reserved.Load() < want {
		req := wire.ReserveRequest{Max: int(min(1000, want-reserved.Load())), Strategy: randomStrategy, Lease: "1h", Consumer: "bench-rss"}
		chunks, err := c.Reserve(ctx, req)
		if err != nil {
			stop()
			return fmt.Errorf("reserving: %w", err)
		}
		if len(chunks) == 0 {
			// Measure what was reached, but fail the bench: work was there.
			stop()
			r.broke("rss: a reserve gave no chunk after %s reservations, with %s chunks of the backlog of %s still reservable",
				progress.GroupDigits(reserved.Load()), progress.GroupDigits(backlog-reserved.Load()), progress.GroupDigits(backlog))
			break
		}
		reserved.Add(int64(len(chunks)))
	}
	stop()
	held, err := r.waitInflight(ctx, inst.id, reserved.Load())
	if err != nil {
		return err
	}
	after, err := procStatusKB(pid, "VmRSS")
	if err != nil {
		return err
	}
	peak, err := procStatusKB(pid, "VmHWM")
	if err != nil {
		return err
	}
	heldRow := measured("rss.reservations_held", "live reservations held by instance 0", float64(held), unitCount).
		note("in-flight counts of its shards in /v1/cluster")
	if held < reserved.Load() {
		heldRow = heldRow.note("in /v1/cluster, of %s reserved through it: the rest were forwarded to other instances", progress.GroupDigits(reserved.Load()))
	}
	rssRow := measured("rss.vmrss_mb", fmt.Sprintf("VmRSS of instance 0 holding %s reservations", progress.GroupDigits(held)), kbToMB(after), unitMB).
		want("<", rssTargetMB)
	if held < want {
		rssRow = rssRow.note("not the %s reservations the target is for", progress.GroupDigits(want))
	}
	r.report.add(
		rssRow,
		measured("rss.vmrss_before_mb", "VmRSS of instance 0 before reserving", kbToMB(before), unitMB),
		measured("rss.vmhwm_mb", "VmHWM (peak RSS) of instance 0", kbToMB(peak), unitMB),
		heldRow,
	)
	r.say("rss: instance 0 holds %s reservations: VmRSS %.1f MB (%.1f MB before), peak %.1f MB",
		progress.GroupDigits(held), kbToMB(after), kbToMB(before), kbToMB(peak))
	return nil
}

// waitInflight waits until /v1/cluster shows at least n chunks in flight on the shards of
// instance id (the counts are written at each renewal), for up to 10 s, and returns the
// last count seen.
func (r *benchRun) waitInflight(ctx context.Context, id string, n int64) (int64, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl, err := r.env.clients[0].Cluster(ctx)
		if err != nil {
			return 0, fmt.Errorf("reading the cluster: %w", err)
		}
		_, inflight := shardsHeld(cl, id)
		if int64(inflight) >= n || time.Now().After(deadline) {
			return int64(inflight), nil
		}
		if err := clustertest.SleepCtx(ctx, 500*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// kbToMB converts kB (KiB, as /proc says) to MB (10^6 bytes, as DESIGN.md §6 says).
func kbToMB(kb int64) float64 { return float64(kb) * 1024 / 1e6 }

// perSecond returns n per second of d.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// submit inserts a submission of n generated chunks through c as one NDJSON body,
// showing its progress, and returns it and how long it took.
func (r *benchRun) submit(ctx context.Context, c *client.Client, n int64, label string) (wire.Created, time.Duration, error) {
	return r.submitWith(ctx, c, n, label, nil)
}

// submitWith is submit with strategic metadata on the submission.
func (r *benchRun) submitWith(ctx context.Context, c *client.Client, n int64, label string, meta map[string]wire.MetadataValue) (wire.Created, time.Duration, error) {
	return r.submitHeader(ctx, c, n, label, wire.SubmissionHeader{StrategicMetadata: meta})
}

// submitHeader is submit with the fields of h on the submission; its metadata names label.
func (r *benchRun) submitHeader(ctx context.Context, c *client.Client, n int64, label string, h wire.SubmissionHeader) (wire.Created, time.Duration, error) {
	gen := &chunkLines{n: n}
	start := time.Now()
	stop := r.showProgress(func() string {
		sent, elapsed := gen.made.Load(), time.Since(start)
		if sent == n {
			return fmt.Sprintf("%s: %s chunks sent, waiting for the server to commit, %s", label, progress.GroupDigits(n), progress.Duration(elapsed))
		}
		return fmt.Sprintf("%s: sent %s / %s chunks (%d%%), %s chunks/s", label, progress.GroupDigits(sent), progress.GroupDigits(n),
			progress.Percent(sent, n), progress.GroupDigits(progress.RoundSignificant(perSecond(sent, elapsed), 3)))
	})
	h.Metadata = "opsq bench: " + label
	created, err := c.SubmitNDJSON(ctx, h, gen)
	took := time.Since(start)
	stop()
	if err != nil {
		return created, took, fmt.Errorf("submitting %s chunks: %w", progress.GroupDigits(n), err)
	}
	if created.ChunksTotal != n {
		r.broke("%s: the server counted %d chunks of the %d sent", label, created.ChunksTotal, n)
	}
	return created, took, nil
}

// cancel cancels submission id, which takes it out of the backlog, and returns how long
// it took. A submission finished already is fine.
func (r *benchRun) cancel(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	_, err := r.env.clients[0].Cancel(ctx, id)
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("cancelling submission %s: %w", id, err)
	}
	return time.Since(start), nil
}

// discard cancels submission id if it is still in progress, even after Ctrl-C, so that a
// workload that stopped early leaves no backlog to the next one and no reservation that
// would hold up the instances' shutdown. Errors are ignored: the database is dropped anyway.
func (r *benchRun) discard(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchDatabaseTimeout)
	defer cancel()
	_, _ = r.cancel(ctx, id)
}

// chunkLines generates the NDJSON chunk lines of a bench submission: n lines of about 40
// bytes, "operation <i> of the opsq bench", as JSON strings. Read fills p with as many
// lines as fit, since the HTTP transport sends each Read as one piece of the body. made
// may be read from another goroutine.
type chunkLines struct {
	n    int64
	made atomic.Int64 // lines generated so far
	buf  []byte       // the last line generated
	out  []byte       // what is left of buf to hand out
}

func (g *chunkLines) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.out) == 0 {
			i := g.made.Load()
			if i == g.n {
				break
			}
			g.buf = appendChunkLine(g.buf[:0], i)
			g.out = g.buf
			g.made.Store(i + 1)
		}
		c := copy(p[n:], g.out)
		g.out = g.out[c:]
		n += c
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// appendChunkLine appends line i of a bench submission.
func appendChunkLine(b []byte, i int64) []byte {
	b = append(b, `"operation `...)
	b = strconv.AppendInt(b, i, 10)
	return append(b, " of the opsq bench\"\n"...)
}
