// The opsq REST API v1 (DESIGN.md §3) over fetch: the same surface as the Go client
// (client/client.go), for Node >= 18 and browsers, with no other dependency.
import { OpsqError } from "./errors.js";
import { type Duration, durationMs, durationString } from "./duration.js";
import { strategyJSON } from "./strategy.js";
import type {
  ChunkFailure,
  Cluster,
  Completion,
  Created,
  Failures,
  MetadataValue,
  PreviewChunk,
  ReserveRequest,
  Schedule,
  ScheduleList,
  ScheduleRequest,
  ScheduleRun,
  ReservedChunk,
  Result,
  RetryManyRequest,
  RetryRequest,
  ListState,
  Status,
  StatusList,
  Submission,
  SubmissionHeader,
  Throttled,
  ThrottleLifted,
  TokenResult,
} from "./types.js";

/** The address a Client calls unless told otherwise: "make run". */
export const BASE_URL_DEFAULT = "http://localhost:3999";
/** How long a call may wait for its answer beyond the wait it asks the server for. */
export const TIMEOUT_DEFAULT = 30_000;

/** Options of a Client. */
export interface ClientOptions {
  /** The opsq deployment: one instance or a load balancer. Defaults to BASE_URL_DEFAULT. */
  baseURL?: string;
  /** An API key (opsq keys create), sent as "Authorization: Bearer <key>". */
  key?: string;
  /**
   * Milliseconds a call may take beyond the long-poll wait it asks for (status with wait,
   * reserve with wait); for a stream (NDJSON submit, results), the longest time without
   * progress. Defaults to TIMEOUT_DEFAULT (30 s).
   */
  timeout?: number;
  /** More headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to use. Defaults to globalThis.fetch. */
  fetch?: typeof fetch;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call: it then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Replaces the client's timeout for this call (milliseconds). */
  timeout?: number;
  /**
   * A W3C traceparent sent with the call (the header traceparent). With a submission, that
   * of the producer's span: it is kept and handed out with each of its chunks
   * (chunk.traceparent). With a complete, fail or extend, that of the consumer's span (a
   * child of the chunk's): the instance's span of the call joins the trace beneath it. A
   * value that is not a valid traceparent is ignored by the server.
   */
  traceparent?: string;
}

/** How far an NDJSON submission got: chunks and bytes handed to the connection so far. */
export interface Progress {
  chunks: number;
  bytes: number;
}

/** Options of submitNDJSON. */
export interface SubmitNDJSONOptions extends CallOptions {
  /** Called as the body is sent, after each batch of chunks, and once at the end. */
  onProgress?: (p: Progress) => void;
  /**
   * Stream the body (never held in memory whole). Defaults to true on Node and false
   * elsewhere: browsers stream a request body only over HTTP/2 (Chromium), so there the
   * body is built in memory first unless you say otherwise.
   */
  stream?: boolean;
}

/** Options of failures. */
export interface FailuresOptions extends CallOptions {
  /** The page size, at most 1000. Defaults to the server's (100). */
  limit?: number;
  /** The next_after of the previous page; undefined for the first page. */
  after?: number | null;
}

/** Which submissions list returns; nothing set lists the newest in any state. */
export interface ListOptions extends CallOptions {
  /** A state, or running, paused or scheduled: phases of in_progress (docs/operations.md). */
  state?: ListState;
  /** With value: submissions whose strategic metadata has key = value. */
  key?: string;
  /** 42 is the integer 42, "42" the string "42" (sent quoted). */
  value?: string | number;
  /** Only for admin keys: another tenant's submissions. */
  tenant?: string;
  /** The page size, at most 1000. Defaults to the server's (100). */
  limit?: number;
  /** The next_after of the previous page. */
  after?: string | null;
}

const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === "string";

/** A lone surrogate: a string JSON carries as \ud800, which no UTF-8 can hold. */
const loneSurrogate = /[\uD800-\uDFFF]/u;

/** One NDJSON request body is handed to fetch in pieces of about this size. */
const pieceBytes = 64 << 10;

/**
 * A Client calls one opsq deployment. It holds no state between calls: one Client may be
 * shared by any number of concurrent calls.
 */
