// Schedules against real instances: make one, trigger and backfill runs, read them back,
// pause, list and delete it; bad input and a name in use reject.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { OpsqError } from "@opsq/client";
import { consumer, producer, tag } from "./helpers.js";

describe("schedules", { timeout: 120_000 }, () => {
  it("makes runs, once each", async () => {
    const name = `${tag()}-nightly`;
    const sc = await producer.createSchedule({
      name, cron: "0 2 * * *", timezone: "Europe/Amsterdam", overlap: "allow",
      submission: { chunks: ["x"], metadata: "import of {{.Date}}" },
    });
    assert.equal(sc.next_runs.length, 3);
    await assert.rejects(producer.createSchedule({ name, cron: "@hourly", submission: { chunks: ["x"] } }),
      (e: unknown) => e instanceof OpsqError && e.status === 409);
    const run = await producer.triggerSchedule(name);
    assert.equal(run.outcome, "submitted");
    const st = await producer.status(run.submission_id!);
    assert.match(st.metadata, /^import of 20\d\d-\d\d-\d\d$/);
    const now = new Date();
    const from = new Date(now.getTime() - 2 * 86_400_000);
    const runs = await producer.backfillSchedule(name, from, now);
    assert.ok(runs.length === 1 || runs.length === 2, `backfill made ${runs.length} runs`);
    assert.deepEqual(await producer.backfillSchedule(name, from, now), []);
    assert.equal((await producer.schedule(name)).last_runs?.length, 1 + runs.length);
    assert.equal((await producer.pauseSchedule(name)).paused, true);
    assert.equal((await producer.resumeSchedule(name)).paused, false);
    assert.ok((await producer.schedules()).schedules.some((s) => s.name === name));
    await producer.deleteSchedule(name);
    await assert.rejects(producer.schedule(name), (e: unknown) => e instanceof OpsqError && e.status === 404);
  });

  it("refuses bad input", async () => {
    await assert.rejects(producer.createSchedule({ name: `${tag()}-bad`, cron: "@every 500ms", submission: { chunks: ["x"] } }),
      (e: unknown) => e instanceof OpsqError && e.status === 400 && e.message.includes("cron"));
    await assert.rejects(consumer.schedules(), (e: unknown) => e instanceof OpsqError && e.status === 403);
  });
});
