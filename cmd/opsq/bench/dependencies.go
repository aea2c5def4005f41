package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// The dependencies workload of "opsq bench", DESIGN.md §6's dependency line: "a chain of 3
// submissions, each after the previous: each starts within 1 s of its parent completing;
// 10⁶ chunks waiting on parents beside a 10⁶-chunk reservable backlog leave reserve p50
// within 1.5× of the backlog alone."

// DependencyConfig is what the dependencies workload measures; Config embeds it.
type DependencyConfig struct {
	// DependencyChains is how many chains of 3 submissions are run, one after the other.
	// Defaults to 5.
	DependencyChains int
	// DependencyBacklog is the reservable backlog the reserves are timed on. Defaults to
	// 1 000 000.
	DependencyBacklog int64
	// DependencyWaiting is how many chunks wait on a parent that never finishes, beside
	// the backlog, when it is timed again. Defaults to 1 000 000.
	DependencyWaiting int64
}

// Defaults of DependencyConfig: DESIGN.md §6's sizes.
const (
	DependencyChainsDefault  = 5
	DependencyBacklogDefault = 1_000_000
	DependencyWaitingDefault = 1_000_000
)

// Targets of DESIGN.md §6's dependency line.
const (
	dependencyStartTargetMs = 1000 // a child reservable within 1 s of its parent completing
	dependencyP50Target     = 1.5  // reserve p50 beside the waiting children over the backlog alone
	// dependencyWait is how long a consumer waits (long-polls) for a child's chunk.
	dependencyWait = 20 * time.Second
	// dependencyMark (strategic metadata bench = …) marks the chains' submissions.
	dependencyMark = "dependencies"
)

// validate checks the dependencies workload's sizes, when it runs.
func (d DependencyConfig) validate(cfg Config) error {
	if !slices.Contains(cfg.Workloads, workloadDependencies) {
		return nil
	}
	need := int64(2 * (cfg.Samples + latencyWarmup))
	switch {
	case d.DependencyChains < 1 || d.DependencyChains > 1000:
		return fmt.Errorf("--dependency-chains %d: want 1 to 1000", d.DependencyChains)
	case d.DependencyWaiting < 1:
		return fmt.Errorf("--dependency-waiting %d: want 1 or more", d.DependencyWaiting)
	case d.DependencyBacklog <= need:
		return fmt.Errorf("--dependency-backlog %d: must be larger than the %d reserves that consume it (2 timings × (--samples %d + %d to warm up))",
			d.DependencyBacklog, need, cfg.Samples, latencyWarmup)
	}
	return nil
}

// dependencies runs both parts: the chains' start delays, then the reserves beside the
// waiting children.
func (r *benchRun) dependencies(ctx context.Context) error {
	if err := r.dependencyChains(ctx); err != nil {
		return err
	}
	return r.dependencyWaiting(ctx)
}

// dependencyChains runs --dependency-chains chains of 3 one-chunk submissions, each after
// the previous, submitted at once through instance 0. A consumer reserves and completes
// the first's chunk; for each link, a consumer of the last instance long-polls a reserve
// before the parent's chunk is completed through instance 0, and the child's start delay
// is from the moment that complete is sent to the moment the long poll is answered with
// the child's chunk. A child's chunk handed out before its parent's complete was sent, or
// shown by a preview before it, is something broken.
func (r *benchRun) dependencyChains(ctx context.Context) error {
	chains := r.cfg.DependencyChains
	c, parked := r.env.clients[0], r.env.clients[len(r.env.clients)-1]
	var delays []time.Duration
	var early int
	start := time.Now()
	stop := r.showProgress(func() string {
		return fmt.Sprintf("dependencies: chain %d of %d, %s", len(delays)/2+1, chains, progress.Duration(time.Since(start)))
	})
	defer stop()
	for range chains {
		ids := make([]string, 3)
		for i := range ids {
			h := wire.SubmissionHeader{Metadata: fmt.Sprintf("opsq bench: dependencies chain, link %d", i+1),
				StrategicMetadata: map[string]wire.MetadataValue{"bench": wire.String(dependencyMark)}}
			if i > 0 {
				h.After = []string{ids[i-1]}
			}
			created, err := c.Submit(ctx, wire.Submission{SubmissionHeader: h, Chunks: []string{fmt.Sprintf("link %d", i+1)}})
			if err != nil {
				return fmt.Errorf("submitting link %d of a chain: %w", i+1, err)
			}
			ids[i] = created.ID
			defer r.discard(ctx, created.ID)
		}
		if st, err := c.Status(ctx, ids[2], 0); err != nil {
			return fmt.Errorf("reading the status of a chain's last link: %w", err)
		} else if !slices.Equal(st.WaitingOn, ids[1:2]) {
			return fmt.Errorf("the chain's last link %s waits on %q; want [%s]: the server ignored after", ids[2], st.WaitingOn, ids[1])
		}
		ch, err := reserveOf(ctx, c, ids[0])
		if err != nil {
			return fmt.Errorf("the chain's first link: %w", err)
		}
		for link := 1; link < 3; link++ {
			d, next, handedEarly, err := r.startDelay(ctx, c, parked, ch, ids[link])
			if err != nil {
				return fmt.Errorf("link %d of a chain: %w", link+1, err)
			}
			if handedEarly {
				early++
			}
			delays = append(delays, d)
			ch = next
		}
		if err := completeOne(ctx, c, ch); err != nil {
			return fmt.Errorf("the chain's last link: %w", err)
		}
	}
	stop()
	if early > 0 {
		r.broke("dependencies: %d children handed out (or previewed) before their parent's chunk was completed", early)
	}
	st := summarize(delays)
	at := fmt.Sprintf("%d chains of 3 one-chunk submissions, each after the previous: ", chains)
	r.report.add(
		measured("dependencies.start_delay_p50", at+"child start delay p50", inMillis(st.P50), unitMillis).
			note("from the parent's last complete sent (instance 0) to a long-polling reserve (instance %d) answered with the child's chunk; %d links",
				len(r.env.clients)-1, st.N),
		measured("dependencies.start_delay_max", at+"child start delay max", inMillis(st.Max), unitMillis).want("<=", dependencyStartTargetMs).
			note("each within 1 s"),
		measured("dependencies.started_early", at+"children handed out or previewed before their parent completed", float64(early), unitCount).want("==", 0),
	)
	r.say("dependencies: %d chains of 3: child start delay p50 %.1f ms, max %.1f ms (%d links)", chains, inMillis(st.P50), inMillis(st.Max), st.N)
	return nil
}

