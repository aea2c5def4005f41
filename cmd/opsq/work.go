package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
	"opsq/strategy"
)

// This file is "opsq work": a consumer that runs a command once per reserved chunk.

// Defaults and bounds of "opsq work". The bounds are the server's (client's bounds.go),
// checked here too so that a typo is a usage error rather than a 400 at the first reserve.
const (
	workLeaseDefault     = wire.LeaseDefault
	workWaitDefault      = 20 * time.Second
	workMaxOutputDefault = 1 << 20
	// workConcurrencyMax: a worker reserves up to its free slots at once.
	workConcurrencyMax = wire.MaxReserveChunks

	// stderrTailMax is how much of the end of a failed command's stderr becomes the error.
	stderrTailMax = 4 << 10
	// stderrLineMax bounds the part of a line of stderr that --throttle-on-stderr is matched
	// against: a longer line is matched on its first stderrLineMax bytes.
	stderrLineMax = 4 << 10
	// callTimeout bounds a complete, fail or extend call, and what a reserve call may take
	// beyond its wait.
	callTimeout = 30 * time.Second
	// reserveGapMin keeps the reserve loop from spinning when the server answers at once
	// with nothing (--wait 0).
	reserveGapMin = time.Second
	// killGrace is how long a command has to exit after SIGTERM before it gets SIGKILL.
	killGrace = 5 * time.Second
	// pipeGrace is how long Wait waits, after the command exits, for processes it started
	// to close its stdout and stderr.
	pipeGrace = 10 * time.Second
)

// workOptions is what the flags and arguments of "opsq work" ask for.
type workOptions struct {
	url         string
	key         string
	command     []string
	concurrency int
	strategy    json.RawMessage // nil: the server's default
	lease       time.Duration
	wait        time.Duration
	// stopGrace is how long the running commands may go on once the worker is asked to
	// stop; a second stop ends them at once.
	stopGrace time.Duration
	consumer  string
	once      bool
	maxOutput int64
	// retryAfterExit are the exit statuses that mean "retry later": the chunk fails with
	// retryAfter as its retry_after.
	retryAfterExit map[int]bool
	retryAfter     time.Duration
	// throttleOnExit are the exit statuses that mean "this value is being refused
	// downstream": the worker throttles the chunk's submission's value of throttleKey for
	// throttleFor (POST /v1/throttle), then fails the chunk as any non-zero exit does.
	throttleOnExit map[int]bool
	// throttleOnStderr, when not nil, is the expression a line of the command's stderr
	// that means the same matches: the worker throttles as for throttleOnExit, and the
	// chunk fails whatever the command's exit status.
	throttleOnStderr *regexp.Regexp
	throttleKey      string
	throttleFor      time.Duration
}

