// The worker loop against real instances: concurrency, RetryLater, a thrown error,
// extend of long work, once, and a clean stop by AbortSignal and by SIGTERM.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

import { OpsqError, RetryLater, Worker, work } from "@opsq/client";
import { collect, consumer, consumerKey, eventually, only, producer, reserveN, sleep, tag, url2 } from "./helpers.js";

describe("worker", { timeout: 300_000 }, () => {
  it("runs 4 at once, fails with the error's text, and with retry_after on RetryLater", async () => {
    const t = tag();
    const n = 24;
    const created = await producer.submit({
      chunks: Array.from({ length: n }, (_, i) => String(i)),
      strategic_metadata: { test: t },
      on_failure: "continue",
      max_retries: 2,
      retry_backoff: { initial: "0s" },
    });
    let running = 0;
    let most = 0;
    const retryLaterAt = new Map<number, number>();
    const secondAttemptAt = new Map<number, number>();
    const notes: string[] = [];
    const stats = await work(consumer, async (ch) => {
      running++;
      most = Math.max(most, running);
      try {
        await sleep(150);
        const i = Number(ch.input);
        if (i === 3 && ch.retries === 0) {
          retryLaterAt.set(i, Date.now());
          throw new RetryLater("2s", "downstream said 429");
        }
        if (i === 3) secondAttemptAt.set(i, Date.now());
        if (i === 5 && ch.retries === 0) throw new Error("flaky once");
        if (i === 7) throw new TypeError("always broken");
        return `done ${i}`;
      } finally {
        running--;
      }
    }, { concurrency: 4, strategy: only(t), wait: "3s", lease: "1m", once: true, log: (m) => notes.push(m) });

    assert.equal(most, 4, "4 chunks ran at once, never more");
    const st = await producer.status(created.id, { wait: "30s" });
    assert.equal(st.state, "failed", `status ${JSON.stringify(st)}`);
    assert.equal(st.chunks_done, n - 1);
    assert.equal(st.chunks_failed, 1);
    assert.equal(stats.done, n - 1);
    assert.equal(stats.failed, 1 + 1 + 3, "RetryLater once, flaky once, always broken three times");
    assert.equal(stats.lost, 0, `notes: ${notes.join("\n")}`);
    const waited = secondAttemptAt.get(3)! - retryLaterAt.get(3)!;
    assert.ok(waited >= 1500, `chunk 3 came back after ${waited} ms; want about its retry_after (2s)`);

    const failures = await collect(producer.allFailures(created.id));
    assert.deepEqual(failures.map((f) => [f.chunk_index, f.state, f.retries]), [
      [3, "completed", 1],
      [5, "completed", 1],
      [7, "failed", 2],
    ]);
    assert.equal(failures[0]!.error, "downstream said 429");
    assert.equal(failures[1]!.error, "flaky once");
    assert.equal(failures[2]!.error, "TypeError: always broken");
    const results = await collect(producer.results(created.id));
    assert.deepEqual(results[7], { chunk_index: 7, state: "failed", error: "TypeError: always broken" });
    assert.deepEqual(results[3], { chunk_index: 3, output: "done 3" });
  });

  it("extends the lease of long work", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["slow"], strategic_metadata: { test: t } });
    let aborted = false;
    const stats = await work(consumer, async (_ch, { signal }) => {
      await sleep(7000); // more than two leases
      aborted = signal.aborted;
      return "finally";
    }, { strategy: only(t), lease: "3s", wait: "2s", once: true, log: () => {} });
    assert.equal(aborted, false);
    assert.deepEqual(stats, { done: 1, failed: 0, lost: 0, running: 0, throttled: 0 });
    assert.deepEqual(await collect(producer.results(created.id)), [{ chunk_index: 0, output: "finally" }]);
    assert.deepEqual((await producer.failures(created.id)).failures, [], "no lease ran out");
  });

  it("drops the work of a chunk whose submission was cancelled", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["x"], strategic_metadata: { test: t } });
    const notes: string[] = [];
    let seen: AbortSignal | undefined;
    const stats = await work(consumer, async (_ch, { signal }) => {
      seen = signal;
      await producer.cancel(created.id);
      await new Promise((r) => signal.addEventListener("abort", r)); // until the extend finds out
      return "too late";
    }, { strategy: only(t), lease: "2s", wait: "2s", once: true, log: (m) => notes.push(m) });
    assert.equal(seen?.aborted, true);
    assert.equal(stats.lost, 1);
    assert.match(notes.join("\n"), /was cancelled/);
  });

  it("stops on its AbortSignal: no more reserves, the running chunk finishes", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["a", "b", "c"], strategic_metadata: { test: t } });
    const ctl = new AbortController();
    let started = 0;
    const running = work(consumer, async (ch) => {
      started++;
      ctl.abort();
      await sleep(500);
      return ch.input;
    }, { strategy: only(t), wait: "2s", signal: ctl.signal, prefetch: 0, log: () => {} });
    const stats = await running;
    assert.equal(started, 1);
    assert.deepEqual(stats, { done: 1, failed: 0, lost: 0, running: 0, throttled: 0 });
    const st = await producer.status(created.id);
    assert.equal(st.chunks_done, 1);
    await producer.cancel(created.id);
  });

  it("fails a chunk still running at the end of the stop grace", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["stuck"], strategic_metadata: { test: t }, retry_backoff: { initial: "0s" } });
    const w = new Worker(consumer, async (_ch, { signal }) => {
      w.stop();
      await new Promise((r) => signal.addEventListener("abort", r));
      return "never sent";
    }, { strategy: only(t), wait: "2s", stopGrace: 300, log: () => {} });
    const stats = await w.run();
    assert.deepEqual(stats, { done: 0, failed: 1, lost: 0, running: 0, throttled: 0 });
    const [f] = (await producer.failures(created.id)).failures;
    assert.match(f!.error, /^worker stopped/);
    assert.equal(f!.state, "retrying");
    await producer.cancel(created.id);
  });

  it("rejects when the server refuses its reserves", async () => {
    // A producer's key may not reserve: no retrying that.
    await assert.rejects(
      work(producer, () => "never", { strategy: only(tag()), wait: "1s", log: () => {} }),
      (e: unknown) => e instanceof OpsqError && e.status === 403 && e.code === "forbidden",
    );
    await assert.rejects(work(consumer, () => "never", { strategy: "sideways", log: () => {} }), /unknown strategy/);
  });

  it("stops cleanly on SIGTERM", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["a", "b"], strategic_metadata: { test: t } });
    const fixture = fileURLToPath(new URL("./fixtures/sigterm-worker.js", import.meta.url));
    const child = spawn(process.execPath, [fixture], {
      env: { ...process.env, OPSQ_URL: url2, OPSQ_KEY: consumerKey, STRATEGY: only(t) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b));
    child.stderr.on("data", (b: Buffer) => (out += b));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    await eventually("the worker to start a chunk", 60_000, () => out.includes("started"));
    child.kill("SIGTERM");
    const code = await exited;
    assert.equal(code, 0, `the worker's output:\n${out}`);
    assert.match(out, /stats {"done":1,"failed":0,"lost":0,"running":0,"throttled":0}/);
    const st = await producer.status(created.id);
    assert.equal(st.chunks_done, 1, "the running chunk was completed, no other taken");
    await producer.cancel(created.id);
  });

  it("stops at once on a second SIGINT to its process group, failing the running chunk with retry", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["slow"], strategic_metadata: { test: t }, retry_backoff: { initial: "0s" } });
    const fixture = fileURLToPath(new URL("./fixtures/sigint-worker.js", import.meta.url));
    const child = spawn(process.execPath, [fixture], {
      env: { ...process.env, OPSQ_URL: url2, OPSQ_KEY: consumerKey, STRATEGY: only(t) },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true, // its own process group, as a shell's job
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b));
    child.stderr.on("data", (b: Buffer) => (out += b));
    let exitCode: number | null | undefined;
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r((exitCode = code))));
    try {
      await eventually("the worker to start its chunk", 60_000, () => out.includes("started"));
      process.kill(-child.pid!, "SIGINT"); // as a terminal's Ctrl-C: to the group
      await eventually("the stop's note", 10_000, () => out.includes("Press Ctrl-C again"));
      assert.match(out, /for up to 5m \(stopGrace\)/);
      await sleep(1000);
      assert.equal(exitCode, undefined, "the first SIGINT waits for the running chunk");
      const second = Date.now();
      process.kill(-child.pid!, "SIGINT");
      const code = await exited;
      const took = Date.now() - second;
      assert.equal(code, 0, `the worker's output:\n${out}`);
      assert.ok(took < 10_000, `the second SIGINT stopped the worker after ${took} ms; want at once`);
    } finally {
      if (exitCode === undefined) process.kill(-child.pid!, "SIGKILL");
    }
    assert.match(out, /stopping now: failing 1 held chunk\(s\)/);
    assert.match(out, /stats {"done":0,"failed":1,"lost":0,"running":0,"throttled":0}/);
    const [f] = (await producer.failures(created.id)).failures;
    assert.equal(f!.state, "retrying");
    assert.match(f!.error, /^worker stopped at once/);
    // Failed with retry, not left to its lease: reservable again at once.
    const [ch] = await reserveN(consumer, t, 1);
    assert.equal(ch!.retries, 1);
    await producer.cancel(created.id);
  });
});