export class Client {
  readonly baseURL: string;
  readonly timeout: number;
  private readonly key: string | undefined;
  private readonly headers: Record<string, string>;
  private readonly fetchFn: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseURL = (options.baseURL ?? BASE_URL_DEFAULT).replace(/\/+$/, "");
    this.timeout = options.timeout ?? TIMEOUT_DEFAULT;
    this.key = options.key;
    this.headers = { ...options.headers };
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new Error("opsq: no fetch in this runtime: use Node >= 18 or a browser, or pass options.fetch");
    }
    this.fetchFn = f.bind(globalThis);
  }

  // ---- producer ----

  /** Creates a submission from one JSON body. For many chunks, submitNDJSON streams them. */
  async submit(submission: Submission, options: CallOptions = {}): Promise<Created> {
    submission.chunks?.forEach((c, i) => checkText(c, `chunks[${i}]`));
    return this.json<Created>("POST", "/v1/submissions", { body: JSON.stringify(submission), ...options });
  }

  /**
   * Creates a submission from header and the chunks an iterable (or async iterable)
   * yields, streamed as an application/x-ndjson body: the header line, then one JSON
   * string per chunk, read from the iterable only as fast as the connection takes them.
   * The server inserts the submission atomically: an error (thrown by the iterable, or
   * the server's) leaves no submission, and submitNDJSON rejects with it.
   */
  async submitNDJSON(
    header: SubmissionHeader,
    chunks: Iterable<string> | AsyncIterable<string>,
    options: SubmitNDJSONOptions = {},
  ): Promise<Created> {
    const { onProgress, stream = isNode, ...call } = options;
    const enc = new TextEncoder();
    const it: Iterator<string> | AsyncIterator<string> =
      Symbol.asyncIterator in chunks ? chunks[Symbol.asyncIterator]() : chunks[Symbol.iterator]();
    const progress: Progress = { chunks: 0, bytes: 0 };
    let first: Uint8Array | null = enc.encode(JSON.stringify(header) + "\n");
    let sourceError: unknown;
    let ended = false;
    // next returns the next piece of the body, or null at its end.
    const next = async (): Promise<Uint8Array | null> => {
      if (first !== null) {
        const f = first;
        first = null;
        return f;
      }
      if (ended) return null;
      let text = "";
      while (text.length < pieceBytes) {
        let r: IteratorResult<string>;
        try {
          r = await it.next();
        } catch (e) {
          sourceError = e;
          throw e;
        }
        if (r.done) {
          ended = true;
          break;
        }
        if (typeof r.value !== "string") {
          sourceError = new TypeError(`opsq: chunk ${progress.chunks} is a ${typeof r.value}; want a string`);
          throw sourceError;
        }
        try {
          checkText(r.value, `chunk ${progress.chunks}`);
        } catch (e) {
          sourceError = e;
          throw e;
        }
        text += JSON.stringify(r.value) + "\n";
        progress.chunks++;
      }
      const piece = enc.encode(text);
      progress.bytes += piece.length;
      onProgress?.({ ...progress });
      return piece.length > 0 || !ended ? piece : null;
    };
    const closeSource = () => {
      void Promise.resolve(it.return?.()).catch(() => {});
    };

    let body: BodyInit;
    let idle: Deadline;
    if (stream) {
      idle = new Deadline(call.timeout ?? this.timeout); // reset as the body goes
      body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const piece = await next();
          idle.reset();
          if (piece === null) {
            controller.close();
          } else if (piece.length > 0) {
            controller.enqueue(piece);
          }
        },
        cancel() {
          closeSource();
        },
      });
    } else {
      const parts: Uint8Array[] = [];
      for (let p = await next(); p !== null; p = await next()) parts.push(p);
      const blob = new Blob(parts as BlobPart[]);
      body = blob;
      // Built: the time to send it starts now, a second per MB on top of the timeout.
      idle = new Deadline((call.timeout ?? this.timeout) + Math.ceil(blob.size / 1e6) * 1000);
    }
    try {
      const res = await this.send("POST", "/v1/submissions", {
        body,
        contentType: "application/x-ndjson",
        signal: call.signal,
        traceparent: call.traceparent,
        deadline: idle,
      });
      return (await this.readJSON(res, "POST", "/v1/submissions", call.signal, idle)) as Created;
    } catch (e) {
      if (sourceError !== undefined) throw sourceError;
      throw e;
    } finally {
      idle.clear();
      if (!ended) closeSource();
    }
  }

  /**
   * The status of submission id. With wait (at most 60s) the server holds the request
   * until the submission is finished or the wait has passed.
   */
  async status(id: string, options: CallOptions & { wait?: Duration } = {}): Promise<Status> {
    const { wait, ...call } = options;
    const query: Record<string, string> = {};
    let waitMs = 0;
    if (wait !== undefined && durationMs(wait) > 0) {
      query.wait = durationString(wait);
      waitMs = durationMs(wait);
    }
    return this.json<Status>("GET", submissionPath(id), { query, waitMs, ...call });
  }

  /**
   * The results of submission id, in any state, one line per chunk in chunk order: a
   * completed chunk's output ({chunk_index, output}), or the state of one that is not
   * ({chunk_index, state: "failed" | "skipped" | "pending", error?}). Read with for await;
   * leaving the loop early closes the stream.
   */
  async *results(id: string, options: CallOptions = {}): AsyncGenerator<Result, void, undefined> {
    yield* this.resultStream(id, false, -1, options);
  }

  /**
   * The results of submission id as its chunks finish: each line once that chunk and
   * every chunk before it are finished (completed, failed or skipped), in chunk order,
   * until the submission is finished and every line handed out. When the server ends a
   * followed stream early (OPSQ_MAX_FOLLOW, 1h; a proxy), follow asks again from the line
   * after the last one it yielded, so each line comes once. The stream may be silent for
   * as long as the work takes: stop it with options.signal or by leaving the loop.
   */
  async *follow(id: string, options: CallOptions = {}): AsyncGenerator<Result, void, undefined> {
    let last = -1;
    for (;;) {
      const before = last;
      for await (const r of this.resultStream(id, true, last, options)) {
        last = r.chunk_index;
        yield r;
      }
      const progressed = last > before;
      // The stream ended: the submission finished, or the server's bound on a follow.
      const st = await this.status(id, options);
      const finished = st.state !== "in_progress";
      if (finished && last + 1 >= st.chunks_total) return;
      if (finished && !progressed) {
        throw new OpsqError(0, "stream_ended", `following results of submission ${id}: the stream ended after chunk ${last} of ${st.chunks_total}`);
      }
      if (!progressed) await sleep(1000, options.signal); // do not spin on a server that cuts streams at once
    }
  }

  /** One results stream, skipping the lines up to chunk index after. */
  private async *resultStream(id: string, follow: boolean, after: number, options: CallOptions): AsyncGenerator<Result, void, undefined> {
    const path = submissionPath(id) + "/results";
    const deadline = new Deadline(options.timeout ?? this.timeout);
    try {
      const res = await this.send("GET", path, { query: follow ? { follow: "true" } : {}, signal: options.signal, traceparent: options.traceparent, deadline });
      // A followed stream may be silent while the work runs: its timeout bounds the answer's
      // head only. A plain one is cut when it sends nothing for the timeout.
      if (follow) deadline.clear();
      for await (const line of this.ndjson(res, "GET", path, options.signal, follow ? null : deadline)) {
        const r = line as Result;
        if (r.chunk_index <= after) continue;
        yield r;
      }
    } finally {
      deadline.clear();
    }
  }

  /**
   * One page of the chunks of submission id that failed at least one attempt, in chunk
   * order, each with its last errors; page on with after = the page's next_after.
   */
  async failures(id: string, options: FailuresOptions = {}): Promise<Failures> {
    const { limit, after, ...call } = options;
    const query: Record<string, string> = {};
    if (limit !== undefined) query.limit = String(limit);
    if (after !== undefined && after !== null) query.after = String(after);
    return this.json<Failures>("GET", submissionPath(id) + "/failures", { query, ...call });
  }

  /** Every failed chunk of submission id, page after page. */
  async *allFailures(id: string, options: FailuresOptions = {}): AsyncGenerator<Failures["failures"][number], void, undefined> {
    let after = options.after ?? null;
    do {
      const page = await this.failures(id, { ...options, after });
      yield* page.failures;
      after = page.next_after;
    } while (after !== null);
  }

  /**
   * Gives the failed chunks of submission id (with chunks: "unfinished", the skipped ones
   * too) a fresh attempt budget and returns its status. 409 nothing_to_retry when there is
   * nothing to retry.
   */
  async retry(id: string, request: RetryRequest = {}, options: CallOptions = {}): Promise<Status> {
    return this.json<Status>("POST", submissionPath(id) + "/retry", { body: JSON.stringify(request), ...options });
  }

  /** Retries every submission request selects, newest first; returns the ids retried. */
  async retryMany(request: RetryManyRequest = {}, options: CallOptions = {}): Promise<string[]> {
    const out = await this.json<{ retried: string[] }>("POST", "/v1/submissions/retry", { body: JSON.stringify(request), ...options });
    return out.retried;
  }

  /**
   * Stops handing out the chunks of submission id (those in flight finish as usual) and
   * returns its status. Idempotent; 409 already_finished on a finished submission.
   */
  async pause(id: string, options: CallOptions = {}): Promise<Status> {
    return this.json<Status>("POST", submissionPath(id) + "/pause", options);
  }

  /** Makes a paused submission reservable again at once and returns its status. */
  async resume(id: string, options: CallOptions = {}): Promise<Status> {
    return this.json<Status>("POST", submissionPath(id) + "/resume", options);
  }

  /** Cancels submission id and returns its status; 409 if it has already finished. */
  async cancel(id: string, options: CallOptions = {}): Promise<Status> {
    return this.json<Status>("POST", submissionPath(id) + "/cancel", options);
  }

  /** One page of submissions, newest first; page on with after = the page's next_after. */
  async list(options: ListOptions = {}): Promise<StatusList> {
    const { state, key, value, tenant, limit, after, ...call } = options;
    const query: Record<string, string> = {};
    if (state !== undefined) query.state = state;
    if (key !== undefined) query.key = key;
    // The server reads 42 as the integer and "42" (quoted) as the string.
    if (value !== undefined) query.value = typeof value === "number" ? String(value) : isIntegerText(value) || value.startsWith('"') ? JSON.stringify(value) : value;
    if (tenant !== undefined) query.tenant = tenant;
    if (limit !== undefined) query.limit = String(limit);
    if (after !== undefined && after !== null) query.after = after;
    return this.json<StatusList>("GET", "/v1/submissions", { query, ...call });
  }

  /** Every submission list selects with options, newest first, page after page. */
  async *allSubmissions(options: ListOptions = {}): AsyncGenerator<StatusList["submissions"][number], void, undefined> {
    let after = options.after ?? null;
    do {
      const page = await this.list({ ...options, after });
      yield* page.submissions;
      after = page.next_after ?? null;
    } while (after !== null && after !== "");
  }

  // ---- consumer ----

  /**
   * Reserves up to request.max chunks. With request.wait it long-polls: the answer comes
   * as soon as at least one chunk is reserved, or when the wait runs out with none ([]).
   */
  async reserve(request: ReserveRequest = {}, options: CallOptions = {}): Promise<ReservedChunk[]> {
    const waitMs = request.wait === undefined ? 0 : durationMs(request.wait);
    const out = await this.json<{ chunks: ReservedChunk[] }>("POST", "/v1/reserve", { body: reserveBody(request), waitMs, ...options });
    return out.chunks;
  }

  /** The chunks a reserve of request would hand out now, in order, reserving nothing. */
  async preview(request: ReserveRequest = {}, options: CallOptions = {}): Promise<PreviewChunk[]> {
    const out = await this.json<{ chunks: PreviewChunk[] }>("POST", "/v1/reserve/preview", { body: reserveBody(request), ...options });
    return out.chunks;
  }

  /**
   * Completes reserved chunks with their outputs; one result per completion, in order:
   * completed, already_finished (a repeat, or the submission ended) or unknown.
   */
  async complete(completions: Completion[], options: CallOptions = {}): Promise<TokenResult[]> {
    completions.forEach((c, i) => checkText(c.output ?? "", `completions[${i}].output`));
    const out = await this.json<{ results: TokenResult[] }>("POST", "/v1/complete", { body: JSON.stringify({ completions }), ...options });
    return out.results;
  }

  /**
   * Reports failed attempts; one result per failure, in order: retrying, failed,
   * already_finished, lost (the chunk was handed out again) or unknown. retry (default
   * true) counts one attempt; retry_after sets when the chunk is handed out again.
   */
  async fail(failures: ChunkFailure[], options: CallOptions = {}): Promise<TokenResult[]> {
    const wire = failures.map((f) => {
      const { retry_after, ...rest } = f;
      return retry_after === undefined ? rest : { ...rest, retry_after: durationString(retry_after) };
    });
    const out = await this.json<{ results: TokenResult[] }>("POST", "/v1/fail", { body: JSON.stringify({ failures: wire }), ...options });
    return out.results;
  }

  /**
   * Moves the leases of reserved chunks to now + lease (the server's default, 5m, when
   * left out); one result per token, in order: extended (with expires_at), lost,
   * already_finished or unknown.
   */
  async extend(tokens: string[], lease?: Duration, options: CallOptions = {}): Promise<TokenResult[]> {
    const body: { tokens: string[]; lease?: string } = { tokens };
    if (lease !== undefined) body.lease = durationString(lease);
    const out = await this.json<{ results: TokenResult[] }>("POST", "/v1/extend", { body: JSON.stringify(body), ...options });
    return out.results;
  }

  /**
   * Hands out no chunk of a submission whose strategic metadata has key = value (key
   * "@tenant": of the tenant value), by any instance, for duration (1s to 1h):
   * back-pressure when a downstream said "slow down". A consumer key limited to tenants
   * throttles within them only; a throttle set again keeps the later end. Resolves with
   * when it ends ({until}).
   */
  async throttle(key: string, value: MetadataValue, duration: Duration, options: CallOptions = {}): Promise<Throttled> {
    const body = JSON.stringify({ key, value, for: durationString(duration) });
    return this.json<Throttled>("POST", "/v1/throttle", { body, ...options });
  }

  /**
   * Ends the throttles of key = value at once (DELETE /v1/throttle), before their end.
   * Resolves with how many ended ({lifted}: one per tenant of a consumer limited to tenants
   * that set it) once no instance holds them any more. A consumer key limited to tenants
   * lifts its tenants' only; any other consumer key, and an admin key, lifts them in every
   * tenant. None in force rejects with an OpsqError of status 404.
   */
  async liftThrottle(key: string, value: MetadataValue, options: CallOptions = {}): Promise<ThrottleLifted> {
    const body = JSON.stringify({ key, value });
    return this.json<ThrottleLifted>("DELETE", "/v1/throttle", { body, ...options });
  }

  // ---- operations ----

  /** The instances and the shards each holds. */
  // ---- schedules: submissions that start themselves (DESIGN.md §3) ----
  // A producer key manages its tenant's; an admin key names the tenant (tenant option).

  /**
   * Makes a schedule: each run of cron (robfig/cron syntax, in timezone) submits the
   * template submission (its prefix, metadata and idempotency_key may hold {{.Time}} and
   * {{.Date}}), once per run across all instances. Resolves with it and its next_runs; a
   * name in use rejects with an OpsqError of status 409.
   */
  async createSchedule(request: ScheduleRequest, options: CallOptions = {}): Promise<Schedule> {
    return this.json<Schedule>("POST", "/v1/schedules", { body: JSON.stringify(request), ...options });
  }

  /** Replaces the definition of schedule name (its runs so far stay). */
  async replaceSchedule(name: string, request: ScheduleRequest, options: CallOptions = {}): Promise<Schedule> {
    return this.json<Schedule>("PUT", schedulePath(name), { body: JSON.stringify(request), query: tenantQuery(request.tenant), ...options });
  }

  /** Schedule name, with its next_runs and last_runs. */
  async schedule(name: string, options: CallOptions & { tenant?: string } = {}): Promise<Schedule> {
    return this.json<Schedule>("GET", schedulePath(name), { query: tenantQuery(options.tenant), ...options });
  }

  /** The schedules of the key's tenant (an admin key's of tenant, or of every tenant). */
  async schedules(options: CallOptions & { tenant?: string } = {}): Promise<ScheduleList> {
    return this.json<ScheduleList>("GET", "/v1/schedules", { query: tenantQuery(options.tenant), ...options });
  }

  /** Deletes schedule name and its runs (their submissions stay). */
  async deleteSchedule(name: string, options: CallOptions & { tenant?: string } = {}): Promise<void> {
    const path = schedulePath(name);
    const deadline = new Deadline(options.timeout ?? this.timeout);
    try {
      const res = await this.send("DELETE", path, { query: tenantQuery(options.tenant), signal: options.signal, traceparent: options.traceparent, deadline });
      await res.body?.cancel();
    } finally {
      deadline.clear();
    }
  }

  /** Makes no run of schedule name until resumeSchedule. */
  async pauseSchedule(name: string, options: CallOptions & { tenant?: string } = {}): Promise<Schedule> {
    return this.json<Schedule>("POST", schedulePath(name) + "/pause", { query: tenantQuery(options.tenant), ...options });
  }

  /** Runs a paused schedule again from its next time after now. */
  async resumeSchedule(name: string, options: CallOptions & { tenant?: string } = {}): Promise<Schedule> {
    return this.json<Schedule>("POST", schedulePath(name) + "/resume", { query: tenantQuery(options.tenant), ...options });
  }

  /** Makes one run of schedule name now. */
  async triggerSchedule(name: string, options: CallOptions & { tenant?: string } = {}): Promise<ScheduleRun> {
    return this.json<ScheduleRun>("POST", schedulePath(name) + "/trigger", { query: tenantQuery(options.tenant), ...options });
  }

  /**
   * Makes the runs of schedule name scheduled from from to to (RFC 3339 or Date; both
   * included, at most 1 000), each once, and resolves with those it made.
   */
  async backfillSchedule(name: string, from: string | Date, to: string | Date, options: CallOptions & { tenant?: string } = {}): Promise<ScheduleRun[]> {
    const iso = (t: string | Date) => (typeof t === "string" ? t : t.toISOString());
    const body = JSON.stringify({ from: iso(from), to: iso(to) });
    const out = await this.json<{ runs: ScheduleRun[] }>("POST", schedulePath(name) + "/backfill", { body, query: tenantQuery(options.tenant), ...options });
    return out.runs;
  }

  async cluster(options: CallOptions = {}): Promise<Cluster> {
    return this.json<Cluster>("GET", "/v1/cluster", options);
  }

  // ---- the plumbing ----

  /** json sends a request and reads its JSON answer, both within the call's timeout. */
  private async json<T>(
    method: string,
    path: string,
    options: CallOptions & { query?: Record<string, string>; body?: string; waitMs?: number },
  ): Promise<T> {
    const deadline = new Deadline((options.timeout ?? this.timeout) + (options.waitMs ?? 0));
    try {
      const res = await this.send(method, path, {
        query: options.query,
        body: options.body,
        contentType: options.body === undefined ? undefined : "application/json",
        signal: options.signal,
        traceparent: options.traceparent,
        deadline,
      });
      return (await this.readJSON(res, method, path, options.signal, deadline)) as T;
    } finally {
      deadline.clear();
    }
  }

  /** send sends a request and returns its answer if 2xx; else it throws an OpsqError. */
  private async send(
    method: string,
    path: string,
    r: {
      query?: Record<string, string> | undefined;
      body?: BodyInit | undefined;
      contentType?: string | undefined;
      signal?: AbortSignal | undefined;
      traceparent?: string | undefined;
      deadline: Deadline;
    },
  ): Promise<Response> {
    let url = this.baseURL + path;
    const q = new URLSearchParams(r.query ?? {}).toString();
    if (q !== "") url += "?" + q;
    const headers: Record<string, string> = { Accept: "application/json, application/x-ndjson", ...this.headers };
    if (r.contentType !== undefined) headers["Content-Type"] = r.contentType;
    if (this.key !== undefined && this.key !== "") headers.Authorization = "Bearer " + this.key;
    if (r.traceparent !== undefined && r.traceparent !== "") headers.traceparent = r.traceparent;
    const { signal, done } = anySignal(r.signal, r.deadline.signal);
    const init: RequestInit & { duplex?: "half" } = { method, headers, signal };
    if (r.body !== undefined) {
      init.body = r.body;
      if (r.body instanceof ReadableStream) init.duplex = "half"; // fetch streams a body only so
    }
    let res: Response;
    try {
      res = await untilAborted(this.fetchFn(url, init), signal);
    } catch (e) {
      throw this.failed(e, method, path, r.signal, r.deadline);
    } finally {
      done();
    }
    if (res.ok) return res;
    let text = "";
    try {
      text = await readText(res, 64 << 10);
    } catch {
      // The status says enough.
    }
    throw errorFrom(res, text);
  }

  /** readJSON reads a JSON answer, within the deadline. */
  private async readJSON(res: Response, method: string, path: string, signal: AbortSignal | undefined, deadline: Deadline): Promise<unknown> {
    let text: string;
    try {
      text = await readBody(res, signal, deadline.signal);
    } catch (e) {
      throw this.failed(e, method, path, signal, deadline);
    }
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new OpsqError(res.status, "bad_answer", `${method} ${path}: the answer is not JSON (${(e as Error).message}): ${text.slice(0, 200)}`);
    }
  }

  /**
   * ndjson yields the JSON values of the lines of an NDJSON answer. With idle, the stream
   * fails when it sends nothing for idle's time. Leaving early closes the stream.
   */
  private async *ndjson(res: Response, method: string, path: string, signal: AbortSignal | undefined, idle: Deadline | null): AsyncGenerator<unknown, void, undefined> {
    if (res.body === null) return;
    const reader = res.body.getReader();
    const { signal: both, done } = anySignal(signal, idle?.signal);
    const dec = new TextDecoder();
    let buf = "";
    let finished = false;
    try {
      for (;;) {
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await untilAborted(reader.read(), both);
        } catch (e) {
          throw this.failed(e, method, path, signal, idle);
        }
        if (r.done) break;
        idle?.reset();
        buf += dec.decode(r.value, { stream: true });
        let start = 0;
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n", start)) {
          const line = buf.slice(start, nl);
          start = nl + 1;
          if (line.trim() !== "") yield parseLine(line, method, path);
        }
        buf = buf.slice(start);
      }
      buf += dec.decode();
      if (buf.trim() !== "") yield parseLine(buf, method, path);
      finished = true;
    } finally {
      done();
      if (!finished) void reader.cancel().catch(() => {});
    }
  }

  /** failed turns what fetch threw into the error of the call. */
  private failed(e: unknown, method: string, path: string, signal: AbortSignal | undefined, deadline: Deadline | null): unknown {
    if (e instanceof OpsqError) return e;
    if (signal?.aborted) return signal.reason ?? e;
    if (deadline?.expired) {
      return new OpsqError(0, "timeout", `${method} ${this.baseURL}${path}: no answer within ${deadline.ms} ms`, { cause: e });
    }
    const cause = e as { message?: string; cause?: { message?: string; code?: string } };
    const why = [cause?.message, cause?.cause?.code ?? cause?.cause?.message].filter(Boolean).join(": ");
    return new OpsqError(0, "unreachable", `${method} ${this.baseURL}${path}: ${why || String(e)}`, { cause: e });
  }
}

