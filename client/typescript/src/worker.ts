// A consumer loop, as "opsq work" (cmd/opsq/work.go) but calling a function per chunk.
import { Client, anySignal, sleep } from "./client.js";
import { type Duration, durationMs, durationString } from "./duration.js";
import { OpsqError, RetryLater, Throttle } from "./errors.js";
import type { ReservedChunk, Strategy, TokenStatus } from "./types.js";

/** The lease a worker reserves with unless told otherwise (the server's default). */
export const LEASE_DEFAULT = "5m";
/** How long each reserve of a worker waits for work unless told otherwise. */
export const WAIT_DEFAULT = "20s";

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
  /** Stops the worker: it reserves nothing more, lets the running chunks finish (see stopGrace), then returns. */
  signal?: AbortSignal;
  /** On Node, stop as on signal at SIGTERM and SIGINT. Defaults to true on Node. */
  handleSignals?: boolean;
  /**
   * After a stop, how long the running chunks may take; then their signals are aborted and
   * they are failed with "worker stopped" (retried elsewhere). Defaults to the lease.
   */
  stopGrace?: Duration;
  /** Where the worker's notes go (a chunk failed, a call to retry...). Defaults to console.error. */
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
  /** Chunks running now. */
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

/**
 * A Worker reserves chunks and calls its function for each, up to concurrency at once,
 * extending the lease of long work, until stopped. Run it once.
 */
export class Worker {
  private readonly opts: Required<Omit<WorkerOptions, "strategy" | "signal" | "log" | "throttleKey">> & {
    strategy?: Strategy | string;
    signal?: AbortSignal;
    log: (m: string) => void;
    throttleKey?: string;
  };
  private readonly leaseMs: number;
  private readonly stopGraceMs: number;
  private readonly counts = { done: 0, failed: 0, lost: 0, running: 0, throttled: 0 };
  private readonly stopping = new AbortController();
  private slotFreed: (() => void) | null = null;
  private started = false;

