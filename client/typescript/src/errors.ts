/**
 * An answer of the server other than 2xx, or a call that got no answer.
 *
 * `status` is the HTTP status (such as 400 or 409), or 0 when no answer came: `code` is
 * then "timeout" (no answer within the call's timeout) or "unreachable" (the request
 * failed: refused, reset, DNS...), and `cause` holds the runtime's error.
 * `code` is the snake_case code of the error body (such as "not_found" or
 * "nothing_to_retry"), or "http_<status>" when the body was not an opsq error (a proxy's
 * error page, say). `message` is the body's message: for a 400 it names the field.
 */
export class OpsqError extends Error {
  override readonly name = "OpsqError";
  /** The HTTP status, or 0 when no answer came. */
  readonly status: number;
  /** The error body's snake_case code, "http_<status>", "timeout" or "unreachable". */
  readonly code: string;
  /** Seconds to wait before trying again, from a 429's or 503's Retry-After; else undefined. */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, message: string, options?: { cause?: unknown; retryAfter?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.code = code;
    this.retryAfter = options?.retryAfter;
    // The stack's first line says status and code too, as toString does.
    if (typeof this.stack === "string") {
      const nl = this.stack.indexOf("\n");
      this.stack = this.toString() + (nl >= 0 ? this.stack.slice(nl) : "");
    }
  }

  /** Reads like "OpsqError: 400 bad_request: chunks[3]: must be a string". */
  override toString(): string {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}`;
  }

  /**
   * Whether the call may succeed if tried again later: no answer, or the server answered
   * 408, 429 or 5xx.
   */
  get transient(): boolean {
    return this.status === 0 || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

/**
 * Thrown by a worker's function to fail its chunk with a retry_after: the chunk waits
 * `after` (a Go duration such as "30s", or milliseconds) before it is handed out again,
 * instead of its submission's backoff. Throw it when a downstream said "slow down".
 */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
  /** How long the chunk waits: a Go duration string, or milliseconds. */
  readonly after: string | number;

  constructor(after: string | number, message?: string, options?: { cause?: unknown }) {
    super(message ?? `retry later (after ${typeof after === "number" ? after + "ms" : after})`, options);
    this.after = after;
  }
}

/**
 * Thrown by a worker's function when a downstream refused the work of its chunk's value of
 * a key (it said "slow down", a 429): the worker throttles that value for `duration` (1s to
 * 1h), cluster-wide — no instance hands out a chunk of a submission with that value until
 * then (Client.throttle) — and fails the chunk with that retry_after. `key` is a strategic
 * metadata key, or "@tenant" for the chunk's tenant; it defaults to the worker's
 * throttleKey. A chunk whose submission has no such key throttles nothing, and is failed
 * all the same.
 */
export class Throttle extends Error {
  override readonly name = "Throttle";
  /** How long the value is throttled: a Go duration string, or milliseconds. */
  readonly duration: string | number;
  /** The key whose value is throttled; undefined for the worker's throttleKey. */
  readonly key: string | undefined;

  constructor(duration: string | number, message?: string, options?: { key?: string; cause?: unknown }) {
    super(message ?? `throttled for ${typeof duration === "number" ? duration + "ms" : duration}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.duration = duration;
    this.key = options?.key;
  }
}
