// A consumer loop, as "opsq work" (cmd/opsq/work.go) but calling a function per chunk.
import { Client, anySignal, sleep } from "./client.js";
import { type Duration, durationMs, durationString } from "./duration.js";
import { OpsqError, RetryLater, Throttle } from "./errors.js";
import type { ReservedChunk, Strategy, TokenResult, TokenStatus } from "./types.js";

/** The lease a worker reserves with unless told otherwise (the server's default). */
export const LEASE_DEFAULT = "5m";
/** How long each reserve of a worker waits for work unless told otherwise. */
export const WAIT_DEFAULT = "20s";
/** The most completions or failures a worker sends in one request unless told otherwise. */
export const BATCH_MAX_DEFAULT = 100;
/** How long a completion or failure waits at most for others unless told otherwise. */
export const BATCH_DELAY_DEFAULT = "50ms";
/** The most chunks a worker prefetches when prefetch is not set. */
export const PREFETCH_MAX_DEFAULT = 100;
/** When prefetch is not set, a worker holds about this much work (ms) beyond what runs. */
const prefetchAheadMs = 1000;
/** How often a worker notes its progress unless told otherwise. */
export const PROGRESS_EVERY_DEFAULT = "10s";

/** What a worker's function gets besides its chunk. */
export interface ChunkContext {
  /**
   * Aborted when the chunk is no longer the worker's (its submission was cancelled or
   * failed, its lease lost), or when the worker stops and the chunk did not finish within
   * the stop grace: stop the work, its result is dropped.
   */
  signal: AbortSignal;
  /**
   * The W3C traceparent the worker sends with the chunk's extends and its complete or
   * fail: at first the chunk's own (chunk.traceparent, that of its producer's span). Set
   * it to that of the function's own span, a child of the chunk's, and the instance's spans
   * of those calls sit beneath the function's span.
   */
  traceparent: string | undefined;
}

/**
 * A worker's function: the chunk's output (a string as is; anything else is sent as its
 * JSON, undefined as ""). Throwing fails the chunk with the error's text (one attempt; it is
 * retried while its submission's max_retries allows); throwing RetryLater fails it with a
 * retry_after; throwing Throttle throttles the chunk's value of a key, cluster-wide, and
 * fails it until then.
 */
export type Handler = (chunk: ReservedChunk, context: ChunkContext) => unknown;

/** Options of a Worker. */
export interface WorkerOptions {
  /** How many chunks run at once. Defaults to 1. */
  concurrency?: number;
  /** Which chunks: the JSON form or the text form. Defaults to the server's (random). */
  strategy?: Strategy | string;
  /** Each reservation's lease, extended every half of it while the function runs. Defaults to LEASE_DEFAULT. */
  lease?: Duration;
  /** How long each reserve waits for work, at most 60s. Defaults to WAIT_DEFAULT. */
  wait?: Duration;
  /** The worker's name in the server's records. Defaults to "<host>/pid-<pid>" on Node. */
  consumer?: string;
  /** Return once a reserve finds no work after its wait and nothing runs, instead of waiting for more. */
  once?: boolean;
  /** Stops the worker: it reserves nothing more, lets the held chunks finish (see stopGrace), then returns. */
  signal?: AbortSignal;
  /** On Node, stop as on signal at SIGTERM and SIGINT, and at once at a second one. Defaults to true on Node. */
  handleSignals?: boolean;
  /**
   * After a first stop, how long the held chunks (running and prefetched) may take, 0 to
   * the lease; then their signals are aborted and they are failed with "worker stopped"
   * and retry, so they are handed out again elsewhere. A second stop (stop() again, a
   * second SIGINT or SIGTERM) does that at once. Defaults to the lease.
   */
  stopGrace?: Duration;
  /**
   * How many chunks to reserve beyond those that can run at once, so that a finished one
   * finds its next waiting; their leases are extended as those of running ones. 0 to
   * 10000. Defaults to about a second of work by the function's average time, from
   * concurrency to PREFETCH_MAX_DEFAULT (100).
   */
  prefetch?: number;
  /** The most completions or failures sent in one request, 1 to 10000. Defaults to BATCH_MAX_DEFAULT (100). */
  batchMax?: number;
  /** How long a completion or failure waits at most for others to go with it. Defaults to BATCH_DELAY_DEFAULT (50ms). */
  batchDelay?: Duration;
  /** No note per failed chunk and no progress line (the other notes still go to log). Defaults to false. */
  quiet?: boolean;
  /** How often a progress line (done, failed, lost, running, chunks/s) is noted; 0 for none. Defaults to PROGRESS_EVERY_DEFAULT (10s). */
  progressEvery?: Duration;
  /** Where the worker's notes go (a chunk failed, progress, the stop...). Defaults to console.error. */
  log?: (message: string) => void;
  /** The strategic metadata key (or "@tenant") whose value a Throttle thrown without a key throttles. */
  throttleKey?: string;
}