  constructor(
    private readonly client: Client,
    private readonly handler: Handler,
    options: WorkerOptions = {},
  ) {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10_000) {
      throw new RangeError(`concurrency ${concurrency}: want an integer from 1 to 10000`);
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
    this.opts = {
      concurrency,
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

  /** Stops the worker, as its signal would. */
  stop(): void {
    this.stopping.abort(new Error("worker stopped"));
  }

  /**
   * Runs the worker until it is stopped (or, with once, until there is no more work), lets
   * the running chunks finish, and resolves with its stats. It rejects only when the
   * server refuses the reserves (a bad strategy, a wrong key): after the running chunks
   * are reported.
   */
  async run(): Promise<WorkerStats> {
    if (this.started) throw new Error("opsq: a Worker runs once");
    this.started = true;
    const { signal: stop, done: unlink } = anySignal(this.opts.signal, this.stopping.signal);
    const onSignal = () => this.stop();
    if (this.opts.handleSignals && nodeProcess?.on) {
      nodeProcess.on("SIGTERM", onSignal);
      nodeProcess.on("SIGINT", onSignal);
    }
    const jobs = new Set<Promise<void>>();
    let failure: unknown;
    try {
      await this.reserveLoop(stop, jobs);
    } catch (e) {
      failure = e;
    }
    const n = this.counts.running;
    if (n > 0) this.opts.log(`stopping: waiting for ${n} running chunk(s), for up to ${this.stopGraceMs} ms; then they are failed`);
    await Promise.all(jobs);
    if (this.opts.handleSignals && nodeProcess?.off) {
      nodeProcess.off("SIGTERM", onSignal);
      nodeProcess.off("SIGINT", onSignal);
    }
    unlink();
    if (failure !== undefined) throw failure;
    return this.stats;
  }

  private async reserveLoop(stop: AbortSignal, jobs: Set<Promise<void>>): Promise<void> {
    const wakeOnStop = () => this.slotFreed?.();
    stop.addEventListener("abort", wakeOnStop, { once: true });
    try {
      let failures = 0;
      while (!stop.aborted) {
        // Wait for a free slot, then ask for as many chunks as there are free slots: a
        // chunk is reserved only when it can run at once, so no lease runs down here.
        while (this.counts.running >= this.opts.concurrency && !stop.aborted) {
          await new Promise<void>((resolve) => (this.slotFreed = resolve));
        }
        if (stop.aborted) return;
        const n = this.opts.concurrency - this.counts.running;
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
          this.counts.running++;
          const job = this.process(ch, stop).finally(() => {
            this.counts.running--;
            jobs.delete(job);
            const wake = this.slotFreed;
            this.slotFreed = null;
            wake?.();
          });
          jobs.add(job);
        }
        if (chunks.length === 0) {
          // once: the reserve waited its whole wait and found nothing; stop when nothing
          // runs and nothing that ended meanwhile may bring its chunk back (a failed
          // attempt retried, a chunk lost).
          if (this.opts.once && this.counts.running === 0 && this.counts.failed + this.counts.lost === unsettled) return;
          if (!(await pause(reserveGapMin - (Date.now() - asked), stop))) return;
        }
      }
    } finally {
      stop.removeEventListener("abort", wakeOnStop);
    }
  }

  /**
   * process runs the function for one chunk, extending its lease while it runs, and
   * reports the outcome. Once reserved, a chunk is seen through to its report even after
   * the worker is stopped (for up to the stop grace).
   */
  private async process(ch: ReservedChunk, stop: AbortSignal): Promise<void> {
    const chunkCtl = new AbortController();
    const context: ChunkContext = { signal: chunkCtl.signal, traceparent: ch.traceparent };
    let gone = ""; // why the chunk is no longer ours
    type Interruption = { interrupted: "gone" | "stopped"; why: string };
    let settle!: (i: Interruption) => void;
    const interrupted = new Promise<Interruption>((resolve) => (settle = resolve));

    const extendEvery = this.leaseMs / 2;
    let extending = false;
    const extender = setInterval(() => {
      if (extending || gone !== "") return;
      extending = true;
      void this.extend(ch, context.traceparent)
        .then((why) => {
          if (why !== "" && gone === "") {
            gone = why;
            chunkCtl.abort(new Error(why));
            settle({ interrupted: "gone", why });
          }
        })
        .finally(() => (extending = false));
    }, extendEvery);

    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    const onStop = () => {
      graceTimer = setTimeout(() => {
        const why = `worker stopped: the function did not finish within ${this.stopGraceMs} ms of the worker's stop`;
        chunkCtl.abort(new Error(why));
        settle({ interrupted: "stopped", why });
      }, this.stopGraceMs);
    };
    if (stop.aborted) onStop();
    else stop.addEventListener("abort", onStop, { once: true });

    type Outcome = { output: string } | { failure: string; retryAfter?: Duration } | Interruption;
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
      }
    })();
    let outcome: Outcome;
    try {
      outcome = await Promise.race([run, interrupted]);
    } finally {
      clearInterval(extender);
      clearTimeout(graceTimer);
      stop.removeEventListener("abort", onStop);
    }
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

  /** report completes or fails ch, retrying while the server cannot be reached and the lease lasts. */
  private async report(ch: ReservedChunk, outcome: { output: string } | { failure: string; retryAfter?: Duration }, traceparent: string | undefined): Promise<void> {
    const giveUp = Date.now() + this.leaseMs;
    for (let attempt = 0; ; attempt++) {
      let status: TokenStatus | undefined;
      let err: unknown;
      try {
        const results =
          "output" in outcome
            ? await this.client.complete([{ token: ch.token, output: outcome.output }], { traceparent })
            : await this.client.fail(
                [
                  outcome.retryAfter === undefined
                    ? { token: ch.token, error: outcome.failure }
                    : { token: ch.token, error: outcome.failure, retry_after: outcome.retryAfter },
                ],
                { traceparent },
              );
        status = results[0]?.status;
        if (status === undefined) err = new Error(`got ${results.length} results; want 1`);
      } catch (e) {
        err = e;
      }
      if (status !== undefined) {
        await this.reported(ch, status, "failure" in outcome ? outcome.failure : "");
        return;
      }
      const backoff = Math.min(1000 * 2 ** Math.min(attempt, 5), 10_000);
      if ((err instanceof OpsqError && !err.transient) || Date.now() + backoff > giveUp) {
        this.counts.lost++;
        this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index}: giving up reporting it (${err}); the server releases it when its lease ends`);
        return;
      }
      this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index}: reporting it failed (${err}); retrying in ${backoff} ms`);
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
        this.opts.log(`chunk ${ch.submission_id}/${ch.chunk_index} failed (${status}): ${oneLine(failure, 300)}`);
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
