// Throttles against real instances: Client.throttle, and a worker whose function throws
// Throttle. A throttled value is checked by a reserve that gets nothing of it while a value
// not throttled is handed out, never by timing.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, OpsqError, Throttle, work } from "@opsq/client";
import { consumer, consumerKey, only, producer, reserveN, tag, url, url2 } from "./helpers.js";

describe("throttle", { timeout: 180_000 }, () => {
  it("holds a value back, cluster-wide", async () => {
    const t = tag();
    const held = `${t}-held`; // values of this test only: a throttle is cluster-wide
    const free = `${t}-free`;
    // Through each instance: the one that takes a throttle knows it at once, the others
    // when its NOTIFY reaches them; this test checks the client, not that.
    for (const u of [url, url2]) {
      const { until } = await new Client({ baseURL: u, key: consumerKey }).throttle("company", held, "10m");
      const left = Date.parse(until) - Date.now();
      assert.ok(left > 500_000 && left <= 601_000, `the throttle ends in ${left} ms; want about 10 minutes`);
    }
    await producer.submit({ chunks: ["held"], strategic_metadata: { test: t, company: held } });
    await producer.submit({ chunks: ["free"], strategic_metadata: { test: t, company: free } });
    // oldest_first would hand out the held chunk first, were it not throttled.
    const got = await reserveN(consumer, t, 1);
    assert.deepEqual(got.map((c) => c.input), ["free"]);
    assert.deepEqual(await consumer.reserve({ strategy: only(t), wait: "1s" }), []);
    assert.deepEqual(await consumer.reserve({ strategy: { select_only: { key: "company", value: held } }, wait: "1s" }), []);
    await consumer.complete([{ token: got[0]!.token, output: "" }]);
  });

  it("lifts a throttle before its end, cluster-wide", async () => {
    const t = tag();
    const held = `${t}-held`;
    await consumer.throttle("company", held, "1h");
    await producer.submit({ chunks: ["held"], strategic_metadata: { test: t, company: held } });
    assert.deepEqual(await consumer.reserve({ strategy: only(t), wait: "1s" }), []);
    // Lifted through the other instance: every instance has it lifted when it answers.
    const { lifted } = await new Client({ baseURL: url2, key: consumerKey }).liftThrottle("company", held);
    assert.equal(lifted, 1);
    const got = await consumer.reserve({ strategy: only(t) });
    assert.deepEqual(got.map((c) => c.input), ["held"]);
    await consumer.complete([{ token: got[0]!.token, output: "" }]);
    await assert.rejects(consumer.liftThrottle("company", held), (e: unknown) => e instanceof OpsqError && e.status === 404 && /no throttle of company/.test(e.message));
    await assert.rejects(producer.liftThrottle("company", held), (e: unknown) => e instanceof OpsqError && e.status === 403);
  });

  it("refuses bad input and the wrong role", async () => {
    const { until } = await consumer.throttle("ts_throttle_test", 42, 2000);
    assert.ok(Date.parse(until) > Date.now() - 60_000);
    await assert.rejects(consumer.throttle("company", "x", "2h"), (e: unknown) => e instanceof OpsqError && e.status === 400 && /for/.test(e.message));
    await assert.rejects(producer.throttle("company", "x", "30s"), (e: unknown) => e instanceof OpsqError && e.status === 403);
  });

  it("a worker's function throws Throttle: the value is throttled and the chunk failed", async () => {
    const t = tag();
    const refused = `${t}-refused`;
    const other = `${t}-other`;
    const created = await producer.submit({ chunks: ["429"], strategic_metadata: { test: t, company: refused } });
    await producer.submit({ chunks: ["ok"], strategic_metadata: { test: t, company: other } });
    const stats = await work(
      consumer,
      async (ch) => {
        if (ch.input === "429") throw new Throttle("10m", "downstream said 429");
        return ch.input;
      },
      { strategy: only(t), throttleKey: "company", wait: "1s", once: true, handleSignals: false, log: () => {} },
    );
    assert.deepEqual([stats.done, stats.failed, stats.throttled], [1, 1, 1]);
    const { failures } = await producer.failures(created.id);
    assert.deepEqual(failures.map((f) => [f.state, f.error]), [["retrying", "downstream said 429"]]);

    // The refused company's new work is held back, cluster-wide; another's is not.
    await producer.submit({ chunks: ["later"], strategic_metadata: { test: t, company: refused } });
    await producer.submit({ chunks: ["free"], strategic_metadata: { test: t, company: other } });
    const got = await reserveN(consumer, t, 1);
    assert.deepEqual(got.map((c) => c.input), ["free"]);
    assert.deepEqual(await consumer.reserve({ strategy: only(t), wait: "1s" }), []);
    await consumer.complete([{ token: got[0]!.token, output: "" }]);
  });

  it("a Throttle without a key fails the chunk only", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["429"], strategic_metadata: { test: t }, max_retries: 0 });
    const notes: string[] = [];
    const stats = await work(consumer, () => { throw new Throttle("30s"); }, { strategy: only(t), wait: "1s", once: true, handleSignals: false, log: (m) => notes.push(m) });
    assert.deepEqual([stats.failed, stats.throttled], [1, 0]);
    assert.ok(notes.some((n) => n.includes("nothing throttled")), notes.join("\n"));
    assert.equal((await producer.status(created.id)).state, "failed");
  });
});
