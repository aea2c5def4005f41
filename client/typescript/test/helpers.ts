// What the tests share: the instances the Go test started (ts_test.go), clients with the
// keys it made, and a tag per test that keeps its chunks its own.
import { Client, type ReservedChunk } from "@opsq/client";

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run these tests with "go test ./client/typescript" (ts_test.go starts the instances)`);
  }
  return v;
}

export const url = env("OPSQ_URL");
export const url2 = env("OPSQ_URL2");
export const adminKey = env("OPSQ_KEY");
export const producerKey = env("OPSQ_PRODUCER_KEY");
export const consumerKey = env("OPSQ_CONSUMER_KEY");
/** Lists the spans the instances exported (tracingtest.Receiver in the Go test). */
export const spansURL = env("OPSQ_SPANS_URL");

/** A producer on the first instance. */
export const producer = new Client({ baseURL: url, key: producerKey });
/** A consumer on the second instance: what it reserves was often submitted to the first. */
export const consumer = new Client({ baseURL: url2, key: consumerKey });
/** An admin on the first instance. */
export const admin = new Client({ baseURL: url, key: adminKey });

let n = 0;
/**
 * tag returns a value unique to one test: its submissions carry {test: tag} in their
 * strategic metadata, and its consumers reserve with only(tag), so that the test files,
 * which run at once, never take each other's chunks.
 */
export function tag(): string {
  return `ts-${process.pid}-${Date.now().toString(36)}-${++n}`;
}

/** only is the text-form strategy that reserves the chunks of tag only. */
export function only(t: string, then = "oldest_first"): string {
  return `select_only(test="${t}", ${then})`;
}

/** eventually polls check every 50 ms until it returns true, for at most ms. */
export async function eventually(what: string, ms: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** collect reads an async iterable whole. */
export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/**
 * reserveN reserves until it holds n chunks of tag t (a reserve answers as soon as it
 * holds one: the chunks of a submission are spread over the shards, and so over both
 * instances), for at most 60 s.
 */
export async function reserveN(c: Client, t: string, n: number, lease = "5m"): Promise<ReservedChunk[]> {
  const out: ReservedChunk[] = [];
  const deadline = Date.now() + 60_000;
  while (out.length < n) {
    if (Date.now() > deadline) throw new Error(`reserved ${out.length} chunks of ${t} in 60 s; want ${n}`);
    out.push(...(await c.reserve({ max: n - out.length, strategy: only(t), wait: "5s", lease })));
  }
  return out;
}

/** A span an instance exported, as the Go test's receiver lists it: ids in hex. */
export interface Span {
  name: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  kind: string;
}

/** spans returns the spans the instances exported in trace traceId so far. */
export async function spans(traceId: string): Promise<Span[]> {
  const res = await fetch(`${spansURL}?trace_id=${traceId}`);
  if (!res.ok) throw new Error(`GET ${spansURL}: ${res.status}`);
  return (await res.json()) as Span[];
}

/** children returns the names of the instances' spans right under the span parent. */
export async function children(traceId: string, parent: string): Promise<Set<string>> {
  return new Set((await spans(traceId)).filter((s) => s.parent_span_id === parent && s.kind === "SPAN_KIND_SERVER").map((s) => s.name));
}

/** randomHex returns n random bytes in hex: a trace id (16) or a span id (8). */
export function randomHex(n: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, "0")).join("");
}
