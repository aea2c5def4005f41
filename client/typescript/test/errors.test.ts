// Errors: OpsqError with the status, code and message of the server's error body, and
// the calls that get no answer.
import assert from "node:assert/strict";
import { type AddressInfo, type Socket, createServer } from "node:net";
import { describe, it } from "node:test";

import { Client, OpsqError, StrategyError } from "@opsq/client";
import { consumer, producer, tag, url } from "./helpers.js";

function isOpsqError(status: number, code: string, message?: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof OpsqError, `got ${e}; want an OpsqError`);
    assert.equal(e.status, status, `status of ${e}`);
    assert.equal(e.code, code, `code of ${e}`);
    if (message) assert.match(e.message, message);
    return true;
  };
}

describe("errors", { timeout: 120_000 }, () => {
  it("is a 404 with its code for an unknown submission", async () => {
    await assert.rejects(producer.status("123456789"), isOpsqError(404, "not_found"));
    await assert.rejects(producer.cancel("123456789"), isOpsqError(404, "not_found"));
    const e = await producer.status("123456789").catch((e: unknown) => e);
    assert.match(String(e), /^OpsqError: 404 not_found: /);
    assert.equal((e as OpsqError).transient, false);
  });

  it("is a 400 naming the field", async () => {
    await assert.rejects(consumer.reserve({ max: 0 }), isOpsqError(400, "bad_request", /max/));
    await assert.rejects(consumer.reserve({ lease: "5 minutes" }), isOpsqError(400, "bad_request", /lease/));
    await assert.rejects(consumer.reserve({ strategy: { select_only: { key: "k", value: 1, then: "sideways" as "random" } } }), isOpsqError(400, "bad_request", /strategy/));
    await assert.rejects(producer.submit({ chunks: ["x"], max_retries: -1 }), isOpsqError(400, "bad_request", /max_retries/));
    await assert.rejects(producer.submit({ chunks: ["x", 7 as unknown as string] }), isOpsqError(400, "bad_request", /chunks\[1\]/));
    await assert.rejects(producer.status("not-an-id"), isOpsqError(400, "bad_request"));
  });

  it("reads a strategy's text form before sending it", async () => {
    await assert.rejects(consumer.reserve({ strategy: "select_only(mode=)" }), StrategyError);
    await assert.rejects(consumer.reserve({ strategy: "sideways" }), /unknown strategy "sideways"/);
  });

  it("is a 401 without a key and a 403 for a key of the wrong role", async () => {
    await assert.rejects(new Client({ baseURL: url }).list(), isOpsqError(401, "unauthorized"));
    await assert.rejects(new Client({ baseURL: url, key: "wrong" }).list(), isOpsqError(401, "unauthorized"));
    await assert.rejects(producer.reserve({ strategy: `select_only(test="${tag()}")` }), isOpsqError(403, "forbidden"));
  });

  it("times out, and says so", async () => {
    // A server that takes connections and never answers.
    const sockets: Socket[] = [];
    const silent = createServer((sock) => sockets.push(sock));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as AddressInfo).port;
    try {
      const c = new Client({ baseURL: `http://127.0.0.1:${port}`, timeout: 300 });
      const start = Date.now();
      await assert.rejects(c.list(), isOpsqError(0, "timeout", /no answer within 300 ms/));
      // The wait of a long-poll is added to the timeout.
      await assert.rejects(c.status("1", { wait: "1s" }), isOpsqError(0, "timeout", /no answer within 1300 ms/));
      // A call's own timeout replaces the client's.
      await assert.rejects(c.list({ timeout: 100 }), isOpsqError(0, "timeout", /no answer within 100 ms/));
      assert.ok(Date.now() - start < 10_000, `the timeouts took ${Date.now() - start} ms`);
    } finally {
      sockets.forEach((s) => s.destroy());
      silent.close();
    }
    // Against a real instance, a long-poll within its timeout is fine.
    const quick = new Client({ baseURL: url, key: process.env.OPSQ_CONSUMER_KEY!, timeout: 2000 });
    assert.deepEqual(await quick.reserve({ strategy: `select_only(test="${tag()}")`, wait: "3s" }), []);
  });

  it("rejects with the signal's reason when aborted", async () => {
    const ctl = new AbortController();
    const pending = consumer.reserve({ strategy: `select_only(test="${tag()}")`, wait: "30s" }, { signal: ctl.signal });
    setTimeout(() => ctl.abort(new Error("not needed any more")), 200);
    await assert.rejects(pending, /not needed any more/);
  });

  it("is unreachable when nothing listens", async () => {
    const nobody = new Client({ baseURL: "http://127.0.0.1:9", timeout: 5000 });
    await assert.rejects(nobody.list(), (e: unknown) => e instanceof OpsqError && e.status === 0 && e.code === "unreachable" && e.transient);
  });
});
