// The producer's calls against real instances: submit (JSON and NDJSON), status with
// wait, results, follow while a worker runs, failures, retry, pause, resume, cancel, list.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { OpsqError, type Progress, type Result, work } from "@opsq/client";
import { admin, collect, consumer, only, producer, reserveN, tag } from "./helpers.js";

describe("producer", { timeout: 180_000 }, () => {
  it("submits JSON and reads the results back in chunk order", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["a", "b", "ç\n\"x\""], strategic_metadata: { test: t }, metadata: "m" });
    assert.match(created.id, /^[1-9][0-9]*$/);
    assert.equal(created.chunks_total, 3);

    const st = await producer.status(created.id);
    assert.equal(st.state, "in_progress");
    assert.equal(st.chunks_total, 3);
    assert.deepEqual(st.strategic_metadata, { test: t });

    const chunks = (await reserveN(consumer, t, 3)).sort((a, b) => a.chunk_index - b.chunk_index);
    assert.deepEqual(chunks.map((c) => c.input), ["a", "b", "ç\n\"x\""]);
    assert.ok(chunks.every((c) => c.metadata === "m" && c.submission_id === created.id));
    const results = await consumer.complete(chunks.map((c) => ({ token: c.token, output: c.input!.toUpperCase() })));
    assert.deepEqual(results.map((r) => r.status), ["completed", "completed", "completed"]);

    const done = await producer.status(created.id, { wait: "30s" });
    assert.equal(done.state, "completed");
    assert.deepEqual(await collect(producer.results(created.id)), [
      { chunk_index: 0, output: "A" },
      { chunk_index: 1, output: "B" },
      { chunk_index: 2, output: "Ç\n\"X\"" },
    ]);
  });

  it("streams an NDJSON submission from an iterable, with progress", async () => {
    const t = tag();
    const n = 20_000;
    function* lines() {
      for (let i = 0; i < n; i++) yield `line ${i} ${"x".repeat(i % 50)}`;
    }
    const seen: Progress[] = [];
    const created = await producer.submitNDJSON({ strategic_metadata: { test: t } }, lines(), { onProgress: (p) => seen.push(p) });
    assert.equal(created.chunks_total, n);
    assert.ok(seen.length > 1, `got ${seen.length} progress calls; want several for ${n} chunks`);
    assert.equal(seen.at(-1)!.chunks, n);
    for (let i = 1; i < seen.length; i++) {
      assert.ok(seen[i]!.chunks >= seen[i - 1]!.chunks && seen[i]!.bytes > seen[i - 1]!.bytes, "progress only goes forward");
    }
    const results = await collect(producer.results(created.id));
    assert.equal(results.length, n);
    assert.deepEqual(results[7], { chunk_index: 7, state: "pending" });
    await producer.cancel(created.id);
  });

  it("streams an NDJSON submission from an async iterable, and an error of the iterable leaves no submission", async () => {
    const t = tag();
    async function* lines(fail: boolean) {
      for (let i = 0; i < 300; i++) {
        if (i % 100 === 0) await new Promise((r) => setTimeout(r, 10));
        if (fail && i === 250) throw new Error("the source broke");
        yield `chunk ${i}`;
      }
    }
    const created = await producer.submitNDJSON({ strategic_metadata: { test: t }, idempotency_key: t }, lines(false));
    assert.equal(created.chunks_total, 300);

    const t2 = tag();
    await assert.rejects(producer.submitNDJSON({ strategic_metadata: { test: t2 } }, lines(true)), /the source broke/);
    // The insert is atomic: nothing of the broken one exists, on either instance.
    const listed = await admin.list({ key: "test", value: t2 });
    assert.deepEqual(listed.submissions, []);
    // A repeated idempotency key answers the first submission.
    const again = await producer.submitNDJSON({ strategic_metadata: { test: t }, idempotency_key: t }, ["other"]);
    assert.equal(again.id, created.id);
    await producer.cancel(created.id);
  });

  it("submits after a parent: the child waits, and a cancelled parent cancels it naming the parent", async () => {
    const t = tag();
    const parent = await producer.submit({ chunks: ["a"], strategic_metadata: { test: t } });
    const child = await producer.submit({ chunks: ["b"], strategic_metadata: { test: t }, after: [parent.id] });
    const loose = await producer.submitNDJSON({ strategic_metadata: { test: t }, after: [parent.id], after_policy: "finished" }, ["c"]);
    const st = await producer.status(child.id);
    assert.deepEqual([st.after, st.waiting_on, st.after_policy], [[parent.id], [parent.id], "completed"]);
    assert.equal((await producer.status(parent.id)).after, undefined);
    await producer.cancel(parent.id);
    const cancelled = await producer.status(child.id, { wait: "30s" });
    assert.equal(cancelled.state, "cancelled");
    assert.deepEqual(cancelled.failure, { error: `parent ${parent.id} cancelled` });
    const chunks = await reserveN(consumer, t, 1);
    assert.deepEqual(chunks.map((c) => [c.submission_id, c.input]), [[loose.id, "c"]]);
    await assert.rejects(
      producer.submit({ chunks: ["d"], after: [parent.id, "999"] }),
      (e: unknown) => e instanceof OpsqError && e.status === 400 && /^after\[1\]/.test(e.message),
    );
  });

  it("refuses a chunk that is not text", async () => {
    await assert.rejects(producer.submit({ chunks: ["ok", "\ud800"] }), /chunks\[1\].*surrogate/);
    await assert.rejects(producer.submitNDJSON({}, ["ok", "\udfff"]), /chunk 1.*surrogate/);
  });

  it("waits on status until the submission finishes, or the wait runs out", async () => {
    const t = tag();
    const created = await producer.submit({ chunks: ["x"], strategic_metadata: { test: t } });
    const start = Date.now();
    const st = await producer.status(created.id, { wait: "1s" });
    assert.equal(st.state, "in_progress");
    assert.ok(Date.now() - start >= 900, `status with wait 1s answered after ${Date.now() - start} ms`);

    const waiting = producer.status(created.id, { wait: 60_000 }); // milliseconds are a duration too
    const [ch] = await consumer.reserve({ strategy: only(t), wait: "10s" });
    await consumer.complete([{ token: ch!.token, output: "y" }]);
    const done = await waiting;
    assert.equal(done.state, "completed");
    assert.notEqual(done.finished_at, null);
  });

  it("follows the results while a worker runs", async () => {
    const t = tag();
    const n = 20;
    const created = await producer.submit({ chunks: Array.from({ length: n }, (_, i) => String(i)), strategic_metadata: { test: t } });
    const stop = new AbortController();
    const worker = work(consumer, async (ch) => {
      await new Promise((r) => setTimeout(r, 100));
      return `out ${ch.input}`;
    }, { concurrency: 2, strategy: only(t), wait: "2s", lease: "30s", signal: stop.signal, log: () => {} });

    const lines: Result[] = [];
    let stateAtFirst = "";
    for await (const r of producer.follow(created.id)) {
      if (lines.length === 0) stateAtFirst = (await producer.status(created.id)).state;
      lines.push(r);
    }
    stop.abort();
    const stats = await worker;
    assert.equal(stateAtFirst, "in_progress", "the first line came while the work ran");
    assert.deepEqual(lines, Array.from({ length: n }, (_, i) => ({ chunk_index: i, output: `out ${i}` })));
    assert.equal(stats.done, n);
  });

  it("lists failures, retries, pauses, resumes and cancels", async () => {
    const t = tag();
    const created = await producer.submit({
      chunks: ["ok", "bad", "later"],
      strategic_metadata: { test: t },
      on_failure: "continue",
      max_retries: 0,
    });
    const id = created.id;

    // Pause: nothing is handed out; resume: at once again.
    const paused = await producer.pause(id);
    assert.equal(paused.paused, true);
    assert.equal((await producer.pause(id)).paused, true, "pause is idempotent");
    assert.deepEqual(await consumer.reserve({ strategy: only(t), wait: "1s" }), []);
    const resumed = await producer.resume(id);
    assert.equal(resumed.paused, false);

    const chunks = await reserveN(consumer, t, 3);
    const byInput = new Map(chunks.map((c) => [c.input, c]));
    await consumer.complete([{ token: byInput.get("ok")!.token, output: "fine" }]);
    const failed = await consumer.fail([{ token: byInput.get("bad")!.token, error: "it broke" }]);
    assert.deepEqual(failed.map((r) => r.status), ["failed"], "max_retries 0: the first failure is the last");
    await consumer.complete([{ token: byInput.get("later")!.token, output: "done" }]);

    const st = await producer.status(id, { wait: "30s" });
    assert.equal(st.state, "failed");
    assert.equal(st.chunks_failed, 1);
    assert.deepEqual(st.failure, { chunk_index: 1, error: "it broke" });

    const page = await producer.failures(id, { limit: 10 });
    assert.equal(page.next_after, null);
    assert.equal(page.failures.length, 1);
    assert.equal(page.failures[0]!.chunk_index, 1);
    assert.equal(page.failures[0]!.state, "failed");
    assert.equal(page.failures[0]!.errors[0]!.error, "it broke");
    assert.deepEqual(await collect(producer.allFailures(id, { limit: 1 })), page.failures);
    assert.deepEqual(await collect(producer.results(id)), [
      { chunk_index: 0, output: "fine" },
      { chunk_index: 1, state: "failed", error: "it broke" },
      { chunk_index: 2, output: "done" },
    ]);

    // Retry: in progress again, the completed outputs stay.
    const retried = await producer.retry(id, { max_retries: 1 });
    assert.equal(retried.state, "in_progress");
    assert.equal(retried.finished_at, null);
    const [again] = await consumer.reserve({ strategy: only(t), wait: "10s" });
    assert.equal(again!.input, "bad");
    await consumer.complete([{ token: again!.token, output: "fixed" }]);
    assert.equal((await producer.status(id, { wait: "30s" })).state, "completed");
    await assert.rejects(producer.retry(id), (e: unknown) => e instanceof OpsqError && e.status === 409 && e.code === "nothing_to_retry");

    // Cancel: 409 once finished.
    await assert.rejects(producer.cancel(id), (e: unknown) => e instanceof OpsqError && e.status === 409 && e.code === "already_finished");
    const other = await producer.submit({ chunks: ["x"], strategic_metadata: { test: t } });
    const cancelled = await producer.cancel(other.id);
    assert.equal(cancelled.state, "cancelled");
    assert.equal(cancelled.chunks_skipped, 1);
    await assert.rejects(producer.pause(other.id), (e: unknown) => e instanceof OpsqError && e.status === 409);
  });

  it("retries many submissions by filter and lists them by strategic metadata", async () => {
    const t = tag();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await producer.submit({ chunks: ["x"], strategic_metadata: { test: t, n: i }, max_retries: 0 })).id);
    }
    const page = await producer.list({ key: "test", value: t, limit: 2 });
    assert.deepEqual(page.submissions.map((s) => s.id), [ids[2], ids[1]], "newest first");
    assert.notEqual(page.next_after, null);
    const rest = await producer.list({ key: "test", value: t, limit: 2, after: page.next_after });
    assert.deepEqual(rest.submissions.map((s) => s.id), [ids[0]]);
    assert.equal(rest.next_after, null);
    const all = await collect(producer.allSubmissions({ key: "test", value: t, limit: 2 })); // pages of 2
    assert.deepEqual(all.map((s) => s.id), [ids[2], ids[1], ids[0]]);
    assert.deepEqual((await producer.list({ key: "n", value: 1, state: "in_progress", limit: 1000 })).submissions.filter((s) => ids.includes(s.id)).map((s) => s.id), [ids[1]]);
    assert.deepEqual((await producer.list({ key: "n", value: "1", limit: 1000 })).submissions.filter((s) => ids.includes(s.id)), [], "\"1\" is the string, not the integer");

    // Fail all three for good, then retry them by filter.
    const chunks = await reserveN(consumer, t, 3);
    await consumer.fail(chunks.map((c) => ({ token: c.token, error: "no", retry: false })));
    for (const id of ids) assert.equal((await producer.status(id, { wait: "30s" })).state, "failed");
    const retried = await producer.retryMany({ state: "failed", key: "test", value: t });
    assert.deepEqual(retried, [ids[2], ids[1], ids[0]]);
    // An admin key cleans up: a retried submission no longer knows the key that created
    // it (sql/submission_reopen.sql leaves created_by_key out), so its producer's key is
    // refused (403) on it.
    for (const id of ids) await admin.cancel(id);
  });
});
