package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// The failures workload of "opsq bench" (DESIGN.md §6, "Failure"), and the submissions
// with lifecycle fields (DESIGN.md §3) that it and the latency workload's waiting chunks
// make.

// Targets of DESIGN.md §6's failure line.
const (
	failureRateTarget   = 0.90 // the failing burn-down's rate over the clean one's, at least
	failureRateDesign   = 0.01 // the share of failed attempts the target is for
	waitingP50Target    = 1.5  // reserve p50 beside waiting chunks over the same without, at most
	waitingNotBeforeFor = "24h"
)

// failuresHeader is the header of both submissions of the failures workload: a chunk whose
// attempts are spent fails alone, and a retried chunk is reservable again at once.
func failuresHeader() wire.SubmissionHeader {
	return wire.SubmissionHeader{OnFailure: wire.OnFailureContinue, RetryBackoff: &wire.RetryBackoff{Initial: "0s"}}
}

// failures burns down a submission of --failure-chunks chunks whose consumers fail
// --failure-rate of their attempts (retry true) and complete the rest, and one of as many
// chunks that they complete at once, with the burndown's consumers (burnDown), and
// compares the two rates: chunks finished (completed, or failed for good) per second.
// Each burn-down lasts a few seconds, and a machine's other work moves a rate by ±10 %
// from one to the next, so it runs --failure-rounds rounds of the pair, the order
// alternating (the first burn-down of a run meets colder caches, the second the first's
// dead rows), and judges the median of the rounds' ratios. Beside the rates it reports the
// CPU per chunk of every process that took part (PostgreSQL, the instances, the bench's
// consumers): on a busy machine a rate says how much of the machine it got; the CPU says
// what a chunk cost.
func (r *benchRun) failures(ctx context.Context) error {
	n, rate, rounds := r.cfg.FailureChunks, r.cfg.FailureRate, r.cfg.FailureRounds
	type run struct {
		label    string
		failRate float64
		b        *burndown
		cpu      cpuSplit // over the burn-down
	}
	burn := func(label string, failRate float64) (*run, error) {
		created, err := r.submitLifecycle(ctx, r.env.clients[0], n, label+" backlog", failuresHeader())
		if err != nil {
			return nil, err
		}
		defer r.discard(ctx, created.ID)
		before, err := r.cpuNow(ctx)
		if err != nil {
			return nil, err
		}
		b, err := r.burnDown(ctx, label, created.ID, n, failRate)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		after, err := r.cpuNow(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := r.checkBurnDown(ctx, b); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		u := &run{label: label, failRate: failRate, b: b, cpu: after.minus(before)}
		took := b.end.Sub(b.start)
		r.say("%s: %s chunks in %s (%s chunks/s), %s attempts failed, %s chunks failed for good, %d handed out while reserved; CPU per chunk %.1f µs (PostgreSQL %.1f, instances %.1f, bench %.1f)",
			label, progress.GroupDigits(n), progress.Duration(took), progress.GroupDigits(progress.RoundSignificant(perSecond(n, took), 3)),
			progress.GroupDigits(b.failures.Load()), progress.GroupDigits(b.failed.Load()), b.twice.Load(),
			micros(u.cpu.total(), n), micros(u.cpu.pg, n), micros(u.cpu.instances, n), micros(u.cpu.bench, n))
		return u, nil
	}

	var failing, clean []*run
	var ratios, cpuRatios []float64
	for i := range rounds {
		pair := [2]*run{}
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			label, fr := fmt.Sprintf("failures, round %d of %d", i+1, rounds), rate
			if k == 1 {
				label, fr = fmt.Sprintf("failures, clean, round %d of %d", i+1, rounds), 0
			}
			u, err := burn(label, fr)
			if err != nil {
				return err
			}
			pair[k] = u
		}
		failing, clean = append(failing, pair[0]), append(clean, pair[1])
		fRate, cRate := perSecond(n, pair[0].b.end.Sub(pair[0].b.start)), perSecond(n, pair[1].b.end.Sub(pair[1].b.start))
		if cRate > 0 {
			ratios = append(ratios, fRate/cRate)
		}
		if pair[0].cpu.total() > 0 {
			cpuRatios = append(cpuRatios, float64(pair[1].cpu.total())/float64(pair[0].cpu.total()))
		}
	}

	rates := func(runs []*run) (med float64, all []string) {
		var v []float64
		for _, u := range runs {
			x := perSecond(n, u.b.end.Sub(u.b.start))
			v = append(v, x)
			all = append(all, progress.GroupDigits(progress.RoundSignificant(x, 3)))
		}
		return median(v), all
	}
	cpus := func(runs []*run, part func(cpuSplit) time.Duration) float64 {
		var v []float64
		for _, u := range runs {
			v = append(v, micros(part(u.cpu), n))
		}
		return median(v)
	}
	cpuRow := func(key, which string, runs []*run) benchRow {
		return measured(key, "CPU per chunk, "+which+", median (PostgreSQL, instances, bench)", cpus(runs, cpuSplit.total), unitMicros).
			note("PostgreSQL %.1f µs, instances %.1f µs, bench %.1f µs", cpus(runs, func(c cpuSplit) time.Duration { return c.pg }),
				cpus(runs, func(c cpuSplit) time.Duration { return c.instances }), cpus(runs, func(c cpuSplit) time.Duration { return c.bench }))
	}
	fMed, fAll := rates(failing)
	cMed, cAll := rates(clean)
	at := fmt.Sprintf("%s chunks, %d consumers, max %d, ", progress.GroupDigits(n), r.cfg.Consumers, r.cfg.Max)
	ratioRow := measured("failures.rate_ratio", "failing rate over clean rate, median of the rounds", median(ratios), unitRatio)
	switch {
	case rate != failureRateDesign:
		ratioRow = ratioRow.note("rounds: %s; the target, ≥ %g×, is for %g %% of attempts failed", joinRatios(ratios), failureRateTarget, failureRateDesign*100)
	default:
		ratioRow = ratioRow.note("rounds: %s", joinRatios(ratios)).want(">=", failureRateTarget)
	}
	failingRow := measured("failures.rate", at+fmt.Sprintf("%g %% of attempts failed, median", rate*100), fMed, unitRate).
		note("chunks finished (completed, or failed for good) per second, rounds: %s; on_failure continue, retry_backoff initial 0s", strings.Join(fAll, ", "))
	cleanRow := measured("failures.clean_rate", at+"none failed, median", cMed, unitRate).
		note("the same submission, its consumers failing nothing, rounds: %s", strings.Join(cAll, ", "))
	var attempts, failedAttempts, failedChunks, twice, cleanTwice int64
	for _, u := range failing {
		attempts += deliveriesOf(u.b)
		failedAttempts += u.b.failures.Load()
		failedChunks += u.b.failed.Load()
		twice += u.b.twice.Load()
	}
	for _, u := range clean {
		cleanTwice += u.b.twice.Load()
	}
	r.report.add(failingRow, cleanRow, ratioRow,
		cpuRow("failures.cpu_per_chunk", "failing", failing),
		cpuRow("failures.clean_cpu_per_chunk", "clean", clean),
		measured("failures.cpu_ratio", "clean CPU per chunk over failing, median of the rounds", median(cpuRatios), unitRatio).
			note("what the rate ratio would be on a machine that ran nothing else; rounds: %s", joinRatios(cpuRatios)),
		measured("failures.attempts_failed", "attempts failed (retry true), all rounds", float64(failedAttempts), unitCount).
			note("of %s attempts", progress.GroupDigits(attempts)),
		measured("failures.chunks_failed", "chunks failed for good (attempts spent), all rounds", float64(failedChunks), unitCount).
			note("the server's default_max_retries"),
		measured("failures.handed_out_twice", "chunks handed out while reserved, failing", float64(twice), unitCount).want("==", 0),
		measured("failures.clean_handed_out_twice", "chunks handed out while reserved, clean", float64(cleanTwice), unitCount).want("==", 0),
	)
	for _, u := range append(failing, clean...) {
		if f := u.b.foreign.Load(); f > 0 {
			r.report.add(measured("failures.other_chunks", u.label+": chunks of other submissions", float64(f), unitCount).note("left over from earlier workloads"))
		}
	}
	return nil
}

