/**
 * A duration as the API takes it: a Go duration string such as "30s", "5m" or "1h30m",
 * or a number of milliseconds.
 */
export type Duration = string | number;

const units: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** durationString writes d as a Go duration string: a number n of milliseconds is "<n>ms". */
export function durationString(d: Duration): string {
  if (typeof d === "number") {
    if (!Number.isFinite(d) || d < 0) {
      throw new RangeError(`duration ${d}: want a finite number of milliseconds, at least 0`);
    }
    return `${Math.round(d)}ms`;
  }
  return d;
}

/** durationMs reads d, a Go duration string (such as "1m30s") or milliseconds, as milliseconds. */
export function durationMs(d: Duration): number {
  if (typeof d === "number") {
    return d;
  }
  const s = d.trim();
  let rest = s;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest[0] === "-" ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "0") {
    return 0;
  }
  if (rest === "") {
    throw new RangeError(`invalid duration ${JSON.stringify(d)}: want a Go duration such as "30s" or "5m"`);
  }
  let total = 0;
  const part = /^([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)/;
  while (rest !== "") {
    const m = part.exec(rest);
    if (m === null || m[1] === "" || m[1] === ".") {
      throw new RangeError(`invalid duration ${JSON.stringify(d)}: want a Go duration such as "30s" or "5m"`);
    }
    total += Number(m[1]) * (units[m[2]!] ?? 0);
    rest = rest.slice(m[0].length);
  }
  return sign * total;
}