// parseWorkArgs parses the arguments of "opsq work".
func parseWorkArgs(args []string, stderr io.Writer) (workOptions, error) {
	fs := newClientFlags("work", "-- COMMAND [ARGS...]", `Consume chunks: run COMMAND once per reserved chunk, with the chunk's input on stdin
(object-storage mode: nothing on stdin, and OPSQ_CHUNK_PREFIX set), and the environment
variables OPSQ_SUBMISSION_ID, OPSQ_CHUNK_INDEX, OPSQ_RETRIES and OPSQ_METADATA (and
TRACEPARENT, the W3C traceparent the submission was sent with, when it was, which the
worker also sends with the chunk's extends and its complete or fail). What the
command writes to stdout, exactly, becomes the chunk's output. A command that exits with a
non-zero status, or cannot start, fails the chunk (one attempt; the chunk is retried while
its submission's max_retries allows), with the end of its stderr as the error.

A command that exits with a status given to --retry-after-exit (say 75, EX_TEMPFAIL, when
a downstream said "slow down") fails the chunk with a retry_after of --retry-after: the
chunk waits that long before it is handed out again, instead of its submission's backoff.

A command that exits with a status given to --throttle-on-exit throttles, cluster-wide,
the value its chunk's submission has for --throttle-key (a strategic metadata key, or
@tenant) for --throttle-for: no chunk with that value is handed out by any instance until
then (POST /v1/throttle). The chunk itself fails as any non-zero exit does. A chunk whose
submission has no such key throttles nothing. --throttle-on-stderr does the same when a
line the command writes to stderr matches its regular expression (RE2 syntax, matched
against each line's first 4 KiB, at once: the throttle is set while the command still
runs), and fails the chunk even if the command then exits with status 0. A chunk
throttles once, however many of its lines match.

While a command runs, its lease is extended every third of --lease; if the chunk went
elsewhere meanwhile (its submission cancelled or failed, its shard lost), the command is
killed and its output dropped, and the worker says which. On SIGINT (Ctrl-C) or SIGTERM the
worker reserves nothing more and lets the running commands finish for up to --stop-grace
(default: --lease), then kills the rest and fails their chunks ("worker stopped", retried
elsewhere), and exits with status 0. A second SIGINT or SIGTERM does that at once.

Put "--" before COMMAND when COMMAND or its arguments start with "-".`, stderr)
	o := workOptions{maxOutput: workMaxOutputDefault}
	fs.IntVar(&o.concurrency, "concurrency", 1, "run up to `N` commands at once")
	strategyFlag := fs.String("strategy", "", "the `strategy` that picks chunks, in the text form such as 'or_else(select_only(mode=preview, random), random)' or the JSON form (default: random)")
	fs.DurationVar(&o.lease, "lease", workLeaseDefault, "lease of each reservation, extended while the command runs (1s to 24h)")
	fs.DurationVar(&o.stopGrace, "stop-grace", 0, "how long the running commands may go on after a first SIGINT or SIGTERM (0s to --lease; default --lease); a second one stops them at once")
	fs.DurationVar(&o.wait, "wait", workWaitDefault, "how long each reserve waits for work to appear (at most 60s)")
	fs.StringVar(&o.consumer, "consumer", "", "`name` of this worker in the server's records (default HOSTNAME/pid-PID)")
	fs.BoolVar(&o.once, "once", false, "exit once a reserve finds no work after its wait and no command is running, instead of waiting for more")
	maxOutput := byteSize(o.maxOutput)
	fs.Var(&maxOutput, "max-output", "largest output in `bytes` (such as 1048576 or 1MiB); a command that writes more fails its chunk")
	fs.Func("retry-after-exit", "an exit `status` (1 to 255, repeatable) that means \"retry later\": the chunk fails with --retry-after as its retry_after", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 255 {
			return errors.New("want an exit status from 1 to 255")
		}
		if o.retryAfterExit == nil {
			o.retryAfterExit = map[int]bool{}
		}
		o.retryAfterExit[n] = true
		return nil
	})
	fs.Func("throttle-on-exit", "an exit `status` (1 to 255, repeatable) that throttles the chunk's value of --throttle-key for --throttle-for, cluster-wide", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 255 {
			return errors.New("want an exit status from 1 to 255")
		}
		if o.throttleOnExit == nil {
			o.throttleOnExit = map[int]bool{}
		}
		o.throttleOnExit[n] = true
		return nil
	})
	fs.Func("throttle-on-stderr", "a regular `expression` (RE2): a line of the command's stderr that matches it throttles the chunk's value of --throttle-key for --throttle-for, cluster-wide, and fails the chunk", func(v string) error {
		if o.throttleOnStderr != nil {
			return errors.New("given twice: join the expressions with |")
		}
		re, err := regexp.Compile(v)
		if err != nil {
			return err
		}
		o.throttleOnStderr = re
		return nil
	})
	fs.StringVar(&o.throttleKey, "throttle-key", "", "with --throttle-on-exit or --throttle-on-stderr, the strategic metadata `key` (or @tenant) whose value is throttled")
	fs.DurationVar(&o.throttleFor, "throttle-for", 0, "with --throttle-on-exit or --throttle-on-stderr, how long the value is throttled (1s to 1h)")
	fs.DurationVar(&o.retryAfter, "retry-after", 0, "with --retry-after-exit, how long the chunk waits before it is handed out again (more than 0s, at most 24h)")
	pos, err := fs.parse(args, 1, math.MaxInt)
	if err != nil {
		return o, err
	}
	o.url, o.key, o.command, o.maxOutput = fs.url, fs.key, pos, int64(maxOutput)
	if o.strategy, err = strategyJSON(*strategyFlag); err != nil {
		return o, fs.usageError("invalid --strategy: %v", err)
	}
	switch {
	case o.concurrency < 1 || o.concurrency > workConcurrencyMax:
		return o, fs.usageError("--concurrency %d: want 1 to %d", o.concurrency, workConcurrencyMax)
	case o.lease < wire.MinLease || o.lease > wire.MaxLease:
		return o, fs.usageError("--lease %s: want %s to %s", o.lease, wire.MinLease, wire.MaxLease)
	case o.stopGrace < 0 || o.stopGrace > o.lease:
		return o, fs.usageError("--stop-grace %s: want 0s to --lease (%s): a command past its lease has lost its chunk anyway", o.stopGrace, o.lease)
	case o.wait < 0 || o.wait > wire.MaxWait:
		return o, fs.usageError("--wait %s: want 0 to %s", o.wait, wire.MaxWait)
	case len(o.retryAfterExit) > 0 && o.retryAfter == 0:
		return o, fs.usageError("--retry-after-exit needs --retry-after, the time such a chunk waits (such as 30s)")
	case len(o.retryAfterExit) == 0 && o.retryAfter != 0:
		return o, fs.usageError("--retry-after goes with --retry-after-exit, the exit status that asks for it")
	case o.retryAfter < 0 || o.retryAfter > wire.MaxBackoff:
		return o, fs.usageError("--retry-after %s: want more than 0s, at most %s", o.retryAfter, wire.MaxBackoff)
	case len(o.throttleOnExit) > 0 && (o.throttleKey == "" || o.throttleFor == 0):
		return o, fs.usageError("--throttle-on-exit needs --throttle-key, the key whose value is throttled, and --throttle-for, how long (such as 30s)")
	case o.throttleOnStderr != nil && (o.throttleKey == "" || o.throttleFor == 0):
		return o, fs.usageError("--throttle-on-stderr needs --throttle-key, the key whose value is throttled, and --throttle-for, how long (such as 30s)")
	case len(o.throttleOnExit) == 0 && o.throttleOnStderr == nil && (o.throttleKey != "" || o.throttleFor != 0):
		return o, fs.usageError("--throttle-key and --throttle-for go with --throttle-on-exit or --throttle-on-stderr, the exit status or the stderr line that asks for a throttle")
	case o.throttleFor != 0 && (o.throttleFor < wire.MinThrottle || o.throttleFor > wire.MaxThrottle):
		return o, fs.usageError("--throttle-for %s: want %s to %s", o.throttleFor, wire.MinThrottle, wire.MaxThrottle)
	}
	if _, err := exec.LookPath(o.command[0]); err != nil {
		// Caught here, since a worker whose every command fails to start would burn the
		// attempts of every chunk it reserves.
		return o, fs.usageError("cannot run %q: %v", o.command[0], err)
	}
	graceSet := false
	fs.Visit(func(f *flag.Flag) { graceSet = graceSet || f.Name == "stop-grace" })
	if !graceSet {
		o.stopGrace = o.lease
	}
	if o.consumer == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		o.consumer = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
	}
	return o, nil
}