/** What a worker has done so far. */
export interface WorkerStats {
  /** Chunks completed. */
  done: number;
  /** Chunks failed (retrying or failed for good). */
  failed: number;
  /** Chunks that went elsewhere before they were reported (lost, cancelled, unreported). */
  lost: number;
  /** Chunks whose function runs now. */
  running: number;
  /** Throttles set because a function threw Throttle. */
  throttled: number;
}

/** The gap between two reserves that found nothing, so that wait 0 does not spin. */
const reserveGapMin = 1000;

interface NodeProcess {
  pid?: number;
  env?: Record<string, string | undefined>;
  versions?: { node?: string };
  on?(event: string, listener: () => void): unknown;
  off?(event: string, listener: () => void): unknown;
}
const nodeProcess = (globalThis as { process?: NodeProcess }).process;
const onNode = typeof nodeProcess?.versions?.node === "string";

/** What became of a chunk's function. */
type Outcome = { output: string } | { failure: string; retryAfter?: Duration };

/** An outcome waiting in the batch to send, and what to call once it is sent. */
interface Pending {
  ch: ReservedChunk;
  outcome: Outcome;
  traceparent: string | undefined;
  sent: () => void;
}

/**
 * A Worker reserves chunks and calls its function for each, up to concurrency at once,
 * with up to prefetch more reserved ahead, extending the leases of the chunks it holds,
 * completing and failing them in batches, until stopped. Run it once.
 */