// cpuSplit is CPU time of PostgreSQL (0 when it is not measured here), of the instances,
// and of this process (the bench's consumers).
type cpuSplit struct{ pg, instances, bench time.Duration }

func (c cpuSplit) total() time.Duration { return c.pg + c.instances + c.bench }

func (c cpuSplit) minus(o cpuSplit) cpuSplit {
	return cpuSplit{pg: c.pg - o.pg, instances: c.instances - o.instances, bench: c.bench - o.bench}
}

// cpuNow returns the CPU time used so far by PostgreSQL, the instances and this process.
func (r *benchRun) cpuNow(ctx context.Context) (cpuSplit, error) {
	var c cpuSplit
	pg, err := r.env.cost.sample(ctx)
	if err != nil {
		return c, err
	}
	c.pg = pg.cpu
	inst, err := r.instancesCPU()
	if err != nil {
		return c, err
	}
	for _, d := range inst {
		c.instances += d
	}
	if c.bench, err = procCPU(os.Getpid()); err != nil {
		return c, err
	}
	return c, nil
}

// micros is d per item, in microseconds.
func micros(d time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

// median returns the median of v (the mean of the middle two of an even count); 0 when v
// is empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// joinRatios writes ratios as "0.93×, 0.97×".
func joinRatios(v []float64) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.2f×", x)
	}
	return strings.Join(out, ", ")
}