/** reserveBody is the JSON of a reserve request, its strategy in the JSON form. */
function reserveBody(request: ReserveRequest): string {
  const { strategy, lease, wait, ...rest } = request;
  const body: Record<string, unknown> = { ...rest };
  if (lease !== undefined) body.lease = durationString(lease);
  if (wait !== undefined) body.wait = durationString(wait);
  const json = JSON.stringify(body);
  if (strategy === undefined) return json;
  // A strategy in the text form is turned into JSON text, kept as text so that an int64
  // value stays exact.
  const s = typeof strategy === "string" ? strategyJSON(strategy) : JSON.stringify(strategy);
  return json === "{}" ? `{"strategy":${s}}` : `${json.slice(0, -1)},"strategy":${s}}`;
}

/** submissionPath is /v1/submissions/{id}. */
function submissionPath(id: string): string {
  if (id === "") throw new TypeError("opsq: empty submission id");
  return "/v1/submissions/" + encodeURIComponent(id);
}

/** checkText refuses a string JSON would carry as a lone surrogate escape (no UTF-8 can). */
function checkText(s: string, what: string): void {
  if (typeof s === "string" && loneSurrogate.test(s)) {
    throw new TypeError(`opsq: ${what} holds a lone UTF-16 surrogate, which is not text: encode binary data first (base64, say)`);
  }
}

