// Throughput: the Worker against a hand-written batched loop (reserve 100, complete) on the
// same instances in the same run. It prints the figures ("figure: ..." lines, which
// ts_test.go logs) and asserts only that every chunk was completed once: the machine's
// cores are shared, so a timing would be a flaky assertion.
//
// Reproduce: go test -count=1 -v -run TestTypeScriptClient ./client/typescript/ | grep figure:
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Worker } from "@opsq/client";
import { collect, consumer, only, producer, tag } from "./helpers.js";

const n = 10_000;

function figure(what: string, ms: number): number {
  const rate = (n * 1000) / ms;
  console.log(`figure: ${what}: ${n} chunks in ${(ms / 1000).toFixed(2)}s = ${Math.round(rate).toLocaleString("en-US")} chunks/s`);
  return rate;
}

async function submit(): Promise<{ t: string; id: string }> {
  const t = tag();
  const created = await producer.submit({ chunks: Array.from({ length: n }, (_, i) => String(i)), strategic_metadata: { test: t } });
  return { t, id: created.id };
}

async function allDoneOnce(id: string): Promise<void> {
  const st = await producer.status(id, { wait: "30s" });
  assert.equal(st.state, "completed");
  assert.equal(st.chunks_done, n);
  assert.deepEqual(await collect(producer.allFailures(id)), [], "no chunk failed or was handed out twice");
  const outs = (await collect(producer.results(id))).map((r) => (r.output ?? `${r.state} ${r.chunk_index}`));
  assert.deepEqual(outs, Array.from({ length: n }, (_, i) => String(i)));
}

describe("throughput", { timeout: 600_000 }, () => {
  it("the worker beside a batched reserve + complete loop", async () => {
    let { t, id } = await submit();
    let start = Date.now();
    for (let done = 0; done < n; ) {
      const chunks = await consumer.reserve({ max: 100, strategy: only(t), lease: "1m", wait: "5s" });
      const results = await consumer.complete(chunks.map((ch) => ({ token: ch.token, output: ch.input ?? "" })));
      done += results.filter((r) => r.status === "completed").length;
    }
    const loop = figure("reserve(100) + complete loop", Date.now() - start);
    await allDoneOnce(id);

    for (const [concurrency, prefetch] of [[4, undefined], [4, 4], [4, 100]] as const) {
      ({ t, id } = await submit());
      const w = new Worker(consumer, (ch) => ch.input, { concurrency, prefetch, strategy: only(t), lease: "1m", wait: "5s", quiet: true, handleSignals: false });
      start = Date.now();
      const running = w.run();
      while (w.stats.done < n && Date.now() - start < 300_000) await new Promise((r) => setTimeout(r, 10));
      const took = Date.now() - start;
      w.stop();
      const stats = await running;
      assert.deepEqual([stats.done, stats.failed, stats.lost], [n, 0, 0]);
      const rate = figure(`Worker, concurrency ${concurrency}, prefetch ${prefetch ?? "by default"}`, took);
      console.log(`figure: the worker at ${(rate / loop).toFixed(2)}x the loop`);
      await allDoneOnce(id);
    }
  });
});
