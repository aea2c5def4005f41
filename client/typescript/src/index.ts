// opsq's TypeScript client: the REST API v1 over fetch (Node >= 18, browsers), and a
// worker loop. See the README of client/typescript.
export { Client, BASE_URL_DEFAULT, TIMEOUT_DEFAULT } from "./client.js";
export type { ClientOptions, CallOptions, Progress, SubmitNDJSONOptions, FailuresOptions, ListOptions } from "./client.js";
export { OpsqError, RetryLater, Throttle } from "./errors.js";
export { type Duration, durationMs, durationString } from "./duration.js";
export { strategyJSON, StrategyError } from "./strategy.js";
export { Worker, work, LEASE_DEFAULT, WAIT_DEFAULT, BATCH_MAX_DEFAULT, BATCH_DELAY_DEFAULT, PREFETCH_MAX_DEFAULT, PROGRESS_EVERY_DEFAULT } from "./worker.js";
export type { Handler, ChunkContext, WorkerOptions, WorkerStats } from "./worker.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