export class Worker {
  private readonly opts: Required<Omit<WorkerOptions, "strategy" | "signal" | "log" | "throttleKey" | "prefetch">> & {
    prefetch?: number;
    strategy?: Strategy | string;
    signal?: AbortSignal;
    log: (m: string) => void;
    throttleKey?: string;
  };
  private readonly leaseMs: number;
  private readonly stopGraceMs: number;
  private readonly stopGraceText: string; // as given: "5m", not "300000ms"
  private readonly batchDelayMs: number;
  private readonly progressMs: number;
  private readonly counts = { done: 0, failed: 0, lost: 0, running: 0, throttled: 0 };
  private readonly stopping = new AbortController();
  private readonly hurrying = new AbortController();
  private stopSignal: AbortSignal | undefined;
  private held = 0; // chunks reserved and not yet through their function: queued and running
  private readonly slotWaiters: (() => void)[] = [];
  private heldFreed: (() => void) | null = null;
  private pending: Pending[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly sending = new Set<Promise<void>>();
  private started = false;
  private fnMs: number | undefined; // how long the function takes, a moving average

  constructor(
    private readonly client: Client,
    private readonly handler: Handler,
    options: WorkerOptions = {},
  ) {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10_000) {
      throw new RangeError(`concurrency ${concurrency}: want an integer from 1 to 10000`);
    }
    const prefetch = options.prefetch;
    if (prefetch !== undefined && (!Number.isInteger(prefetch) || prefetch < 0 || prefetch > 10_000)) {
      throw new RangeError(`prefetch ${prefetch}: want an integer from 0 to 10000`);
    }
    const batchMax = options.batchMax ?? BATCH_MAX_DEFAULT;
    if (!Number.isInteger(batchMax) || batchMax < 1 || batchMax > 10_000) {
      throw new RangeError(`batchMax ${batchMax}: want an integer from 1 to 10000`);
    }
    const lease = options.lease ?? LEASE_DEFAULT;
    this.leaseMs = durationMs(lease);
    if (this.leaseMs < 1000 || this.leaseMs > 24 * 3_600_000) {
      throw new RangeError(`lease ${durationString(lease)}: want 1s to 24h`);
    }
    const wait = options.wait ?? WAIT_DEFAULT;
    if (durationMs(wait) < 0 || durationMs(wait) > 60_000) {
      throw new RangeError(`wait ${durationString(wait)}: want 0 to 60s`);
    }
    this.stopGraceMs = options.stopGrace === undefined ? this.leaseMs : durationMs(options.stopGrace);
    this.stopGraceText = durationString(options.stopGrace ?? lease);
    if (this.stopGraceMs < 0 || this.stopGraceMs > this.leaseMs) {
      throw new RangeError(`stopGrace ${durationString(options.stopGrace!)}: want 0 to the lease (${durationString(lease)}): a chunk past its lease is lost anyway`);
    }
    this.batchDelayMs = durationMs(options.batchDelay ?? BATCH_DELAY_DEFAULT);
    if (this.batchDelayMs < 0 || this.batchDelayMs > 10_000) {
      throw new RangeError(`batchDelay ${durationString(options.batchDelay!)}: want 0 to 10s`);
    }
    this.progressMs = durationMs(options.progressEvery ?? PROGRESS_EVERY_DEFAULT);
    this.opts = {
      concurrency,
      prefetch,
      batchMax,
      batchDelay: this.batchDelayMs,
      quiet: options.quiet ?? false,
      progressEvery: this.progressMs,
      lease,
      wait,
      consumer: options.consumer ?? defaultConsumer(),
      once: options.once ?? false,
      handleSignals: options.handleSignals ?? onNode,
      stopGrace: this.stopGraceMs,
      strategy: options.strategy,
      signal: options.signal,
      log: options.log ?? ((m: string) => console.error(`opsq worker: ${m}`)),
      throttleKey: options.throttleKey,
    };
  }

  /** What the worker has done so far. */
  get stats(): WorkerStats {
    return { ...this.counts };
  }

  /**
   * Stops the worker, as its signal would: no more reserves, the held chunks may finish
   * within stopGrace. Called again once stopping, it skips that wait: the held chunks are
   * failed with retry at once.
   */
  stop(): void {
    if (this.stopSignal?.aborted || this.stopping.signal.aborted) {
      if (!this.hurrying.signal.aborted) {
        if (this.held > 0) this.opts.log(`stopping now: failing ${this.held} held chunk(s); they are handed out again`);
        this.hurrying.abort(new Error("worker stopped at once"));
      }
      return;
    }
    this.stopping.abort(new Error("worker stopped"));
  }

  /** The "N done, N failed, N lost" of the notes. */
  private countsText(): string {
    const c = this.counts;
    return `${c.done.toLocaleString("en-US")} done, ${c.failed.toLocaleString("en-US")} failed, ${c.lost.toLocaleString("en-US")} lost`;
  }

