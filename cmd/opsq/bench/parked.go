package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// The parked workload (DESIGN.md §6): many consumers long-poll the instances while there is
// no work, then the work arrives; many producers wait on their submissions while
// consumers complete them.

// Targets of DESIGN.md §6 for parked consumers and waiting producers.
const (
	parkedServedTargetSeconds = 1   // the last parked consumer has its chunk
	parkedCostTargetKB        = 20  // a parked consumer's share of an instance's memory
	producerToldP99TargetMs   = 250 // from a submission's last completion to its producer told
)

// parkedWait is the wait of a parked consumer's reserve and of a producer's status wait.
const parkedWait = 60 * time.Second

// parkedSettle is how long the producers' half lets the instances settle once every status
// wait is sent.
const parkedSettle = 3 * time.Second

// raiseFileLimit raises this process's limit of open files to the hard limit when it is
// below n (one connection per parked request), and returns the limit.
func raiseFileLimit(n uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= n {
		return lim.Cur, nil
	}
	lim.Cur = lim.Max // the instances inherit it: each holds its consumers' connections and its forwards
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// parkedClients returns a client per instance on a transport that keeps a connection per
// request: none of them waits for another's connection. Call the function returned to
// close the connections.
func (r *benchRun) parkedClients(n int) ([]*client.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = n
	tr.MaxConnsPerHost = 0
	hc := &http.Client{Transport: r.env.keys.transport(tr)}
	out := make([]*client.Client, len(r.env.instances))
	for i, inst := range r.env.instances {
		out[i] = client.New(inst.url, client.WithHTTPClient(hc), client.WithUserAgent("opsq-bench"))
	}
	return out, tr.CloseIdleConnections
}

// instancesRSS returns the resident memory of each instance, in KB.
func (r *benchRun) instancesRSS() ([]int64, error) {
	out := make([]int64, len(r.env.instances))
	for i, inst := range r.env.instances {
		kb, err := procStatusKB(inst.cmd.Process.Pid, "VmRSS")
		if err != nil {
			return nil, err
		}
		out[i] = kb
	}
	return out, nil
}

// parked runs both halves of the workload.
func (r *benchRun) parked(ctx context.Context) error {
	need := uint64(max(r.cfg.ParkedConsumers, r.cfg.ParkedProducers)) + 1024
	got, err := raiseFileLimit(need)
	if err != nil {
		return fmt.Errorf("raising the limit of open files: %w", err)
	}
	if got < need {
		r.say("parked: this process may open %d files, fewer than the %d it needs; raise the hard limit (ulimit -Hn)", got, need)
	}
	if err := r.parkedConsumers(ctx); err != nil {
		return err
	}
	return r.waitingProducers(ctx)
}

// parkedConsumers parks --parked-consumers reserves (max 1, wait 60s) on the instances,
// consumer i on instance i % --instances, then submits as many chunks in one submission
// and times until each consumer has one.
func (r *benchRun) parkedConsumers(ctx context.Context) error {
	n := r.cfg.ParkedConsumers
	reservers := make([]*rawReserver, len(r.env.instances))
	for i, inst := range r.env.instances {
		var err error
		if reservers[i], err = newRawReserver(inst.url, r.env.keys[apikeys.Consumer]); err != nil {
			return err
		}
	}
	before, err := r.instancesRSS()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	got := make([]time.Time, n)
	chunks := make([]wire.ReservedChunk, n)
	closers := make([]func(), n) // each consumer's connection, closed once all are timed
	var failures atomic.Int64
	var firstErr atomic.Value
	for i := range n {
		wg.Go(func() {
			res, closeConn, err := reservers[i%len(reservers)].reserve(runCtx, wire.ReserveRequest{
				Max: 1, Strategy: randomStrategy, Lease: "10m", Wait: parkedWait.String(), Consumer: fmt.Sprintf("bench-parked-%d", i)},
				func() { sent.Add(1) })
			switch {
			case err != nil:
				if runCtx.Err() == nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			case len(res) > 0:
				got[i], chunks[i] = time.Now(), res[0]
			}
			closers[i] = closeConn
		})
	}
	stop := r.showProgress(func() string {
		return fmt.Sprintf("parked: %s / %s consumers sent their reserve", progress.GroupDigits(sent.Load()), progress.GroupDigits(int64(n)))
	})
	for sent.Load()+failures.Load() < int64(n) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := ctx.Err(); err != nil {
		return err
	}
	// Sample the memory once every reserve has looked for work and parked: until the
	// instances go quiet, some are still looking (on deeper stacks, queued for a database
	// connection), and their cost is not a parked consumer's.
	quietStart := time.Now()
	quiet, err := r.waitQuiet(ctx, parkedQuietDeadline)
	if err != nil {
		return err
	}
	sampled := fmt.Sprintf("sampled once the instances went quiet, %s after the last reserve was sent", progress.Duration(time.Since(quietStart)))
	if !quiet {
		sampled = fmt.Sprintf("the instances did not go quiet (under %s of CPU a second) within %s: sampled then", parkedQuietCPU, parkedQuietDeadline)
		r.say("parked: %s", sampled)
	}
	after, err := r.instancesRSS()
	if err != nil {
		return err
	}
	if f := failures.Load(); f > 0 {
		r.broke("parked: %d of %d consumers' reserves failed before any work arrived: %v", f, n, firstErr.Load())
	}

	// The work arrives: one submission, spread over every shard.
	start := time.Now()
	created, took, err := r.submit(ctx, r.env.clients[0], int64(n), "parked: the chunks")
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	defer r.discard(ctx, created.ID)
	stop = r.showProgress(func() string {
		served := 0
		for i := range got {
			if !got[i].IsZero() {
				served++
			}
		}
		return fmt.Sprintf("parked: %s / %s consumers served, %s", progress.GroupDigits(int64(served)), progress.GroupDigits(int64(n)), progress.Duration(time.Since(start)))
	})
	wg.Wait()
	stop()
	for _, closeConn := range closers {
		if closeConn != nil {
			closeConn()
		}
	}

	var waits []time.Duration
	seen := map[string]bool{}
	var comps []wire.Completion
	twice := 0
	for i := range got {
		if got[i].IsZero() {
			continue
		}
		waits = append(waits, got[i].Sub(start))
		k := chunks[i].SubmissionID + "/" + fmt.Sprint(chunks[i].ChunkIndex)
		if seen[k] {
			twice++
		}
		seen[k] = true
		comps = append(comps, wire.Completion{Token: chunks[i].Token, Output: "ok"})
	}
	if twice > 0 {
		r.broke("parked: %d chunks handed out to two parked consumers", twice)
	}
	st := summarize(waits)
	unserved := n - len(waits)
	if unserved > 0 {
		free, err := r.sweepFree(ctx, unserved)
		if err != nil {
			return err
		}
		for _, ch := range free {
			comps = append(comps, wire.Completion{Token: ch.Token, Output: "ok"})
		}
		var where []string
		for i := range got {
			if got[i].IsZero() {
				where = append(where, fmt.Sprintf("consumer %d on instance %d", i, i%len(r.env.instances)))
			}
		}
		for _, ch := range free {
			where = append(where, fmt.Sprintf("free chunk %s/%d", ch.SubmissionID, ch.ChunkIndex))
		}
		r.say("parked: unserved: %s", strings.Join(where, "; "))
		r.broke("parked: %d of %d parked consumers got no chunk within their %s wait, with %d chunks submitted (%d reserves failed: %v); "+
			"after the wait %d of those chunks were free (a wake-up was lost), %d reserved but never answered",
			unserved, n, parkedWait, n, failures.Load(), firstErr.Load(), len(free), unserved-len(free))
	}
	perInstance := float64(n) / float64(len(r.env.instances))
	var costs []string
	worst := 0.0
	for i := range before {
		kb := float64(after[i]-before[i]) / perInstance
		worst = max(worst, kb)
		costs = append(costs, fmt.Sprintf("%.1f", kb))
	}
	r.report.add(
		measured("parked.served_last_seconds", fmt.Sprintf("%s parked consumers, %s chunks arrive: the last served", progress.GroupDigits(int64(n)), progress.GroupDigits(int64(n))),
			st.Max.Seconds(), unitSeconds).want("<=", parkedServedTargetSeconds).
			note("from the start of the submission (it took %s)", progress.Duration(took)),
		measured("parked.served_p50", "served, p50", inMillis(st.P50), unitMillis),
		measured("parked.served_p99", "served, p99", inMillis(st.P99), unitMillis),
		measured("parked.cost_kb", "instance memory per parked consumer (worst instance)", worst, "KB").
			want("<=", parkedCostTargetKB).note("RSS delta / parked consumers, per instance: %s KB; %s", strings.Join(costs, ", "), sampled),
	)
	r.say("parked: %s consumers served, the last %s after the submission began (p50 %s, p99 %s); %.1f KB per parked consumer",
		progress.GroupDigits(int64(len(waits))), progress.Duration(st.Max), progress.Duration(st.P50), progress.Duration(st.P99), worst)
	return r.completeAll(ctx, comps)
}

// sweepFree reserves, without waiting, up to n chunks still free on the instances once the
// parked consumers' waits are over: a chunk free then was never handed to the consumer
// parked for it (a wake-up was lost); one that is not was reserved but never answered.
func (r *benchRun) sweepFree(ctx context.Context, n int) ([]wire.ReservedChunk, error) {
	var out []wire.ReservedChunk
	for _, c := range r.env.clients {
		for len(out) < n {
			res, err := c.Reserve(ctx, wire.ReserveRequest{Max: n - len(out), Strategy: randomStrategy, Lease: "10m", Consumer: "bench-parked-sweep"})
			if err != nil {
				return nil, fmt.Errorf("parked: looking for chunks left free: %w", err)
			}
			if len(res) == 0 {
				break
			}
			out = append(out, res...)
		}
	}
	return out, nil
}

// completeAll completes comps, in batches.
func (r *benchRun) completeAll(ctx context.Context, comps []wire.Completion) error {
	for b := range slices.Chunk(comps, 1000) {
		if _, err := r.env.clients[0].Complete(ctx, b...); err != nil {
			return fmt.Errorf("completing: %w", err)
		}
	}
	return nil
}

// waitingProducers makes --parked-producers one-chunk submissions, each producer waiting on
// its own (status ?wait=60s, producer i on instance i % --instances); then consumers
// complete the chunks, and each producer's delay is from the start of the completion of
// its chunk to its status answer.
func (r *benchRun) waitingProducers(ctx context.Context) error {
	n := r.cfg.ParkedProducers
	clients, closeClients := r.parkedClients(n)
	defer closeClients()
	ids := make([]string, n)
	var made atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("producers: %s / %s one-chunk submissions made", progress.GroupDigits(made.Load()), progress.GroupDigits(int64(n)))
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	next := atomic.Int64{}
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				c, err := r.env.clients[i%len(r.env.clients)].Submit(ctx, wire.Submission{
					SubmissionHeader: wire.SubmissionHeader{Metadata: "opsq bench: producer"}, Chunks: []string{"x"}})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = c.ID
				made.Add(1)
			}
		})
	}
	wg.Wait()
	stop()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("submitting: %w", err)
	}
	index := make(map[string]int, n)
	for i, id := range ids {
		index[id] = i
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	told := make([]time.Time, n)
	var sent, failures atomic.Int64
	var firstErr atomic.Value
	var waiters sync.WaitGroup
	for i := range n {
		waiters.Go(func() {
			var once sync.Once
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { sent.Add(1) }) }}
			st, err := clients[i%len(clients)].Status(httptrace.WithClientTrace(runCtx, trace), ids[i], parkedWait)
			switch {
			case err != nil:
				if runCtx.Err() == nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			case st.State == wire.StateCompleted:
				told[i] = time.Now()
			}
		})
	}
	stop = r.showProgress(func() string {
		return fmt.Sprintf("producers: %s / %s waiting on their submission", progress.GroupDigits(sent.Load()), progress.GroupDigits(int64(n)))
	})
	for sent.Load()+failures.Load() < int64(n) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := ctx.Err(); err != nil {
		return err
	}
	settle(ctx, parkedSettle)

	// Consumers complete the chunks; each completion's start is the last completion of its
	// submission.
	completed := make([]time.Time, n)
	var done atomic.Int64
	stop = r.showProgress(func() string {
		return fmt.Sprintf("producers: %s / %s chunks completed", progress.GroupDigits(done.Load()), progress.GroupDigits(int64(n)))
	})
	var consumers sync.WaitGroup
	var consumeErr atomic.Value
	for c := range 16 {
		consumers.Go(func() {
			cl := r.env.clients[c%len(r.env.clients)]
			for done.Load() < int64(n) && ctx.Err() == nil {
				chunks, err := cl.Reserve(ctx, wire.ReserveRequest{Max: 10, Strategy: randomStrategy, Lease: "10m", Wait: "1s"})
				if err != nil {
					consumeErr.CompareAndSwap(nil, err)
					return
				}
				for _, ch := range chunks {
					at := time.Now()
					if _, err := cl.Complete(ctx, wire.Completion{Token: ch.Token, Output: "ok"}); err != nil {
						consumeErr.CompareAndSwap(nil, err)
						return
					}
					if i, ok := index[ch.SubmissionID]; ok {
						completed[i] = at
					}
					done.Add(1)
				}
			}
		})
	}
	consumers.Wait()
	stop()
	if err, _ := consumeErr.Load().(error); err != nil {
		cancel()
		waiters.Wait()
		return fmt.Errorf("consuming: %w", err)
	}
	stop = r.showProgress(func() string { return "producers: waiting for the last status answers" })
	waiters.Wait()
	stop()
	if f := failures.Load(); f > 0 {
		r.broke("producers: %d of %d status waits failed: %v", f, n, firstErr.Load())
	}
	var delays []time.Duration
	untold := 0
	for i := range n {
		if told[i].IsZero() || completed[i].IsZero() {
			untold++
			continue
		}
		delays = append(delays, max(told[i].Sub(completed[i]), 0))
	}
	if untold > 0 {
		r.broke("producers: %d of %d producers were not told their submission completed within %s", untold, n, parkedWait)
	}
	st := summarize(delays)
	r.report.add(
		measured("parked.producer_told_p99", fmt.Sprintf("%s producers waiting: told after the last completion, p99", progress.GroupDigits(int64(n))),
			inMillis(st.P99), unitMillis).want("<=", producerToldP99TargetMs).note("from the start of the completion request"),
		measured("parked.producer_told_p50", "told, p50", inMillis(st.P50), unitMillis),
		measured("parked.producer_told_max", "told, max", inMillis(st.Max), unitMillis),
	)
	r.say("producers: %s told their submission completed, p50 %s, p99 %s, max %s after its completion began",
		progress.GroupDigits(int64(len(delays))), progress.Duration(st.P50), progress.Duration(st.P99), progress.Duration(st.Max))
	return nil
}

