package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
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

// The fairness workload of "opsq bench", DESIGN.md §6: "Fairness and rates, 3 instances, 64
// consumers" (docs/rates.md has the designs). It runs in phases, each with its own values of
// fairKey, so that no phase's chunks are in another's way:
//
//   - weighted_fair 3:1:1 over three backlogged values, judged in every window; then a
//     fourth value arrives late, and the first full window after it is judged at 3:1:1:1;
//   - rate_limit 20/s burst 5 on three values at once, each judged on its own;
//   - a throttle of one of two values while the consumers run;
//   - the reserve latency of random, rate_limit and weighted_fair on one backlog, one
//     consumer, of which one rate-limited value is most.
//
// The consumers (--consumers, consumer i talking to instance i % --instances) reserve one
// chunk at a time and complete it at once; each chunk is timed by when the reserve's
// answer arrived (handout), and every figure is computed from those records.

// fairKey is the strategic metadata key whose values the phases share out.
const fairKey = "company_id"

// Targets of DESIGN.md §6's fairness line, and of issue 22's.
const (
	fairShareTolerance = 10   // percent: each value's share of a window within ±10 % of its weight's
	fairRatePerSecond  = 20   // rate_limit's rate
	fairRateBurst      = 5    // and burst
	fairRateTolerance  = 0.05 // the rate held to ±5 %
	fairLatencyTarget  = 1.5  // reserve p50 over random's, at most
	// fairResumeTarget is how soon after a throttle's end its value is served again.
	fairResumeTarget = time.Second
	// throttleGrace is past any NOTIFY's delivery: the instances that did not set a throttle
	// have it in force within a NOTIFY's delivery (docs/rates.md); a chunk of its value
	// handed out by a reserve sent this long after the throttle's answer is broken.
	throttleGrace = time.Second
)

// Strategies of the phases.
const (
	fairStrategyText = "weighted_fair(company_id, {1: 3, 2: 1, 3: 1}, 1, random)"
	rateStrategyText = "rate_limit(company_id, 20/s, 5, random)"
)

// fairWeights are the weighted_fair phase's values and weights; fairLate arrives late, with
// the default weight.
var (
	fairWeights = map[string]int{"1": 3, "2": 1, "3": 1}
	fairLate    = "4"
	rateValues  = []string{"11", "12", "13"}
	// throttleValue is throttled while throttleOther goes on.
	throttleValue, throttleOther = "21", "22"
)

// Sizes of the phases' submissions. A phase's values stay backlogged: a feeder submits
// fairTopUp more chunks of a value whenever fewer than half that are left of it.
const (
	fairTopUp        = 20_000
	fairFeedInterval = 100 * time.Millisecond
	// fairRateSlack: each rate-limited value has this many chunks beyond what its rate
	// can hand out over the phase.
	fairRateSlack = 200
	// fairConsumerWait is the consumers' long-poll: a rate-limited value has nothing most of
	// the time.
	fairConsumerWait = "1s"
	// fairLease is the lease of the consumers' reserves: a chunk's hand-out time is its expiry less it.
	fairLease = 5 * time.Minute
)

// fairness runs the phases in turn and reports each one's rows.
func (r *benchRun) fairness(ctx context.Context) error {
	if err := r.fairShares(ctx); err != nil {
		return fmt.Errorf("weighted_fair: %w", err)
	}
	if err := r.fairRates(ctx); err != nil {
		return fmt.Errorf("rate_limit: %w", err)
	}
	if err := r.fairThrottle(ctx); err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	return r.fairLatency(ctx)
}

// fairAt says where a fairness row was measured: the instances and consumers, beside
// DESIGN.md §6's.
func (r *benchRun) fairAt() string {
	return fmt.Sprintf("%d instances, %d consumers", r.cfg.Instances, r.cfg.Consumers)
}

// fairNote is the note of a row whose target is DESIGN.md §6's, when the run is not at its
// scale.
func (r *benchRun) fairNote() string {
	if r.cfg.Instances == FairnessInstances && r.cfg.Consumers >= 24 && r.cfg.Consumers <= 64 {
		return ""
	}
	return fmt.Sprintf("; the target is for %d instances and 24 to 64 consumers", FairnessInstances)
}