// strategyJSON turns the --strategy flag, in the text form such as
// or_else(select_only(mode=preview, random), random) or the JSON form, into the JSON the
// server takes, checked first so that a typo is reported before any chunk is reserved;
// nil stands for the server's default.
func strategyJSON(s string) (json.RawMessage, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	n, err := strategy.ParseAny(s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(n)
}

func runWork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseWorkArgs(args, stderr)
	if err != nil {
		return err
	}
	w := newWorker(o, newClient(o.url, o.key), stderr)
	// The first SIGINT or SIGTERM cancels ctx (main's signal.NotifyContext); this channel
	// hears it too, and the second one stops the running commands at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case <-sigs:
			case <-w.stopped:
				return
			}
		}
		w.stopNow()
	}()
	return w.run(ctx)
}

// worker reserves chunks and runs a command for each. Its goroutines live for the duration
// of run. The counters may be read from any goroutine.
//
// One loop reserves for all the slots: it waits for a free slot, then asks for as many
// chunks as there are free slots, and starts one goroutine per chunk. Compared with N
// goroutines each reserving one chunk, a worker keeps one long-poll open instead of N, a
// burst of work is taken in one request, and a chunk is reserved only when a slot is free
// to run it at once, so no lease runs down while its chunk waits for a slot.
type worker struct {
	opts    workOptions
	c       *client.Client
	display *workDisplay

	slots    chan struct{} // one token per running command (or per slot being reserved for)
	stopping chan struct{} // closed when the worker stops reserving
	aborting chan struct{} // closed by stopNow: the running commands are killed at once
	abort    sync.Once
	stopped  chan struct{} // closed when run returns

	done, failed, lost, running atomic.Int64
}

func newWorker(o workOptions, c *client.Client, stderr io.Writer) *worker {
	return &worker{
		opts: o, c: c, display: &workDisplay{line: progress.NewLine(stderr)},
		slots: make(chan struct{}, o.concurrency), stopping: make(chan struct{}),
		aborting: make(chan struct{}), stopped: make(chan struct{}),
	}
}