// parkedQuietCPU is the CPU time, per second, under which an instance counts as quiet: its
// reserves have all looked for work once and parked.
const parkedQuietCPU = 30 * time.Millisecond

// parkedQuietDeadline bounds the wait for the instances to go quiet, well inside parkedWait.
const parkedQuietDeadline = 30 * time.Second

// waitQuiet waits until every instance used less than parkedQuietCPU over one second, or
// until deadline; it reports whether they went quiet.
func (r *benchRun) waitQuiet(ctx context.Context, deadline time.Duration) (bool, error) {
	end := time.Now().Add(deadline)
	last, err := r.instancesCPU()
	if err != nil {
		return false, err
	}
	for time.Now().Before(end) {
		settle(ctx, time.Second)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		now, err := r.instancesCPU()
		if err != nil {
			return false, err
		}
		quiet := true
		for i := range now {
			quiet = quiet && now[i]-last[i] < parkedQuietCPU
		}
		if quiet {
			return true, nil
		}
		last = now
	}
	return false, nil
}

// instancesCPU returns the CPU time each instance used so far (user and system).
func (r *benchRun) instancesCPU() ([]time.Duration, error) {
	out := make([]time.Duration, len(r.env.instances))
	for i, inst := range r.env.instances {
		d, err := procCPU(inst.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// settle waits d, or until ctx ends.
func settle(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