function isIntegerText(s: string): boolean {
  return /^-?[0-9]+$/.test(s);
}

function parseLine(line: string, method: string, path: string): unknown {
  try {
    return JSON.parse(line);
  } catch (e) {
    throw new OpsqError(200, "bad_answer", `${method} ${path}: a line is not JSON (${(e as Error).message}): ${line.slice(0, 200)}`);
  }
}

/** errorFrom is the OpsqError of a non-2xx answer whose body is text. */
function errorFrom(res: Response, text: string): OpsqError {
  const ra = Number(res.headers.get("Retry-After"));
  const retryAfter = Number.isFinite(ra) && ra > 0 ? ra : undefined;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (body?.error && typeof body.error.code === "string" && body.error.code !== "") {
      return new OpsqError(res.status, body.error.code, String(body.error.message ?? ""), { retryAfter });
    }
  } catch {
    // Not an opsq error body: a proxy's page, say.
  }
  let msg = text.trim();
  if (msg.length > 1024) msg = msg.slice(0, 1024) + "…";
  return new OpsqError(res.status, `http_${res.status}`, msg || res.statusText, { retryAfter });
}

/**
 * untilAborted is p, or a rejection with signal's reason once it aborts: fetch and its
 * body reads heed their signal on their own, but not in every runtime at every stage (an
 * answer whose body stalls, in Node 18), and a call must never outlive its deadline.
 */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const on = () => reject(signal.reason);
    signal.addEventListener("abort", on, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", on);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", on);
        reject(e);
      },
    );
  });
}