// stopNow kills the running commands at once and fails their chunks, which are handed out
// again elsewhere (a second signal). Safe to call more than once.
func (w *worker) stopNow() {
	w.abort.Do(func() {
		if n := w.running.Load(); n > 0 {
			w.display.note("stopping now: killing %d running command(s); their chunks are failed and handed out again elsewhere", n)
		}
		close(w.aborting)
	})
}

// run reserves and runs chunks until ctx is cancelled (or, with --once, until there is no
// more work), then lets the running commands finish, and returns. It returns an error only
// when the server refuses the reserve requests (a bad --strategy, say).
func (w *worker) run(ctx context.Context) error {
	defer close(w.stopped)
	start := time.Now()
	quit, shown := make(chan struct{}), make(chan struct{})
	go w.showProgress(quit, shown)

	var jobs sync.WaitGroup
	err := w.reserveLoop(ctx, &jobs)
	close(w.stopping)
	if n := w.running.Load(); n > 0 {
		w.display.note("stopping: waiting for %d running command(s), for up to %s (--stop-grace); then they are killed and their chunks failed. Press Ctrl-C again to stop them now", n, w.opts.stopGrace)
	}
	jobs.Wait()
	close(quit)
	<-shown
	w.display.note("stopped after %s: %s", progress.Duration(time.Since(start)), w.counts())
	return err
}

// reserveLoop reserves chunks while slots are free and starts a job for each.
func (w *worker) reserveLoop(ctx context.Context, jobs *sync.WaitGroup) error {
	failures := 0
	for {
		// Take a free slot, waiting for one, then every other free slot.
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < cap(w.slots) {
			select {
			case w.slots <- struct{}{}:
				n++
			default:
				break more
			}
		}

		asked := time.Now()
		unsettled := w.failed.Load() + w.lost.Load()
		chunks, err := w.reserve(ctx, n)
		for range n - len(chunks) {
			<-w.slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !transient(ctx, err) {
				return explainConsumerAPI(err, w.opts.url)
			}
			backoff := min(time.Second<<min(failures, 5), 10*time.Second)
			failures++
			w.display.note("reserve failed (%v); retrying in %s", explain(err, w.opts.url, ""), backoff)
			if sleep(ctx, backoff) != nil {
				return nil
			}
			continue
		}
		if failures > 0 {
			w.display.note("reserve works again")
			failures = 0
		}
		for i, ch := range chunks {
			if i >= n {
				w.slots <- struct{}{} // more than asked for: wait for a slot rather than overrun them
			}
			w.running.Add(1)
			jobs.Go(func() {
				defer func() { <-w.slots }()
				defer w.running.Add(-1)
				w.process(ch)
			})
		}
		if len(chunks) == 0 {
			// --once: the reserve waited its whole wait and found nothing; stop when no
			// command runs and none that ended meanwhile may bring its chunk back (a failed
			// attempt retried, a chunk lost). A command that was still running when the
			// reserve began does not call for another whole wait (2 × --wait after the
			// last chunk at --concurrency > 1): it either completed its chunk, or it is
			// counted here. Counters are updated before running is decremented.
			if w.opts.once && w.running.Load() == 0 && w.failed.Load()+w.lost.Load() == unsettled {
				return nil
			}
			if sleep(ctx, reserveGapMin-time.Since(asked)) != nil {
				return nil
			}
		}
	}
}

// explainConsumerAPI is explain for the consumer and cluster endpoints, where a 404 means
// that the server lacks the route rather than that an id is unknown.
func explainConsumerAPI(err error, baseURL string) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w; is --url (%s) the address of opsq, of a version with the consumer API?", err, baseURL)
	}
	return explain(err, baseURL, "")
}

// reserve asks for up to n chunks, long-polling for --wait.
func (w *worker) reserve(ctx context.Context, n int) ([]wire.ReservedChunk, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.wait+callTimeout)
	defer cancel()
	return w.c.Reserve(ctx, wire.ReserveRequest{
		Max: n, Strategy: w.opts.strategy, Lease: w.opts.lease.String(), Wait: w.opts.wait.String(), Consumer: w.opts.consumer,
	})
}

// workerStopped is why a command is killed when the worker stops before it finishes.
const workerStopped = "worker stopped"

// workerStoppedNow is why a command is killed when the worker is asked to stop twice.
const workerStoppedNow = "worker stopped at once"

// outcome is what became of a chunk's command.
type outcome struct {
	output     string
	failure    string        // not empty: the chunk failed with this error
	retryAfter time.Duration // with failure: the retry_after to fail it with; 0 for none
	gone       string        // not empty: the chunk went elsewhere (why); report nothing
}