// startDelay completes the parent's chunk ch through c while a consumer of parked
// long-polls a reserve, and returns how long after the complete was sent the reserve was
// answered with a chunk of child, that chunk, and whether the child's chunk was handed out
// (or previewed) before the complete.
func (r *benchRun) startDelay(ctx context.Context, c, parked *client.Client, ch wire.ReservedChunk, child string) (time.Duration, wire.ReservedChunk, bool, error) {
	type answer struct {
		chunks []wire.ReservedChunk
		at     time.Time
		err    error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan answer, 1)
	go func() {
		chunks, err := parked.Reserve(ctx, wire.ReserveRequest{Max: 1, Strategy: randomStrategy, Lease: "5m",
			Wait: dependencyWait.String(), Consumer: "bench-dependencies-parked"})
		done <- answer{chunks, time.Now(), err}
	}()
	early := false
	preview, err := c.Preview(ctx, wire.ReserveRequest{Max: 10, Strategy: randomStrategy})
	if err != nil {
		return 0, ch, false, fmt.Errorf("previewing before the parent's complete: %w", err)
	}
	for _, p := range preview {
		early = early || p.SubmissionID == child
	}
	sent := time.Now()
	if err := completeOne(ctx, c, ch); err != nil {
		return 0, ch, false, fmt.Errorf("completing the parent: %w", err)
	}
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		return 0, ch, false, ctx.Err()
	}
	switch {
	case a.err != nil:
		return 0, ch, false, fmt.Errorf("the parked reserve: %w", a.err)
	case len(a.chunks) != 1:
		return 0, ch, false, fmt.Errorf("no chunk of child %s handed out within %s of its parent's complete", child, dependencyWait)
	case a.chunks[0].SubmissionID != child:
		return 0, ch, false, fmt.Errorf("the parked reserve got a chunk of submission %s, not of child %s: the queue is not empty", a.chunks[0].SubmissionID, child)
	}
	d, early := linkStart(sent, a.at, early)
	return d, a.chunks[0], early, nil
}

// linkStart judges one link of a chain: the child's start delay, from its parent's last
// complete sent to its chunk handed out (answered), and whether it started too early:
// handed out before that complete was sent, or previewed before it.
func linkStart(sent, answered time.Time, previewed bool) (time.Duration, bool) {
	return answered.Sub(sent), previewed || answered.Before(sent)
}

// reserveOf reserves one chunk through c, waiting for it, and checks that it is of
// submission id.
func reserveOf(ctx context.Context, c *client.Client, id string) (wire.ReservedChunk, error) {
	chunks, err := c.Reserve(ctx, wire.ReserveRequest{Max: 1, Strategy: randomStrategy, Lease: "5m", Wait: dependencyWait.String(),
		Consumer: "bench-dependencies"})
	switch {
	case err != nil:
		return wire.ReservedChunk{}, fmt.Errorf("reserving: %w", err)
	case len(chunks) != 1:
		return wire.ReservedChunk{}, fmt.Errorf("no chunk of submission %s handed out within %s", id, dependencyWait)
	case chunks[0].SubmissionID != id:
		return wire.ReservedChunk{}, fmt.Errorf("reserved a chunk of submission %s, not of %s: the queue is not empty", chunks[0].SubmissionID, id)
	}
	return chunks[0], nil
}

// completeOne completes ch through c.
func completeOne(ctx context.Context, c *client.Client, ch wire.ReservedChunk) error {
	res, err := c.Complete(ctx, wire.Completion{Token: ch.Token, Output: "ok"})
	if err != nil {
		return err
	}
	if res[0].Status != wire.StatusCompleted {
		return fmt.Errorf("completing chunk %d of submission %s: status %q; want %q", ch.ChunkIndex, ch.SubmissionID, res[0].Status, wire.StatusCompleted)
	}
	return nil
}