// fairShares runs weighted_fair 3:1:1 over three backlogged values for
// --fairness-duration, then submits a fourth value and runs one --fairness-window more.
func (r *benchRun) fairShares(ctx context.Context) error {
	w, d := r.cfg.FairnessWindow, r.cfg.FairnessDuration
	p, err := r.startPhase(ctx, "weighted_fair", fairStrategyText, slices.Sorted(maps.Keys(fairWeights)), fairTopUp)
	if err != nil {
		return err
	}
	var arrived time.Duration
	err = p.run(func(ctx context.Context) error {
		if err := p.sleepUntil(ctx, d); err != nil {
			return err
		}
		if err := p.feed(ctx, fairLate, fairTopUp); err != nil {
			return err
		}
		arrived = p.since()
		return p.sleepUntil(ctx, arrived+w)
	})
	if err != nil {
		return err
	}
	recs := p.records()

	windows := int(d / w)
	worst := 0.0
	for i := range windows {
		from, to := time.Duration(i)*w, time.Duration(i+1)*w
		counts := windowCounts(recs, from, to)
		dev := shareDeviation(counts, fairWeights)
		worst = max(worst, dev)
		r.report.add(measured(fmt.Sprintf("fairness.window_%d", i+1),
			fmt.Sprintf("weighted_fair 3:1:1, window %s–%s, worst share off its weight's", progress.Duration(from), progress.Duration(to)), dev, unitPercent).
			want("<=", fairShareTolerance).note("chunks of 1 : 2 : 3: %s%s", describeCounts(counts, "1", "2", "3"), r.fairNote()))
	}
	r.report.add(measured("fairness.worst_window", fmt.Sprintf("weighted_fair 3:1:1, %s, %d windows of %s, worst share off", r.fairAt(), windows, progress.Duration(w)),
		worst, unitPercent).want("<=", fairShareTolerance).note("±%d %% of each value's share in every window%s", fairShareTolerance, r.fairNote()))

	late := maps.Clone(fairWeights)
	late[fairLate] = 1
	first, served := firstAfter(recs, fairLate, arrived)
	wait := w // never served: a window, at least, which misses
	if served {
		wait = first - arrived
	}
	waitRow := measured("fairness.late_first_chunk", "late value 4: its first chunk after its submission was answered", inMillis(wait), unitMillis).
		want("<=", inMillis(w)).note("within one window")
	if !served {
		waitRow = waitRow.note("never served in the window after it arrived")
	}
	counts := windowCounts(recs, arrived, arrived+w)
	lateDev := shareDeviation(counts, late)
	r.report.add(waitRow,
		measured("fairness.late_window", fmt.Sprintf("weighted_fair 3:1:1:1, the first full window after value 4 arrived (%s–%s), worst share off",
			progress.Duration(arrived), progress.Duration(arrived+w)), lateDev, unitPercent).
			want("<=", fairShareTolerance).note("chunks of 1 : 2 : 3 : 4: %s%s", describeCounts(counts, "1", "2", "3", fairLate), r.fairNote()),
		measured("fairness.shares_rate", "weighted_fair: chunks handed out per second", perSecond(int64(len(recs)), p.since()), unitRate).
			note("%s, max 1 per reserve; no target", r.fairAt()),
	)
	r.say("fairness, weighted_fair: %s chunks in %s; worst window %.1f %% off 3:1:1; late value served after %s, its window %.1f %% off 3:1:1:1",
		progress.GroupDigits(int64(len(recs))), progress.Duration(p.since()), worst, progress.Duration(wait), lateDev)
	return p.check()
}

// describeCounts writes the counts of values: "6 012 : 2 001 : 1 998".
func describeCounts(counts map[string]int, values ...string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = progress.GroupDigits(int64(counts[v]))
	}
	return strings.Join(parts, " : ")
}