// process runs the command of one chunk and reports the outcome. It takes no ctx: once
// reserved, a chunk is seen through to its report even after the worker is told to stop.
func (w *worker) process(ch wire.ReservedChunk) {
	out := w.execute(ch)
	switch {
	case out.gone != "":
		w.lost.Add(1)
		w.display.note("chunk %s/%d: %s; the command was killed and its output dropped", ch.SubmissionID, ch.ChunkIndex, out.gone)
	case out.failure != "":
		w.report(ch, "", out.failure, out.retryAfter)
	default:
		w.report(ch, out.output, "", 0)
	}
}

// execute runs the command for ch, extending the lease while it runs.
func (w *worker) execute(ch wire.ReservedChunk) outcome {
	cmd := exec.Command(w.opts.command[0], w.opts.command[1:]...)
	cmd.Env = chunkEnv(os.Environ(), ch)
	if ch.Input != nil {
		cmd.Stdin = strings.NewReader(*ch.Input)
	}
	stdout := &capWriter{max: w.opts.maxOutput}
	stderr := &tailWriter{max: stderrTailMax}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	var lines *lineMatcher // --throttle-on-stderr
	var matched <-chan struct{}
	if w.opts.throttleOnStderr != nil {
		lines = newLineMatcher(w.opts.throttleOnStderr, stderr)
		cmd.Stderr, matched = lines, lines.hit
	}
	// Its own process group: a Ctrl-C at the terminal reaches the worker only, which lets
	// the command finish, and a kill reaches whatever the command started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		return outcome{failure: "cannot start the command: " + err.Error()}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	extend := time.NewTicker(w.opts.lease / 3)
	defer extend.Stop()
	stopping, aborting := w.stopping, w.aborting
	var deadline, hardKill <-chan time.Time
	var killed string // why the command was killed
	throttled := false
	throttle := func() { // once per chunk, whatever asked for it
		if !throttled {
			throttled = true
			w.throttle(ch)
		}
	}
	kill := func(why string, sig syscall.Signal) {
		if killed == "" {
			killed = why
		}
		_ = syscall.Kill(-cmd.Process.Pid, sig)
		if sig == syscall.SIGTERM {
			hardKill = time.After(killGrace)
		}
	}
	for {
		select {
		case err := <-exited:
			switch {
			case killed == workerStopped:
				return outcome{failure: fmt.Sprintf("%s: the command did not finish within --stop-grace %s of the worker's shutdown", workerStopped, w.opts.stopGrace)}
			case killed == workerStoppedNow:
				return outcome{failure: workerStoppedNow + ": the worker was asked to stop a second time"}
			case killed != "":
				return outcome{gone: killed}
			}
			out := commandOutcome(err, stdout, stderr.String(), w.opts.maxOutput)
			if lines != nil {
				if line, ok := lines.end(); ok {
					// Throttled already, unless the line was the last and had no newline.
					throttle()
					if out.failure == "" {
						out = outcome{failure: "a line of stderr matched --throttle-on-stderr: " + oneLine(line, 300)}
					}
				}
			}
			if out.failure != "" && !stdout.overflow && w.opts.throttleOnExit[cmd.ProcessState.ExitCode()] {
				throttle()
			}
			if out.failure != "" && !stdout.overflow && w.opts.retryAfterExit[cmd.ProcessState.ExitCode()] {
				out.retryAfter = w.opts.retryAfter
				out.failure = fmt.Sprintf("retry after %s: %s", w.opts.retryAfter, out.failure)
			}
			return out
		case <-matched:
			matched = nil
			throttle() // now: the command may run on for a while
		case <-extend.C:
			if killed != "" {
				continue
			}
			if gone := w.extend(ch); gone != "" {
				kill(gone, syscall.SIGTERM)
			}
		case <-stopping:
			stopping, deadline = nil, time.After(w.opts.stopGrace)
		case <-deadline:
			kill(workerStopped, syscall.SIGTERM)
		case <-aborting:
			aborting = nil
			kill(workerStoppedNow, syscall.SIGTERM)
		case <-hardKill:
			kill(killed, syscall.SIGKILL)
		}
	}
}