// deliveriesOf returns how many chunks b handed out in all.
func deliveriesOf(b *burndown) int64 {
	var n int64
	for i := range b.deliveries {
		n += int64(b.deliveries[i].Load())
	}
	return n
}

// submitLifecycle is submitHeader for a submission with lifecycle fields, and checks that
// its status shows them (on_failure, not_before): a bench whose server ignored them would
// measure something else.
func (r *benchRun) submitLifecycle(ctx context.Context, c *client.Client, n int64, label string, h wire.SubmissionHeader) (wire.Created, error) {
	created, _, err := r.submitHeader(ctx, c, n, label, h)
	if err != nil {
		return created, err
	}
	st, err := c.Status(ctx, created.ID, 0)
	if err != nil {
		r.discard(ctx, created.ID)
		return created, fmt.Errorf("%s: reading its status: %w", label, err)
	}
	var ignored []string
	if h.OnFailure != nil && !sameJSON(st.OnFailure, h.OnFailure) {
		ignored = append(ignored, fmt.Sprintf("on_failure %s, the status says %s", h.OnFailure, st.OnFailure))
	}
	if h.NotBefore != "" && st.NotBefore == nil {
		ignored = append(ignored, fmt.Sprintf("not_before %q, the status has none", h.NotBefore))
	}
	if len(ignored) > 0 {
		r.discard(ctx, created.ID)
		return created, fmt.Errorf("%s: the server took but ignored %s", label, strings.Join(ignored, "; "))
	}
	return created, nil
}

// sameJSON reports whether a and b are the same JSON text but for white space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// waitingChunks is a submission of chunks that wait (not_before a day ahead) beside a
// latency backlog: the reserves timed beside it must not hand out any of them.
type waitingChunks struct {
	id   string
	n    int64
	seen int64 // of its chunks handed out by the timed reserves
}

// addWaiting submits --waiting chunks with not_before a day ahead, through c.
func (r *benchRun) addWaiting(ctx context.Context, c *client.Client, size int64) (*waitingChunks, error) {
	n := r.cfg.Waiting
	label := fmt.Sprintf("latency: %s waiting chunks beside backlog %s", progress.GroupDigits(n), progress.GroupDigits(size))
	start := time.Now()
	created, err := r.submitLifecycle(ctx, c, n, label,
		wire.SubmissionHeader{NotBefore: waitingNotBeforeFor, StrategicMetadata: latencyMetadata})
	if err != nil {
		return nil, err
	}
	r.say("%s: submitted in %s", label, progress.Duration(time.Since(start)))
	return &waitingChunks{id: created.ID, n: n}, nil
}
