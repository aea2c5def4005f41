// The trace context against real instances that export their spans: a submission's
// traceparent comes back on its chunks, and the worker sends a traceparent with each
// chunk's complete, fail and extends — the chunk's, or the one its function sets — so that
// the instance's spans of those calls join the producer's trace beneath it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { work } from "@opsq/client";
import { children, consumer, eventually, only, producer, randomHex, reserveN, tag } from "./helpers.js";

describe("trace", { timeout: 180_000 }, () => {
  it("submit → reserve → the worker's complete and fail under the function's span", async () => {
    const t = tag();
    const traceId = randomHex(16);
    const producerSpan = randomHex(8);
    const tp = `00-${traceId}-${producerSpan}-01`;
    await producer.submit({ chunks: ["ok", "bad"], strategic_metadata: { test: t }, on_failure: "continue" }, { traceparent: tp });
    await producer.submitNDJSON({ strategic_metadata: { test: t } }, ["more"], { traceparent: tp });
    await producer.submit({ chunks: ["none"], strategic_metadata: { test: t } }, { traceparent: "not a traceparent" }); // ignored

    const seen = new Map<string, string | undefined>();
    const consumerSpans = new Map<string, string>();
    const stats = await work(
      consumer,
      async (ch, ctx) => {
        seen.set(ch.input!, ch.traceparent);
        // The function's own span, a child of the chunk's context: the worker sends its
        // traceparent with the chunk's complete or fail.
        const span = randomHex(8);
        consumerSpans.set(ch.input!, span);
        if (ctx.traceparent !== undefined) ctx.traceparent = `00-${traceId}-${span}-01`;
        if (ch.input === "bad") throw new Error("bad input");
        return ch.input;
      },
      { strategy: only(t), concurrency: 4, wait: "2s", once: true, handleSignals: false, log: () => {} },
    );
    assert.equal(stats.done, 3);
    assert.deepEqual(Object.fromEntries(seen), { ok: tp, bad: tp, more: tp, none: undefined });

    await eventually("the submits under the producer's span, the complete and the fail under the function's", 60_000, async () => {
      const [underProducer, ok, more, bad] = await Promise.all(
        [producerSpan, consumerSpans.get("ok")!, consumerSpans.get("more")!, consumerSpans.get("bad")!].map((p) => children(traceId, p)),
      );
      return underProducer.has("POST /v1/submissions") && ok.has("POST /v1/complete") && more.has("POST /v1/complete") && bad.has("POST /v1/fail");
    });
  });

  it("the worker sends the chunk's traceparent when the function sets none", async () => {
    const t = tag();
    const traceId = randomHex(16);
    const producerSpan = randomHex(8);
    await producer.submit({ chunks: ["slow"], strategic_metadata: { test: t } }, { traceparent: `00-${traceId}-${producerSpan}-01` });
    const stats = await work(
      consumer,
      async () => {
        // Hold the chunk until the worker has extended its lease (every half of it).
        await eventually("an extend under the producer's span", 60_000, async () => (await children(traceId, producerSpan)).has("POST /v1/extend"));
        return "done";
      },
      { strategy: only(t), lease: "2s", wait: "2s", once: true, handleSignals: false, log: () => {} },
    );
    assert.equal(stats.done, 1);
    await eventually("the complete under the producer's span", 60_000, async () => (await children(traceId, producerSpan)).has("POST /v1/complete"));
  });

  it("by hand: reserve, extend and complete with the consumer's traceparent", async () => {
    const t = tag();
    const traceId = randomHex(16);
    const producerSpan = randomHex(8);
    const consumerSpan = randomHex(8);
    await producer.submit({ chunks: ["a"] , strategic_metadata: { test: t } }, { traceparent: `00-${traceId}-${producerSpan}-01` });
    const [ch] = await reserveN(consumer, t, 1);
    assert.equal(ch!.traceparent, `00-${traceId}-${producerSpan}-01`);
    const mine = `00-${traceId}-${consumerSpan}-01`;
    assert.equal((await consumer.extend([ch!.token], "30s", { traceparent: mine }))[0]!.status, "extended");
    assert.equal((await consumer.complete([{ token: ch!.token, output: "A" }], { traceparent: mine }))[0]!.status, "completed");
    await eventually("the extend and the complete under the consumer's span", 60_000, async () => {
      const got = await children(traceId, consumerSpan);
      return got.has("POST /v1/extend") && got.has("POST /v1/complete");
    });
  });
});