// throttle throttles the value ch's submission has for --throttle-key, for --throttle-for,
// and says so; a submission without the key throttles nothing.
func (w *worker) throttle(ch wire.ReservedChunk) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, ok := ch.StrategicMetadata[w.opts.throttleKey]
	if w.opts.throttleKey == wire.TenantKey {
		s, err := w.c.Status(ctx, ch.SubmissionID, 0)
		if err != nil {
			w.display.note("chunk %s/%d: reading its tenant to throttle it failed: %v", ch.SubmissionID, ch.ChunkIndex, explain(err, w.opts.url, ""))
			return
		}
		v, ok = wire.String(s.Tenant), true
	}
	if !ok {
		w.display.note("chunk %s/%d: its submission has no %s to throttle", ch.SubmissionID, ch.ChunkIndex, w.opts.throttleKey)
		return
	}
	until, err := w.c.Throttle(ctx, w.opts.throttleKey, v, w.opts.throttleFor)
	if err != nil {
		w.display.note("chunk %s/%d: throttling %s = %s failed: %v", ch.SubmissionID, ch.ChunkIndex, w.opts.throttleKey, v, explain(err, w.opts.url, ""))
		return
	}
	w.display.note("chunk %s/%d: %s = %s throttled until %s", ch.SubmissionID, ch.ChunkIndex, w.opts.throttleKey, v, until.Local().Format(time.TimeOnly))
}

// extend extends the lease of ch. It returns why the chunk is no longer ours, or "" when
// it still is (or when the server could not be asked: the next tick tries again).
func (w *worker) extend(ch wire.ReservedChunk) string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ctx = client.ContextWithTraceparent(ctx, ch.Traceparent) // the instance's span joins the chunk's trace
	results, err := w.c.Extend(ctx, w.opts.lease.String(), ch.Token)
	switch {
	case err != nil:
		w.display.note("chunk %s/%d: extending the lease failed (%v); trying again in %s", ch.SubmissionID, ch.ChunkIndex, explain(err, w.opts.url, ""), w.opts.lease/3)
		return ""
	case len(results) != 1:
		w.display.note("chunk %s/%d: extending the lease: got %d results; want 1", ch.SubmissionID, ch.ChunkIndex, len(results))
		return ""
	case results[0].Status == wire.StatusExtended:
		return ""
	}
	return w.whyGone(ch, "extending the lease answered "+string(results[0].Status))
}

// whyGone says why ch is no longer the worker's, the server having answered so: its
// submission failed or was cancelled, or else the chunk went elsewhere (its lease ran out,
// its shard changed owner, another consumer finished it).
func (w *worker) whyGone(ch wire.ReservedChunk, answered string) string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if s, err := w.c.Status(ctx, ch.SubmissionID, 0); err == nil {
		if why := submissionEnded(s); why != "" {
			return why
		}
	}
	return answered + "; the chunk went elsewhere"
}

// submissionEnded says how s ended, when it failed or was cancelled; "" otherwise.
func submissionEnded(s wire.Status) string {
	switch s.State {
	case wire.StateFailed:
		why := ""
		if s.Failure != nil {
			f := *s.Failure
			f.Error = oneLine(f.Error, 200)
			why = " (" + f.String() + ")"
		}
		return fmt.Sprintf("submission %s failed%s", s.ID, why)
	case wire.StateCancelled:
		return fmt.Sprintf("submission %s was cancelled", s.ID)
	}
	return ""
}

// report completes or fails ch, retrying while the server cannot be reached and the lease
// lasts; after that the server releases the chunk itself.
func (w *worker) report(ch wire.ReservedChunk, output, failure string, retryAfter time.Duration) {
	giveUp := time.Now().Add(w.opts.lease)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		ctx = client.ContextWithTraceparent(ctx, ch.Traceparent) // the instance's span joins the chunk's trace
		var results []wire.TokenResult
		var err error
		if failure != "" {
			f := wire.ChunkFailure{Token: ch.Token, Error: failure}
			if retryAfter > 0 {
				f.RetryAfter = retryAfter.String()
			}
			results, err = w.c.Fail(ctx, f)
		} else {
			results, err = w.c.Complete(ctx, wire.Completion{Token: ch.Token, Output: output})
		}
		cancel()
		if err == nil && len(results) == 1 {
			w.reported(ch, results[0].Status, failure)
			return
		}
		if err == nil {
			err = fmt.Errorf("got %d results; want 1", len(results))
		}
		backoff := min(time.Second<<min(attempt, 5), 10*time.Second)
		if !transient(context.Background(), err) || time.Now().Add(backoff).After(giveUp) {
			w.lost.Add(1)
			w.display.note("chunk %s/%d: giving up reporting it (%v); the server releases it when its lease ends", ch.SubmissionID, ch.ChunkIndex, explain(err, w.opts.url, ""))
			return
		}
		w.display.note("chunk %s/%d: reporting it failed (%v); retrying in %s", ch.SubmissionID, ch.ChunkIndex, explain(err, w.opts.url, ""), backoff)
		time.Sleep(backoff)
	}
}