// dependencyWaiting times --samples reserves (max 1, random) on a --dependency-backlog
// backlog alone, then adds a parent that never finishes (one chunk, not_before a day
// ahead) and a child after it of --dependency-waiting chunks, and times the backlog again
// beside them, as the latency workload does (timeReserves). A chunk of the child handed
// out is something broken.
func (r *benchRun) dependencyWaiting(ctx context.Context) error {
	n, w := r.cfg.DependencyBacklog, r.cfg.DependencyWaiting
	c := r.env.clients[0]
	label := "dependencies: backlog " + progress.GroupDigits(n)
	backlog, _, err := r.submitWith(ctx, c, n, label, latencyMetadata)
	if err != nil {
		return err
	}
	defer r.discard(ctx, backlog.ID)
	req := wire.ReserveRequest{Max: 1, Strategy: randomStrategy, Lease: "5m", Consumer: "bench-dependencies"}
	alone, _, err := r.timeReserves(ctx, c, req, r.cfg.Samples, label+" alone", nil)
	if err != nil {
		return fmt.Errorf("%s alone: %w", label, err)
	}

	parent, err := c.Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
		Metadata: "opsq bench: dependencies, a parent that never finishes", NotBefore: waitingNotBeforeFor}, Chunks: []string{"parent"}})
	if err != nil {
		return fmt.Errorf("submitting the parent: %w", err)
	}
	defer r.discard(ctx, parent.ID)
	childLabel := fmt.Sprintf("dependencies: %s chunks after a parent that never finishes", progress.GroupDigits(w))
	startChild := time.Now()
	child, _, err := r.submitHeader(ctx, c, w, childLabel, wire.SubmissionHeader{After: []string{parent.ID}, StrategicMetadata: latencyMetadata})
	if err != nil {
		return err
	}
	defer r.discard(ctx, child.ID)
	r.say("%s: submitted in %s", childLabel, progress.Duration(time.Since(startChild)))
	if st, err := c.Status(ctx, child.ID, 0); err != nil {
		return fmt.Errorf("reading the child's status: %w", err)
	} else if !slices.Equal(st.WaitingOn, []string{parent.ID}) {
		return fmt.Errorf("the child %s waits on %q; want [%s]: the server ignored after", child.ID, st.WaitingOn, parent.ID)
	}
	var seen int64
	beside, _, err := r.timeReserves(ctx, c, req, r.cfg.Samples, fmt.Sprintf("%s beside %s waiting", label, progress.GroupDigits(w)),
		func(ch wire.ReservedChunk) {
			if ch.SubmissionID == child.ID || ch.SubmissionID == parent.ID {
				seen++
			}
		})
	if err != nil {
		return fmt.Errorf("%s beside the waiting chunks: %w", label, err)
	}
	a, b := summarize(alone), summarize(beside)
	at := fmt.Sprintf("backlog %s, ", progress.GroupDigits(n))
	atBeside := fmt.Sprintf("backlog %s beside %s chunks waiting on a parent, ", progress.GroupDigits(n), progress.GroupDigits(w))
	ratio := measured("dependencies.waiting_p50_ratio", atBeside+"reserve p50 over the backlog alone", durationRatio(b.P50, a.P50), unitRatio).
		want("<=", dependencyP50Target)
	if n != DependencyBacklogDefault || w != DependencyWaitingDefault {
		ratio = ratio.note("the target is for %s beside %s", progress.GroupDigits(DependencyBacklogDefault), progress.GroupDigits(DependencyWaitingDefault))
	}
	r.report.add(
		measured("dependencies.alone.reserve_p50", at+"alone, reserve p50", inMillis(a.P50), unitMillis).note("%d samples, max 1, random", a.N),
		measured("dependencies.alone.reserve_p99", at+"alone, reserve p99", inMillis(a.P99), unitMillis),
		measured("dependencies.waiting.reserve_p50", atBeside+"reserve p50", inMillis(b.P50), unitMillis).
			note("timed after the alone samples, on the same backlog"),
		measured("dependencies.waiting.reserve_p99", atBeside+"reserve p99", inMillis(b.P99), unitMillis),
		ratio,
		measured("dependencies.waiting_p99_ratio", atBeside+"reserve p99 over the backlog alone", durationRatio(b.P99, a.P99), unitRatio).note("no target"),
		measured("dependencies.waiting_handed_out", atBeside+"chunks of the waiting child (or its parent) handed out", float64(seen), unitCount).want("==", 0),
	)
	if seen > 0 {
		r.broke("dependencies: %d chunks of a child whose parent never finishes (or of the parent, not_before a day ahead) handed out", seen)
	}
	r.say("dependencies: backlog %s alone reserve p50 %.2f ms; beside %s waiting %.2f ms (%.2f×); %d of the waiting handed out",
		progress.GroupDigits(n), inMillis(a.P50), progress.GroupDigits(w), inMillis(b.P50), durationRatio(b.P50, a.P50), seen)
	return nil
}
