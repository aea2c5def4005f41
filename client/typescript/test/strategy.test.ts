// The strategy's text form, read as the server's parser reads it (strategy/text_test.go).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { StrategyError, durationMs, durationString, strategyJSON } from "@opsq/client";

describe("strategyJSON", () => {
  const cases: [string, string, unknown][] = [
    ["leaf", "random", "random"],
    ["leaf with spaces", " custom_priority\n", "custom_priority"],
    ["or_else of select_only", "or_else(select_only(mode=preview, random), random)", { or_else: { first: { select_only: { key: "mode", value: "preview", then: "random" } }, fallback: "random" } }],
    ["prefer_distinct", "prefer_distinct(company_id, 2, oldest_first)", { prefer_distinct: { key: "company_id", max: 2, then: "oldest_first" } }],
    ["integer value", "select_only(company_id=42, custom_priority)", { select_only: { key: "company_id", value: 42, then: "custom_priority" } }],
    ["leading zeros", "select_only(zip=007)", { select_only: { key: "zip", value: 7, then: "random" } }],
    ["quoted digits are a string", 'select_only(company_id="42")', { select_only: { key: "company_id", value: "42", then: "random" } }],
    ["dashes and dots", "select_only(region=eu-west-1.a, random)", { select_only: { key: "region", value: "eu-west-1.a", then: "random" } }],
    ["JSON escapes", 'select_only("a b"="\\u00e9\\t", random)', { select_only: { key: "a b", value: "é\t", then: "random" } }],
    ["then left out", "max_simultaneous(c, 1000000)", { max_simultaneous: { key: "c", max: 1000000, then: "random" } }],
    ["JSON form", ' {"select_only": {"key": "k", "value": 1}}', { select_only: { key: "k", value: 1 } }],
    ["JSON leaf", '"newest_first"', "newest_first"],
  ];
  for (const [name, text, want] of cases) {
    it(name, () => assert.deepEqual(JSON.parse(strategyJSON(text)), want));
  }

  it("keeps an int64 exact", () => {
    assert.equal(strategyJSON("select_only(id=9007199254740993)"), '{"select_only":{"key":"id","value":9007199254740993,"then":"random"}}');
  });

  const errors: [string, string, RegExp][] = [
    ["unknown", "sideways", /^strategy: at column 1: unknown strategy "sideways"/],
    ["leaf with parameters", "random()", /random takes no parameters/],
    ["missing value", "select_only(mode=)", /^strategy.select_only.value: at column 18: must be an integer or a string/],
    ["max out of range", "prefer_distinct(c, 0)", /must be an integer between 1 and 1000000/],
    ["or_else with one", "or_else(random)", /or_else takes \(first, fallback\)/],
    ["trailing", "random random", /unexpected "random" after the strategy/],
    ["out of int64", "select_only(n=9223372036854775808)", /out of the int64 range/],
    ["too deep", "select_only(k=1, ".repeat(8) + "random" + ")".repeat(8), /nested too deep/],
    ["bad JSON", "{oops", /invalid JSON/],
  ];
  for (const [name, text, want] of errors) {
    it(`refuses: ${name}`, () => {
      assert.throws(() => strategyJSON(text), (e: unknown) => e instanceof StrategyError && want.test(e.message));
    });
  }
});

describe("durations", () => {
  it("reads and writes Go durations", () => {
    assert.equal(durationMs("1m30s"), 90_000);
    assert.equal(durationMs("1.5s"), 1500);
    assert.equal(durationMs("250ms"), 250);
    assert.equal(durationMs("0"), 0);
    assert.equal(durationMs(42), 42);
    assert.equal(durationString(1500), "1500ms");
    assert.equal(durationString("5m"), "5m");
    assert.throws(() => durationMs("5 minutes"), RangeError);
  });
});