// reported counts the server's answer to a completion or failure.
func (w *worker) reported(ch wire.ReservedChunk, status wire.TokenStatus, failure string) {
	switch status {
	case wire.StatusCompleted:
		w.done.Add(1)
	case wire.StatusRetrying, wire.StatusFailed:
		w.failed.Add(1)
		w.display.note("chunk %s/%d failed (%s): %s", ch.SubmissionID, ch.ChunkIndex, status, oneLine(failure, 300))
	default: // already_finished, unknown: the submission ended, or the chunk went elsewhere
		w.lost.Add(1)
		w.display.note("chunk %s/%d: %s", ch.SubmissionID, ch.ChunkIndex, w.whyGone(ch, "the server answered "+string(status)))
	}
}

// chunkEnv is the environment of the command for ch: env without any OPSQ_* variables the
// worker sets, plus these for ch.
func chunkEnv(env []string, ch wire.ReservedChunk) []string {
	set := map[string]string{
		"OPSQ_SUBMISSION_ID": ch.SubmissionID,
		"OPSQ_CHUNK_INDEX":   strconv.FormatInt(ch.ChunkIndex, 10),
		"OPSQ_RETRIES":       strconv.FormatInt(ch.Retries, 10),
		"OPSQ_METADATA":      ch.Metadata,
	}
	out := make([]string, 0, len(env)+len(set)+1)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ours := set[name]; !ours && name != "OPSQ_CHUNK_PREFIX" && name != "TRACEPARENT" {
			out = append(out, kv)
		}
	}
	for _, name := range []string{"OPSQ_SUBMISSION_ID", "OPSQ_CHUNK_INDEX", "OPSQ_RETRIES", "OPSQ_METADATA"} {
		out = append(out, name+"="+set[name])
	}
	if ch.Prefix != nil {
		out = append(out, "OPSQ_CHUNK_PREFIX="+*ch.Prefix)
	}
	// The W3C traceparent of the submission's producer, under the name OpenTelemetry's
	// environment-variable carriers read, so that the command's spans join its trace.
	if ch.Traceparent != "" {
		out = append(out, "TRACEPARENT="+ch.Traceparent)
	}
	return out
}

// commandOutcome judges a command that exited (waitErr from Wait) and wrote stdout and
// stderrTail.
func commandOutcome(waitErr error, stdout *capWriter, stderrTail string, maxOutput int64) outcome {
	var exitErr *exec.ExitError
	switch {
	case stdout.overflow:
		// Checked first: the command may have died of the closed pipe.
		return outcome{failure: fmt.Sprintf("the output is over --max-output (%d bytes): the command wrote more to stdout", maxOutput)}
	case errors.As(waitErr, &exitErr):
		msg := exitErr.String() // "exit status 3", "signal: killed"
		if stderrTail != "" {
			msg += ": " + stderrTail
		}
		return outcome{failure: msg}
	case errors.Is(waitErr, exec.ErrWaitDelay):
		return outcome{failure: fmt.Sprintf("the command exited, but a process it started kept its stdout or stderr open for %s", pipeGrace)}
	case waitErr != nil:
		return outcome{failure: "running the command: " + waitErr.Error()}
	case !utf8.Valid(stdout.buf.Bytes()):
		return outcome{failure: "the output is not valid UTF-8: outputs are JSON strings, so encode binary output first (base64, say)"}
	}
	return outcome{output: stdout.buf.String()}
}

// capWriter keeps up to max bytes; a write beyond them fails, which closes the command's
// stdout pipe.
type capWriter struct {
	max      int64
	buf      bytes.Buffer
	overflow bool
}

var errOverflow = errors.New("output over --max-output")

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(c.buf.Len())+int64(len(p)) > c.max {
		c.overflow = true
		return 0, errOverflow
	}
	return c.buf.Write(p)
}

// lineMatcher passes what is written to it on to next, and matches each line (its first
// stderrLineMax bytes) against re: the first line that matches is kept, and hit gets a
// value then. Write is called by one goroutine at a time (exec's copy of the command's
// stderr); end, once the command's Wait returned.
type lineMatcher struct {
	re    *regexp.Regexp
	next  io.Writer
	line  []byte // the line being read, up to stderrLineMax bytes
	first string // the first line that matched
	found bool
	hit   chan struct{} // a value when a line first matches
}

