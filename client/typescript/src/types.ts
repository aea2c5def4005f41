// The API's types, by their names in api/openapi.yaml (generated into openapi.ts at
// build time), and the few shapes the client takes instead of the wire's own.
import type { components, operations } from "./openapi.js";
import type { Duration } from "./duration.js";

type Schemas = components["schemas"];

/** A whole JSON submission: its chunks, or an object-storage prefix and chunk_count. */
export type Submission = Schemas["Submission"];
/** Everything a submission carries but its chunks: the first line of an NDJSON body. */
export type SubmissionHeader = Schemas["SubmissionHeader"];
export type Created = Schemas["Created"];
export type Status = Schemas["Status"];
export type State = Schemas["State"];
/** A list's filter: a state, or running, paused or scheduled (phases of in_progress). */
export type ListState = Schemas["ListState"];
export type StatusList = Schemas["StatusList"];
/**
 * One line of a submission's results: a completed chunk's output, or another's state.
 * Either form's fields may be read on any line (those of the other form are undefined), so
 * `line.output ?? line.error` needs no narrowing, and `line.output !== undefined` narrows
 * to a completed chunk (`line.state` to one that is not).
 */
export type Result = Exclusive<Schemas["Result"]>;

/** Exclusive gives each member of a union the others' fields as optional undefined ones. */
type Exclusive<U, All = U> = U extends unknown ? U & { [K in Exclude<AllKeys<All>, keyof U>]?: undefined } : never;
type AllKeys<U> = U extends unknown ? keyof U : never;
export type Failures = Schemas["Failures"];
export type FailedChunk = Schemas["FailedChunk"];
export type RetryRequest = Schemas["RetryRequest"];
export type RetryManyRequest = Schemas["RetryManyRequest"];
export type Strategy = Schemas["Strategy"];
export type MetadataValue = Schemas["MetadataValue"];
export type StrategicMetadata = Schemas["StrategicMetadata"];
export type ReservedChunk = Schemas["ReservedChunk"];
export type TokenResult = Schemas["TokenResults"]["results"][number];
export type TokenStatus = TokenResult["status"];
export type Cluster = Schemas["Cluster"];
/** A schedule as made or replaced: its name, cron, timezone, submission template, overlap, catch_up, paused. */
export type ScheduleRequest = Schemas["ScheduleRequest"];
/** A schedule: its definition, next_runs and (schedule() only) last_runs. */
export type Schedule = Schemas["Schedule"];
/** One run of a schedule: submitted (submission_id), skipped, missed or failed (error). */
export type ScheduleRun = Schemas["ScheduleRun"];
/** The answer of schedules(). */
export type ScheduleList = Schemas["ScheduleList"];
/** When a throttle ends. */
export type Throttled = Schemas["Throttled"];
/** How many throttles a lift ended. */
export type ThrottleLifted = Schemas["ThrottleLifted"];
/** A chunk a reserve would hand out now (preview): no token, nothing reserved. */
export type PreviewChunk =
  operations["previewReserve"]["responses"][200]["content"]["application/json"]["chunks"][number];

/** A completion: the chunk's token and its output. */
export type Completion = NonNullable<Schemas["CompleteRequest"]["completions"]>[number];

/**
 * A failed attempt: the chunk's token, the error, whether to retry (default true) and how
 * long the chunk waits before it is handed out again (instead of its backoff).
 */
export interface ChunkFailure {
  token: string;
  error?: string;
  retry?: boolean;
  retry_after?: Duration;
}

/** What a reserve asks for. Defaults are the server's: max 1, random, lease 5m, wait 0. */
export interface ReserveRequest {
  /** How many chunks at most, 1 to 10 000. */
  max?: number;
  /**
   * Which chunks: the JSON form (an object, or a leaf's name), or the text form such as
   * "or_else(select_only(mode=preview, random), random)" (see strategyJSON).
   */
  strategy?: Strategy | string;
  /** How long the chunks are the consumer's, 1s to 24h. */
  lease?: Duration;
  /** How long to wait for a chunk when none is available, at most 60s. */
  wait?: Duration;
  /** Who reserves, for the operators; at most 256 bytes. */
  consumer?: string;
}