  /**
   * Runs the worker until it is stopped (or, with once, until there is no more work), lets
   * the held chunks finish, and resolves with its stats. It rejects only when the
   * server refuses the reserves (a bad strategy, a wrong key): after the held chunks
   * are reported.
   */
  async run(): Promise<WorkerStats> {
    if (this.started) throw new Error("opsq: a Worker runs once");
    this.started = true;
    const begun = Date.now();
    const { signal: stop, done: unlink } = anySignal(this.opts.signal, this.stopping.signal);
    this.stopSignal = stop;
    const onSignal = () => this.stop();
    if (this.opts.handleSignals && nodeProcess?.on) {
      nodeProcess.on("SIGTERM", onSignal);
      nodeProcess.on("SIGINT", onSignal);
    }
    let lastDone = 0;
    const progress =
      this.progressMs > 0 && !this.opts.quiet
        ? setInterval(() => {
            const rate = ((this.counts.done - lastDone) * 1000) / this.progressMs;
            lastDone = this.counts.done;
            this.opts.log(`${this.countsText()}, ${this.counts.running} running, ${rate.toFixed(1)} chunks/s`);
          }, this.progressMs)
        : undefined;
    const onStop = () => {
      if (this.held > 0 && !this.hurrying.signal.aborted) {
        this.opts.log(
          `stopping: waiting for ${this.held} chunk(s) (${this.counts.running} running), for up to ${this.stopGraceText} (stopGrace); ` +
            "then they are failed and handed out again. Press Ctrl-C again to stop now",
        );
      }
    };
    stop.addEventListener("abort", onStop, { once: true });
    const jobs = new Set<Promise<void>>();
    let failure: unknown;
    try {
      await this.reserveLoop(stop, jobs);
    } catch (e) {
      failure = e;
    }
    stop.removeEventListener("abort", onStop);
    await Promise.all(jobs);
    this.flush();
    while (this.sending.size > 0) await Promise.all(this.sending);
    clearInterval(progress);
    if (this.opts.handleSignals && nodeProcess?.off) {
      nodeProcess.off("SIGTERM", onSignal);
      nodeProcess.off("SIGINT", onSignal);
    }
    unlink();
    if (!this.opts.quiet) this.opts.log(`stopped: ${this.countsText()} in ${((Date.now() - begun) / 1000).toFixed(1)}s`);
    if (failure !== undefined) throw failure;
    return this.stats;
  }

  /**
   * capacity is how many chunks to hold: those that run and the prefetch. Without a
   * prefetch set, as many as the slots finish in about a second by the function's
   * average time, from concurrency to PREFETCH_MAX_DEFAULT: fast functions get a deep
   * queue, slow ones hold little more than they run.
   */
  private capacity(): number {
    const c = this.opts.concurrency;
    if (this.opts.prefetch !== undefined) return c + this.opts.prefetch;
    if (this.fnMs === undefined) return 2 * c;
    return c + Math.floor(Math.min(PREFETCH_MAX_DEFAULT, Math.max(c, (c * prefetchAheadMs) / Math.max(this.fnMs, 0.001))));
  }

  private async reserveLoop(stop: AbortSignal, jobs: Set<Promise<void>>): Promise<void> {
    const wakeOnStop = () => this.heldFreed?.();
    stop.addEventListener("abort", wakeOnStop, { once: true });
    try {
      let failures = 0;
      while (!stop.aborted) {
        // Wait for room, then ask for as many chunks as there is room for: those that
        // can run at once and the prefetch.
        while (this.held >= this.capacity() && !stop.aborted) {
          await new Promise<void>((resolve) => (this.heldFreed = resolve));
        }
        if (stop.aborted) return;
        const n = this.capacity() - this.held;
        const asked = Date.now();
        const unsettled = this.counts.failed + this.counts.lost;
        let chunks: ReservedChunk[];
        try {
          chunks = await this.client.reserve(
            { max: n, strategy: this.opts.strategy, lease: this.opts.lease, wait: this.opts.wait, consumer: this.opts.consumer },
            { signal: stop },
          );
        } catch (e) {
          if (stop.aborted) return;
          if (!(e instanceof OpsqError) || !e.transient) throw e;
          const backoff = Math.max(Math.min(1000 * 2 ** Math.min(failures, 5), 10_000), (e.retryAfter ?? 0) * 1000);
          failures++;
          this.opts.log(`reserve failed (${e}); retrying in ${backoff} ms`);
          if (!(await pause(backoff, stop))) return;
          continue;
        }
        if (failures > 0) {
          this.opts.log("reserve works again");
          failures = 0;
        }
        for (const ch of chunks) {
          this.held++;
          const job = this.process(ch, stop).finally(() => jobs.delete(job));
          jobs.add(job);
        }
        if (chunks.length === 0) {
          // once: the reserve waited its whole wait and found nothing; stop when nothing
          // is held and nothing that ended meanwhile may bring its chunk back (a failed
          // attempt retried, a chunk lost).
          if (this.opts.once && jobs.size === 0 && this.counts.failed + this.counts.lost === unsettled) return;
          if (!(await pause(reserveGapMin - (Date.now() - asked), stop))) return;
        }
      }
    } finally {
      stop.removeEventListener("abort", wakeOnStop);
    }
  }