func newLineMatcher(re *regexp.Regexp, next io.Writer) *lineMatcher {
	return &lineMatcher{re: re, next: next, hit: make(chan struct{}, 1)}
}

func (m *lineMatcher) Write(p []byte) (int, error) {
	n, err := m.next.Write(p)
	for rest := p; len(rest) > 0 && !m.found; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			m.keep(rest)
			break
		}
		m.keep(rest[:i])
		m.match()
		rest = rest[i+1:]
	}
	return n, err
}

// keep adds b to the line being read, as far as stderrLineMax.
func (m *lineMatcher) keep(b []byte) {
	m.line = append(m.line, b[:min(len(b), stderrLineMax-len(m.line))]...)
}

// match matches the line read, and starts the next.
func (m *lineMatcher) match() {
	if line := bytes.TrimSuffix(m.line, []byte("\r")); !m.found && m.re.Match(line) {
		m.found, m.first = true, string(line)
		m.hit <- struct{}{}
	}
	m.line = m.line[:0]
}

// end matches the last line, if it had no newline, and returns the first line that
// matched.
func (m *lineMatcher) end() (string, bool) {
	if len(m.line) > 0 {
		m.match()
	}
	return m.first, m.found
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max       int
	buf       []byte
	truncated bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	return len(p), nil
}

// String is the tail as valid UTF-8 without surrounding space, starting with "…" when the
// beginning was cut.
func (t *tailWriter) String() string {
	b := t.buf
	if t.truncated {
		// Start at a character boundary.
		for i := 0; i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if t.truncated && s != "" {
		s = "…" + s
	}
	return s
}

// oneLine shortens s to one line of at most n bytes, for a log line.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// workDisplay writes the worker's progress line and notes to stderr from any goroutine.
type workDisplay struct {
	mu   sync.Mutex
	line *progress.Line
}

// note prints a line of its own, above the progress line.
func (d *workDisplay) note(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.line.Note(format, args...)
}

func (d *workDisplay) show(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.line.Show(s)
}

func (d *workDisplay) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.line.Clear()
}

// counts describes the counters: "12 done, 1 failed, 0 lost".
func (w *worker) counts() string {
	return fmt.Sprintf("%s done, %s failed, %s lost", progress.GroupDigits(w.done.Load()), progress.GroupDigits(w.failed.Load()), progress.GroupDigits(w.lost.Load()))
}

// rateWindow is the span over which the progress line's rate is measured.
const rateWindow = 10 * time.Second

// rateMeter measures the rate at which chunks finish over the last rateWindow, as of the
// last tick where one did: once none finishes (the work is done, or the queue is empty)
// the rate stays at what it was while the work flowed, rather than falling towards 0 as
// the window fills with idle time. Not safe for concurrent use.
type rateMeter struct {
	samples []rateSample // the ticks of the last rateWindow
	rate    float64      // chunks/s as of the last tick where the count changed
}

type rateSample struct {
	at       time.Time
	finished int64
}

// add records the count of finished chunks at a tick and returns the rate in chunks/s.
func (m *rateMeter) add(at time.Time, finished int64) float64 {
	m.samples = append(m.samples, rateSample{at, finished})
	for len(m.samples) > 1 && at.Sub(m.samples[0].at) > rateWindow {
		m.samples = m.samples[1:]
	}
	if n := len(m.samples); n > 1 && finished != m.samples[n-2].finished {
		first := m.samples[0]
		if d := at.Sub(first.at).Seconds(); d > 0 {
			m.rate = float64(finished-first.finished) / d
		}
	}
	return m.rate
}

// showProgress shows the progress line until quit is closed, then clears it and closes
// shown. On a terminal the line is redrawn all the time; in a log it is printed when it
// changes.
func (w *worker) showProgress(quit <-chan struct{}, shown chan<- struct{}) {
	defer close(shown)
	t := time.NewTicker(w.display.line.Every())
	defer t.Stop()
	var rate rateMeter
	rate.add(time.Now(), 0)
	last := ""
	for {
		select {
		case <-quit:
			w.display.clear()
			return
		case now := <-t.C:
			r := rate.add(now, w.done.Load()+w.failed.Load())
			s := fmt.Sprintf("work: %s, %d running", w.counts(), w.running.Load())
			if !w.display.line.TTY() && s == last {
				continue // nothing new for the log
			}
			last = s
			w.display.show(fmt.Sprintf("%s, %.1f chunks/s", s, r))
		}
	}
}