// fairRates runs rate_limit 20/s burst 5 over three values at once for
// --fairness-rate-duration and judges each value on its own.
func (r *benchRun) fairRates(ctx context.Context) error {
	d := r.cfg.FairnessRateDuration
	n := int(fairRatePerSecond*d.Seconds()) + fairRateBurst + fairRateSlack
	p, err := r.startPhase(ctx, "rate_limit", rateStrategyText, rateValues, 0)
	if err != nil {
		return err
	}
	for _, v := range rateValues {
		if err := p.feed(ctx, v, n); err != nil {
			return err
		}
	}
	p.restart() // the clock starts once every value is there
	if err := p.run(func(ctx context.Context) error { return p.sleepUntil(ctx, d) }); err != nil {
		return err
	}
	recs := p.records()
	var worstRate float64
	for _, v := range rateValues {
		at := arrivals(recs, v)
		in := 0
		for _, t := range at {
			if t < d {
				in++
			}
		}
		rate := float64(in) / d.Seconds()
		handed := handOuts(recs, v)
		most := maxInWindow(handed, time.Second)
		excess := rateExcess(recs, v, fairRatePerSecond, fairRateBurst)
		r.report.add(
			measured("fairness.rate_"+v, fmt.Sprintf("rate_limit 20/s burst 5, value %s, over %s", v, progress.Duration(d)), rate, unitPerSecond).
				wantWithin(fairRatePerSecond, fairRateTolerance).note("%d chunks; 3 values limited at once, %s%s", in, r.fairAt(), r.fairNote()),
			measured("fairness.rate_"+v+"_most_in_1s", fmt.Sprintf("rate_limit, value %s, most chunks handed out in any 1 s", v), float64(most), unitCount).
				want("<=", fairRatePerSecond+fairRateBurst).note("per_second + burst; by the instances' clocks (each run's start, up to one token lease's round trip "+
				"before the hand-out); between %d and %d by what each chunk's start and arrival prove; %d by arrival",
				provenMostInWindow(recs, v, time.Second), possibleMostInWindow(recs, v, time.Second), maxInWindow(at, time.Second)),
			measured("fairness.rate_"+v+"_over_bound", fmt.Sprintf("rate_limit, value %s, chunks beyond per_second × t + burst", v), math.Ceil(max(0, excess)), unitCount).
				want("==", 0).note("proven: handed out after its run began, before it arrived; by the runs' starts alone, which may come a lease's round trip "+
				"before the hand-out and so shorten spans, %.0f", math.Ceil(max(0, handOutExcess(handed, fairRatePerSecond, fairRateBurst)))),
		)
		worstRate = max(worstRate, abs(rate/fairRatePerSecond-1)*100)
	}
	r.say("fairness, rate_limit: %s chunks of %d values in %s, worst rate %.1f %% off 20/s",
		progress.GroupDigits(int64(len(recs))), len(rateValues), progress.Duration(d), worstRate)
	return p.check()
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// fairThrottle runs random over two backlogged values, and throttles one of them for
// --fairness-throttle through instance 0 a second in: none of its chunks may be handed
// out from the throttle's answer to its until, and it is served again after.
func (r *benchRun) fairThrottle(ctx context.Context) error {
	d := r.cfg.FairnessThrottle
	p, err := r.startPhase(ctx, "throttle", "random", []string{throttleValue, throttleOther}, fairTopUp)
	if err != nil {
		return err
	}
	var answered, until time.Duration
	err = p.run(func(ctx context.Context) error {
		if err := p.sleepUntil(ctx, time.Second); err != nil {
			return err
		}
		end, err := r.env.clients[0].Throttle(ctx, fairKey, wire.Int(mustInt(throttleValue)), d)
		answered = p.since()
		if err != nil {
			return fmt.Errorf("throttling %s = %s: %w", fairKey, throttleValue, err)
		}
		// The same host's clock: its until, on the phase's monotonic clock.
		until = answered + time.Until(end)
		return p.sleepUntil(ctx, until+2*time.Second)
	})
	if err != nil {
		return err
	}
	recs := p.records()
	leaks := throttleLeaks(recs, throttleValue, answered, until)
	late := throttleLeaks(recs, throttleValue, answered+throttleGrace, until)
	inFlight, lastSent := 0, time.Duration(0) // arrived in force from reserves sent before the answer; the latest leak's sending
	for _, h := range recs {
		if h.value != throttleValue || h.at < answered || h.at >= until {
			continue
		}
		if h.sent < answered {
			inFlight++
		} else {
			lastSent = max(lastSent, h.sent-answered)
		}
	}
	others := windowCounts(recs, answered, until)[throttleOther]
	first, resumed := firstAfter(recs, throttleValue, until)
	resume := 2 * time.Second
	if resumed {
		resume = first - until
	}
	resumeRow := measured("fairness.throttle_resumed", "throttled value: its first chunk after the throttle's until", inMillis(resume), unitMillis).
		want("<=", inMillis(fairResumeTarget))
	if !resumed {
		resumeRow = resumeRow.note("not served in the 2 s after it")
	}
	leakRow := measured("fairness.throttle_leaks", fmt.Sprintf("throttled value, %s through instance 0: chunks handed out in force", progress.Duration(d)), float64(leaks), unitCount).
		want("==", 0).note("reserves sent after the throttle's answer, answered before its until; %d more arrived from reserves sent before the answer", inFlight)
	if leaks > 0 {
		leakRow = leakRow.note("reserves sent up to %s after the throttle's answer, answered before its until (the other instances have it in force within a NOTIFY's delivery, docs/rates.md); %d more arrived from reserves sent before the answer",
			progress.Duration(lastSent), inFlight)
	}
	r.report.add(leakRow,
		measured("fairness.throttle_leaks_late", fmt.Sprintf("throttled value: chunks handed out in force, reserves sent %s or more after the answer", throttleGrace), float64(late), unitCount).
			want("==", 0).note("past any NOTIFY's delivery"),
		resumeRow,
		measured("fairness.throttle_other", "the other value's chunks meanwhile", float64(others), unitCount).note("random; no target"),
	)
	if late > 0 {
		r.broke("fairness: %d chunks of %s = %s handed out by reserves sent %s or more after its throttle was answered, before its until", late, fairKey, throttleValue, throttleGrace)
	}
	r.say("fairness, throttle: %d chunks of the throttled value handed out in force, %d of the other; served again %s after its until",
		leaks, others, progress.Duration(resume))
	return p.check()
}

func mustInt(s string) int64 {
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return i
}

// Shares of the latency backlog: one rate-limited value most of it (docs/rates.md: a
// reserve reads past the chunks of a value whose bucket is empty), another value, and
// chunks without the key, which no rate limits.
const (
	fairLatencyMain  = 0.90 // company_id 1
	fairLatencySide  = 0.05 // company_id 2
	fairLatencyRound = 3    // rounds, the strategies' order rotating
)

// fairLatency times --samples reserves (max 1, one consumer through instance 0, each
// followed by an untimed complete) of random, rate_limit and weighted_fair on one backlog:
// --fairness-latency-chunks chunks, 90 % of value 1, 5 % of value 2, 5 % without the key.
// They run in fairLatencyRound rounds, the order of the strategies rotating, so that the
// machine's other work weighs on each alike.
func (r *benchRun) fairLatency(ctx context.Context) error {
	n := r.cfg.FairnessLatencyChunks
	c := r.env.clients[0]
	main, side := int64(float64(n)*fairLatencyMain), int64(float64(n)*fairLatencySide)
	var ids []string
	defer func() {
		for _, id := range ids {
			r.discard(ctx, id)
		}
	}()
	for _, s := range []struct {
		n    int64
		meta map[string]wire.MetadataValue
	}{{main, map[string]wire.MetadataValue{fairKey: wire.Int(1)}}, {side, map[string]wire.MetadataValue{fairKey: wire.Int(2)}}, {n - main - side, nil}} {
		created, _, err := r.submitWith(ctx, c, s.n, "fairness latency backlog", s.meta)
		if err != nil {
			return err
		}
		ids = append(ids, created.ID)
	}
	names := []string{"random", rateStrategyText, fairStrategyText}
	reqs := make([]wire.ReserveRequest, len(names))
	for i, text := range names {
		node, err := strategy.ParseAny(text)
		if err != nil {
			return err
		}
		js, err := json.Marshal(node)
		if err != nil {
			return err
		}
		reqs[i] = wire.ReserveRequest{Max: 1, Strategy: js, Lease: "5m", Consumer: "bench-fairness-latency"}
	}
	samples := make([][]time.Duration, len(names))
	per := (r.cfg.Samples + fairLatencyRound - 1) / fairLatencyRound
	roundRatios := make([][]float64, len(names))
	for round := range fairLatencyRound {
		p50 := make([]time.Duration, len(names))
		for k := range names {
			i := (k + round) % len(names)
			got, _, err := r.timeReserves(ctx, c, reqs[i], per, fmt.Sprintf("fairness latency, round %d of %d, %s", round+1, fairLatencyRound, names[i]), nil)
			if err != nil {
				return fmt.Errorf("%s: %w", names[i], err)
			}
			samples[i] = append(samples[i], got...)
			p50[i] = summarize(got).P50
		}
		for i := range names {
			roundRatios[i] = append(roundRatios[i], durationRatio(p50[i], p50[0]))
		}
	}
	random := summarize(samples[0])
	at := fmt.Sprintf("backlog %s (90 %% value 1, 5 %% value 2, 5 %% no key), ", progress.GroupDigits(n))
	for i, name := range names {
		st := summarize(samples[i])
		key := []string{"random", "rate_limit", "weighted_fair"}[i]
		r.report.add(
			measured("fairness.latency_"+key+"_p50", at+name+", reserve p50", inMillis(st.P50), unitMillis),
			measured("fairness.latency_"+key+"_p99", at+name+", reserve p99", inMillis(st.P99), unitMillis).note("no target"),
		)
		if i > 0 {
			r.report.add(measured("fairness.latency_"+key+"_ratio", key+" reserve p50 over random's", durationRatio(st.P50, random.P50), unitRatio).
				want("<=", fairLatencyTarget).note("rounds: %s; one consumer, max 1, through instance 0", joinRatios(roundRatios[i])))
		}
		r.say("fairness latency, %s: reserve p50 %.2f ms, p99 %.2f ms (%d samples)", name, inMillis(st.P50), inMillis(st.P99), st.N)
	}
	return nil
}

// phase is one phase of the fairness workload: consumers reserving with one strategy,
// the submissions of its values, and what the consumers saw.
type phase struct {
	r        *benchRun
	label    string
	strategy json.RawMessage
	topUp    int // chunks a feeder submits of a value running low; 0: no feeder
	start    time.Time

	mu struct {
		sync.Mutex
		recs      []handout
		handed    map[string]int // chunks handed out, by value
		submitted map[string]int // chunks submitted, by value
		ids       []string       // the phase's submissions
	}
	other atomic.Int64 // completions answered other than completed
}

// startPhase makes a phase of the strategy text over values and submits topUp chunks of
// each (none for 0).
func (r *benchRun) startPhase(ctx context.Context, label, text string, values []string, topUp int) (*phase, error) {
	node, err := strategy.ParseAny(text)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	p := &phase{r: r, label: "fairness, " + label, strategy: js, topUp: topUp, start: time.Now()}
	p.mu.handed, p.mu.submitted = map[string]int{}, map[string]int{}
	if topUp > 0 {
		for _, v := range values {
			if err := p.feed(ctx, v, topUp); err != nil {
				p.discard(ctx)
				return nil, err
			}
		}
	}
	p.restart()
	return p, nil
}

// restart starts the phase's clock again.
func (p *phase) restart() { p.start = time.Now() }

// since is the time since the phase's start.
func (p *phase) since() time.Duration { return time.Since(p.start) }

// sleepUntil waits until the phase has run for d.
func (p *phase) sleepUntil(ctx context.Context, d time.Duration) error {
	return clustertest.SleepCtx(ctx, d-p.since())
}

// feed submits n chunks of value through instance 0.
func (p *phase) feed(ctx context.Context, value string, n int) error {
	created, _, err := p.r.submitWith(ctx, p.r.env.clients[0], int64(n), p.label+" backlog of "+value,
		map[string]wire.MetadataValue{fairKey: wire.Int(mustInt(value))})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.ids = append(p.mu.ids, created.ID)
	p.mu.submitted[value] += n
	return nil
}

// discard cancels the phase's submissions.
func (p *phase) discard(ctx context.Context) {
	p.mu.Lock()
	ids := slices.Clone(p.mu.ids)
	p.mu.Unlock()
	for _, id := range ids {
		p.r.discard(ctx, id)
	}
}

// errPhaseDone ends a phase's consumers when its body is done.
var errPhaseDone = errors.New("phase done")

// run runs the consumers, and the feeder when the phase has one, until body returns; then
// the consumers finish the request they are in, and the phase's submissions are cancelled.
func (p *phase) run(body func(ctx context.Context) error) error {
	ctx := context.Background()
	runCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// The consumers' requests end only when the phase failed: on its end each finishes the
	// request it is in (a reserve waits at most fairConsumerWait), as burnDown's do.
	reqCtx, cancelRequests := context.WithCancel(ctx)
	defer cancelRequests()
	context.AfterFunc(runCtx, func() {
		if !errors.Is(context.Cause(runCtx), errPhaseDone) {
			cancelRequests()
		}
	})
	var wg sync.WaitGroup
	for i := range p.r.cfg.Consumers {
		c := p.r.env.clients[i%len(p.r.env.clients)]
		wg.Go(func() {
			if err := p.consume(runCtx, reqCtx, c, fmt.Sprintf("bench-fairness-%d", i)); err != nil {
				cancel(err)
			}
		})
	}
	if p.topUp > 0 {
		wg.Go(func() {
			if err := p.feeder(runCtx, reqCtx); err != nil {
				cancel(err)
			}
		})
	}
	stop := p.r.showProgress(p.describe)
	err := body(runCtx)
	if err == nil {
		cancel(errPhaseDone)
	} else {
		cancel(err)
	}
	wg.Wait()
	stop()
	p.discard(ctx)
	if cause := context.Cause(runCtx); !errors.Is(cause, errPhaseDone) {
		return cause
	}
	return nil
}

// consume reserves one chunk at a time with the phase's strategy and completes it, until
// runCtx ends; each chunk is recorded with the time its reserve was sent and answered.
func (p *phase) consume(runCtx, reqCtx context.Context, c *client.Client, name string) error {
	req := wire.ReserveRequest{Max: 1, Strategy: p.strategy, Lease: fairLease.String(), Wait: fairConsumerWait, Consumer: name}
	for runCtx.Err() == nil {
		sent := p.since()
		chunks, err := c.Reserve(reqCtx, req)
		at := p.since()
		if err != nil {
			if reqCtx.Err() != nil {
				return nil // the phase failed elsewhere
			}
			return fmt.Errorf("%s: reserving: %w", name, err)
		}
		if len(chunks) == 0 {
			continue
		}
		completions := make([]wire.Completion, len(chunks))
		p.mu.Lock()
		for i, ch := range chunks {
			v := ""
			if mv, ok := ch.StrategicMetadata[fairKey]; ok {
				v = mv.String()
			}
			handed := ch.ExpiresAt.Add(-fairLease).Sub(p.start)
			p.mu.recs = append(p.mu.recs, handout{value: v, sent: sent, at: at, handed: handed})
			p.mu.handed[v]++
			completions[i] = wire.Completion{Token: ch.Token, Output: "ok"}
		}
		p.mu.Unlock()
		res, err := c.Complete(reqCtx, completions...)
		if err != nil {
			if reqCtx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: completing: %w", name, err)
		}
		for _, tr := range res {
			if tr.Status != wire.StatusCompleted {
				p.other.Add(1)
			}
		}
	}
	return nil
}

// feeder keeps every value of the phase backlogged until runCtx ends: it submits topUp
// more chunks of a value that has fewer than half that left. Its submissions run on
// reqCtx, as the consumers' requests do: one the phase's end cut short could be
// committed and never cancelled.
func (p *phase) feeder(runCtx, reqCtx context.Context) error {
	t := time.NewTicker(fairFeedInterval)
	defer t.Stop()
	for {
		select {
		case <-runCtx.Done():
			return nil
		case <-t.C:
		}
		p.mu.Lock()
		var low []string
		for v, n := range p.mu.submitted {
			if n-p.mu.handed[v] < p.topUp/2 {
				low = append(low, v)
			}
		}
		p.mu.Unlock()
		slices.Sort(low)
		for _, v := range low {
			if err := p.feed(reqCtx, v, p.topUp); err != nil {
				if reqCtx.Err() != nil {
					return nil // the phase failed elsewhere
				}
				return err
			}
		}
	}
}

// records returns what the consumers saw, in arrival order.
func (p *phase) records() []handout {
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := slices.Clone(p.mu.recs)
	slices.SortStableFunc(recs, func(a, b handout) int { return int(a.at - b.at) })
	return recs
}

// describe is the phase's progress line.
func (p *phase) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(p.mu.handed)) {
		name := v
		if name == "" {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s: %s", name, progress.GroupDigits(int64(p.mu.handed[v]))))
	}
	return fmt.Sprintf("%s, %s: chunks handed out by value: %s", p.label, progress.Duration(p.since()), strings.Join(parts, ", "))
}

// check records as broken what a phase's consumers saw go wrong.
func (p *phase) check() error {
	if o := p.other.Load(); o > 0 {
		p.r.broke("%s: %d completions of chunks just reserved answered other than %q", p.label, o, wire.StatusCompleted)
	}
	return nil
}