  /** acquire waits for one of the concurrency slots; it resolves false if signal aborts first. */
  private acquire(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.counts.running < this.opts.concurrency) {
      this.counts.running++;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const granted = () => {
        signal.removeEventListener("abort", aborted);
        resolve(true);
      };
      const aborted = () => {
        const i = this.slotWaiters.indexOf(granted);
        if (i >= 0) this.slotWaiters.splice(i, 1);
        resolve(false);
      };
      this.slotWaiters.push(granted);
      signal.addEventListener("abort", aborted, { once: true });
    });
  }

  /** release gives a slot to the next chunk waiting for one, or back. */
  private release(): void {
    const next = this.slotWaiters.shift();
    if (next) next();
    else this.counts.running--;
  }

  /**
   * process holds one chunk: it extends its lease, waits for a slot, runs the function and
   * reports the outcome. Once reserved, a chunk is seen through to its report even after
   * the worker is stopped (for up to the stop grace; at once at a second stop).
   */
  private async process(ch: ReservedChunk, stop: AbortSignal): Promise<void> {
    const chunkCtl = new AbortController();
    const context: ChunkContext = { signal: chunkCtl.signal, traceparent: ch.traceparent };
    let gone = ""; // why the chunk is no longer ours
    type Interruption = { interrupted: "gone" | "stopped"; why: string };
    let settle!: (i: Interruption) => void;
    const interrupted = new Promise<Interruption>((resolve) => (settle = resolve));
    const interrupt = (i: Interruption) => {
      chunkCtl.abort(new Error(i.why));
      settle(i);
    };

    const extendEvery = this.leaseMs / 2;
    let extending = false;
    const extender = setInterval(() => {
      if (extending || gone !== "") return;
      extending = true;
      void this.extend(ch, context.traceparent)
        .then((why) => {
          if (why !== "" && gone === "") {
            gone = why;
            interrupt({ interrupted: "gone", why });
          }
        })
        .finally(() => (extending = false));
    }, extendEvery);

    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    const onStop = () => {
      graceTimer = setTimeout(() => {
        interrupt({ interrupted: "stopped", why: `worker stopped: the chunk did not finish within ${this.stopGraceText} (stopGrace) of the worker's stop` });
      }, this.stopGraceMs);
    };
    const onHurry = () => interrupt({ interrupted: "stopped", why: "worker stopped at once: the worker was asked to stop a second time" });
    const hurry = this.hurrying.signal;
    if (stop.aborted) onStop();
    else stop.addEventListener("abort", onStop, { once: true });
    if (hurry.aborted) onHurry();
    else hurry.addEventListener("abort", onHurry, { once: true });

    let outcome: Outcome | Interruption;
    let ran = false;
    try {
      if (!(await this.acquire(chunkCtl.signal))) {
        outcome = await interrupted;
      } else {
        ran = true;
        const began = performance.now();
        const run: Promise<Outcome> = (async () => {
          try {
            const out = await this.handler(ch, context);
            return { output: out === undefined ? "" : typeof out === "string" ? out : JSON.stringify(out) };
          } catch (e) {
            if (e instanceof RetryLater) return { failure: errorText(e), retryAfter: e.after };
            if (e instanceof Throttle) {
              await this.throttle(ch, e);
              return { failure: errorText(e), retryAfter: e.duration };
            }
            return { failure: errorText(e) };
          } finally {
            const took = performance.now() - began;
            this.fnMs = this.fnMs === undefined ? took : 0.9 * this.fnMs + 0.1 * took;
          }
        })();
        outcome = await Promise.race([run, interrupted]);
      }
    } finally {
      if (ran) this.release();
      this.held--;
      const wake = this.heldFreed;
      this.heldFreed = null;
      wake?.();
      clearTimeout(graceTimer);
      stop.removeEventListener("abort", onStop);
      hurry.removeEventListener("abort", onHurry);
    }
    try {
      if ("interrupted" in outcome) {
        if (outcome.interrupted === "stopped") {
          await this.report(ch, { failure: outcome.why }, context.traceparent);
          return;
        }
        this.counts.lost++;
        this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index}: ${outcome.why}; its result is dropped`);
        return;
      }
      await this.report(ch, outcome, context.traceparent);
    } finally {
      clearInterval(extender); // extended until reported: a batch may wait a little
    }
  }

  /** throttle throttles ch's value of e's key (or throttleKey) for e's duration, and says so. */
  private async throttle(ch: ReservedChunk, e: Throttle): Promise<void> {
    const where = `chunk ${ch.submission_id}/${ch.chunk_index}`;
    const key = e.key ?? this.opts.throttleKey;
    if (key === undefined || key === "") {
      this.opts.log(`${where} threw Throttle without a key, and the worker has no throttleKey: nothing throttled`);
      return;
    }
    try {
      const value = key === "@tenant" ? (await this.client.status(ch.submission_id)).tenant : ch.strategic_metadata[key];
      if (value === undefined) {
        this.opts.log(`${where}: its submission has no ${key} to throttle`);
        return;
      }
      const { until } = await this.client.throttle(key, value, e.duration);
      this.counts.throttled++;
      this.opts.log(`${where}: ${key} = ${JSON.stringify(value)} throttled until ${until}`);
    } catch (err) {
      this.opts.log(`${where}: throttling its ${key} failed (${err})`);
    }
  }

  /** extend extends ch's lease; it returns why ch is no longer ours, or "" (also when the server could not be asked: the next tick tries again). */
  private async extend(ch: ReservedChunk, traceparent: string | undefined): Promise<string> {
    let results;
    try {
      results = await this.client.extend([ch.token], this.opts.lease, { traceparent });
    } catch (e) {
      this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index}: extending the lease failed (${e}); trying again in ${this.leaseMs / 2} ms`);
      return "";
    }
    const status = results[0]?.status;
    if (status === "extended") return "";
    return this.whyGone(ch, `extending the lease answered ${status}`);
  }

  /** whyGone says why ch is no longer the worker's: its submission failed or was cancelled, or it went elsewhere. */
  private async whyGone(ch: ReservedChunk, answered: string): Promise<string> {
    try {
      const s = await this.client.status(ch.submission_id);
      if (s.state === "cancelled") return `submission ${s.id} was cancelled`;
      if (s.state === "failed") {
        const f = s.failure ? ` (chunk ${s.failure.chunk_index}: ${s.failure.error.slice(0, 200)})` : "";
        return `submission ${s.id} failed${f}`;
      }
    } catch {
      // Say what the server answered.
    }
    return `${answered}; the chunk went elsewhere`;
  }

  /**
   * report puts ch's outcome in the batch to send, and resolves once it is sent: when
   * batchMax outcomes wait, when the oldest has waited batchDelay, or at the end of run.
   */
  private report(ch: ReservedChunk, outcome: Outcome, traceparent: string | undefined): Promise<void> {
    return new Promise<void>((sent) => {
      this.pending.push({ ch, outcome, traceparent, sent });
      if (this.pending.length >= this.opts.batchMax || this.hurrying.signal.aborted) this.flush();
      else this.flushTimer ??= setTimeout(() => this.flush(), this.batchDelayMs);
    });
  }

  /** flush sends the waiting outcomes: one request per kind and traceparent. */
  private flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const groups = new Map<string, Pending[]>();
    for (const p of this.pending.splice(0)) {
      const k = `${"output" in p.outcome ? "c" : "f"} ${p.traceparent ?? ""}`;
      const g = groups.get(k);
      if (g) g.push(p);
      else groups.set(k, [p]);
    }
    for (const g of groups.values()) {
      for (let i = 0; i < g.length; i += this.opts.batchMax) {
        const sending: Promise<void> = this.send(g.slice(i, i + this.opts.batchMax)).finally(() => this.sending.delete(sending));
        this.sending.add(sending);
      }
    }
  }

  /** send completes or fails the chunks of batch (all of one kind and traceparent) in one request, retrying while the server cannot be reached and the lease lasts. */
  private async send(batch: Pending[]): Promise<void> {
    const giveUp = Date.now() + this.leaseMs / 2;
    const traceparent = batch[0]!.traceparent;
    for (let attempt = 0; ; attempt++) {
      let results: TokenResult[] | undefined;
      let err: unknown;
      try {
        results =
          "output" in batch[0]!.outcome
            ? await this.client.complete(
                batch.map((p) => ({ token: p.ch.token, output: (p.outcome as { output: string }).output })),
                { traceparent },
              )
            : await this.client.fail(
                batch.map((p) => {
                  const o = p.outcome as { failure: string; retryAfter?: Duration };
                  return o.retryAfter === undefined ? { token: p.ch.token, error: o.failure } : { token: p.ch.token, error: o.failure, retry_after: o.retryAfter };
                }),
                { traceparent },
              );
        if (results.length !== batch.length) {
          err = new Error(`got ${results.length} results; want ${batch.length}`);
          results = undefined;
        }
      } catch (e) {
        err = e;
      }
      if (results !== undefined) {
        await Promise.all(batch.map((p, i) => this.reported(p.ch, results![i]!.status, "failure" in p.outcome ? p.outcome.failure : "")));
        for (const p of batch) p.sent();
        return;
      }
      const backoff = Math.min(1000 * 2 ** Math.min(attempt, 5), 10_000);
      if ((err instanceof OpsqError && !err.transient) || Date.now() + backoff > giveUp || this.hurrying.signal.aborted) {
        this.counts.lost += batch.length;
        this.opts.log(`giving up reporting ${batch.length} chunk(s) (${err}); the server releases them when their leases end`);
        for (const p of batch) p.sent();
        return;
      }
      this.opts.log(`reporting ${batch.length} chunk(s) failed (${err}); retrying in ${backoff} ms`);
      await sleep(backoff);
    }
  }

  /** reported counts the server's answer to a completion or failure. */
  private async reported(ch: ReservedChunk, status: TokenStatus, failure: string): Promise<void> {
    switch (status) {
      case "completed":
        this.counts.done++;
        return;
      case "retrying":
      case "failed":
        this.counts.failed++;
        if (!this.opts.quiet) this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index} failed (${status}): ${oneLine(failure, 300)}`);
        return;
      default: // already_finished, unknown, lost: the submission ended, or the chunk went elsewhere
        this.counts.lost++;
        this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index}: ${await this.whyGone(ch, `the server answered ${status}`)}`);
    }
  }
}