/** readBody reads a whole body as text, until either signal aborts (then the body is cancelled). */
async function readBody(res: Response, ...signals: (AbortSignal | undefined)[]): Promise<string> {
  if (res.body === null) return "";
  const { signal, done } = anySignal(...signals);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let out = "";
  let finished = false;
  try {
    for (;;) {
      const r = await untilAborted(reader.read(), signal);
      if (r.done) break;
      out += dec.decode(r.value, { stream: true });
    }
    finished = true;
    return out + dec.decode();
  } finally {
    done();
    if (!finished) void reader.cancel().catch(() => {});
  }
}

/** readText reads at most max bytes of a body as text, then drops the rest. */
async function readText(res: Response, max: number): Promise<string> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let out = "";
  let n = 0;
  try {
    while (n < max) {
      const r = await reader.read();
      if (r.done) break;
      n += r.value.length;
      out += dec.decode(r.value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return out + dec.decode();
}

/**
 * A Deadline aborts its signal after ms milliseconds, unless cleared; reset starts the
 * time again (an idle timeout). Its timer is cleared by clear, so that it keeps no
 * runtime alive after the call.
 */
export class Deadline {
  private readonly ctl = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  expired = false;

  constructor(readonly ms: number) {
    this.reset();
  }

  get signal(): AbortSignal {
    return this.ctl.signal;
  }

  reset(): void {
    if (this.expired) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.expired = true;
      this.ctl.abort(new DOMException(`no answer within ${this.ms} ms`, "TimeoutError"));
    }, this.ms);
  }

  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/**
 * anySignal is a signal aborted when any of signals is (AbortSignal.any is newer than
 * Node 18); done removes its listeners.
 */
export function anySignal(...signals: (AbortSignal | undefined | null)[]): { signal: AbortSignal; done: () => void } {
  const ctl = new AbortController();
  const undo: (() => void)[] = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    const on = () => ctl.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    undo.push(() => s.removeEventListener("abort", on));
  }
  return { signal: ctl.signal, done: () => undo.forEach((f) => f()) };
}

/** sleep waits ms milliseconds, or rejects with signal's reason when it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", on);
      resolve();
    }, Math.max(0, ms));
    const on = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", on, { once: true });
  });
}

/** schedulePath is /v1/schedules/{name}. */
function schedulePath(name: string): string {
  if (name === "") throw new TypeError("opsq: empty schedule name");
  return "/v1/schedules/" + encodeURIComponent(name);
}

/** tenantQuery is ?tenant= when a tenant is named. */
function tenantQuery(tenant: string | undefined): Record<string, string> | undefined {
  return tenant === undefined || tenant === "" ? undefined : { tenant };
}