/**
 * work runs a Worker of fn until it is stopped (options.signal, SIGTERM or SIGINT on
 * Node) or, with once, until there is no more work, and resolves with its stats.
 *
 *     await work(new Client({ key }), async (chunk) => (await summarize(chunk.input!)), { concurrency: 4 });
 */
export function work(client: Client, fn: Handler, options: WorkerOptions = {}): Promise<WorkerStats> {
  return new Worker(client, fn, options).run();
}

/** pause waits ms (at least 0) and says whether stop did not come meanwhile. */
async function pause(ms: number, stop: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, stop);
    return true;
  } catch {
    return false;
  }
}

/** errorText is the error a thrown value fails its chunk with. */
function errorText(e: unknown): string {
  if (e instanceof Error) {
    const name = e.name && e.name !== "Error" && e.name !== "RetryLater" && e.name !== "Throttle" ? `${e.name}: ` : "";
    return name + e.message;
  }
  return typeof e === "string" ? e : JSON.stringify(e) ?? String(e);
}

/** oneLine shortens s to one line of at most n characters, for a note. */
function oneLine(s: string, n: number): string {
  const one = s.split(/\s+/).filter(Boolean).join(" ");
  return one.length > n ? one.slice(0, n) + "…" : one;
}

/** defaultConsumer is "<host>/pid-<pid>" on Node, else "browser". */
function defaultConsumer(): string {
  if (!onNode) return "browser";
  const host = nodeProcess?.env?.HOSTNAME || "localhost";
  return `${host}/pid-${nodeProcess?.pid ?? 0}`;
}
