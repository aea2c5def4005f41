// The strategy's text form, read into the JSON form the server takes (DESIGN.md §5), as
// "opsq work --strategy" reads it (strategy/text.go):
//
//   strategy = leaf
//            | "select_only" "(" key "=" value [ "," strategy ] ")"
//            | "prefer_distinct" "(" key "," max [ "," strategy ] ")"
//            | "max_simultaneous" "(" key "," max [ "," strategy ] ")"
//            | "or_else" "(" strategy "," strategy ")" .
//   leaf     = "random" | "oldest_first" | "newest_first" | "custom_priority" .
//   key, value = word | JSON string; a word that is an integer is an int64, any other a string.
//   max      = integer, 1..1000000.   word = [A-Za-z0-9_.-]+
//
// The result is JSON text, not an object: an int64 value such as 9007199254740993 is kept
// exactly, which a JavaScript number could not do.

/** A strategy the text form or the JSON form could not be read as. */
export class StrategyError extends Error {
  override readonly name = "StrategyError";
  /** Where in the tree, such as "strategy.or_else.first.select_only.value". */
  readonly path: string;
  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.path = path;
  }
}

const leaves = ["random", "oldest_first", "newest_first", "custom_priority"];
const kinds = [...leaves, "select_only", "prefer_distinct", "max_simultaneous", "or_else"];
/** The most levels a tree may have, counting every node (strategy.MaxDepth). */
const maxDepth = 8;
/** The largest max of prefer_distinct and max_simultaneous (strategy.MaxLimit). */
const maxLimit = 1_000_000;

type Token =
  | { kind: "eof"; pos: number }
  | { kind: "word" | "string" | "punct"; text: string; raw: string; pos: number };

function describe(t: Token): string {
  return t.kind === "eof" ? "end of input" : JSON.stringify(t.raw);
}

const isWordChar = (c: string) => /^[A-Za-z0-9_.-]$/.test(c);
const isInteger = (s: string) => /^-?[0-9]+$/.test(s);

class Parser {
  private pos = 0;
  constructor(private readonly s: string) {}

  fail(path: string, at: number, message: string): never {
    throw new StrategyError(path, `at column ${at + 1}: ${message}`);
  }

  private scan(path: string): [Token, number] {
    let i = this.pos;
    while (i < this.s.length && " \t\n\r".includes(this.s[i]!)) i++;
    if (i >= this.s.length) return [{ kind: "eof", pos: i }, i];
    const c = this.s[i]!;
    if ("(),=".includes(c)) return [{ kind: "punct", text: c, raw: c, pos: i }, i + 1];
    if (isWordChar(c)) {
      let j = i;
      while (j < this.s.length && isWordChar(this.s[j]!)) j++;
      const w = this.s.slice(i, j);
      return [{ kind: "word", text: w, raw: w, pos: i }, j];
    }
    if (c === '"') {
      let j = i + 1;
      while (j < this.s.length && this.s[j] !== '"') {
        if (this.s[j] === "\\") j++;
        j++;
      }
      if (j >= this.s.length) this.fail(path, i, "unterminated string");
      j++;
      const raw = this.s.slice(i, j);
      let text: unknown;
      try {
        text = JSON.parse(raw);
      } catch {
        this.fail(path, i, `invalid string ${raw}: want a JSON string`);
      }
      return [{ kind: "string", text: text as string, raw, pos: i }, j];
    }
    return this.fail(path, i, `unexpected character ${JSON.stringify(String.fromCodePoint(this.s.codePointAt(i)!))}`);
  }

  peek(path: string): Token {
    return this.scan(path)[0];
  }

  next(path: string): Token {
    const [t, end] = this.scan(path);
    this.pos = end;
    return t;
  }

  expect(path: string, punct: string, what: string): void {
    const t = this.next(path);
    if (t.kind !== "punct" || t.text !== punct) {
      this.fail(path, t.pos, `expected ${JSON.stringify(punct)} ${what}, got ${describe(t)}`);
    }
  }

  /** strategy reads the node at path, depth levels from the root, as JSON text. */
  strategy(path: string, depth: number): string {
    const t = this.next(path);
    if (depth > maxDepth) {
      this.fail(path, t.pos, `nested too deep: a strategy may have at most ${maxDepth} levels, counting every node, the leaf included`);
    }
    if (t.kind !== "word") this.fail(path, t.pos, `expected a strategy name, got ${describe(t)}`);
    const k = t.text;
    if (!kinds.includes(k)) {
      this.fail(path, t.pos, `unknown strategy ${JSON.stringify(k)}; known: ${kinds.join(", ")}`);
    }
    if (leaves.includes(k)) {
      const after = this.peek(path);
      if (after.kind === "punct" && after.text === "(") {
        this.fail(`${path}.${k}`, after.pos, `${k} takes no parameters: write ${k}`);
      }
      return JSON.stringify(k);
    }
    const at = (field: string) => `${path}.${k}.${field}`;
    this.expect(`${path}.${k}`, "(", `after ${k}`);
    let body: string;
    switch (k) {
      case "select_only": {
        const key = this.key(at("key"));
        this.expect(at("value"), "=", "after the key");
        const value = this.value(at("value"));
        const then = this.then(at("then"), depth);
        body = `{"key":${key},"value":${value},"then":${then}}`;
        break;
      }
      case "prefer_distinct":
      case "max_simultaneous": {
        const key = this.key(at("key"));
        this.expect(at("max"), ",", "after the key");
        const max = this.max(at("max"));
        const then = this.then(at("then"), depth);
        body = `{"key":${key},"max":${max},"then":${then}}`;
        break;
      }
      default: {
        // or_else
        const first = this.strategy(at("first"), depth + 1);
        const t2 = this.peek(at("fallback"));
        if (t2.kind === "eof" || (t2.kind === "punct" && t2.text === ")")) {
          this.fail(at("fallback"), t2.pos, "required: or_else takes (first, fallback)");
        }
        this.expect(at("fallback"), ",", "after the first strategy");
        const fallback = this.strategy(at("fallback"), depth + 1);
        body = `{"first":${first},"fallback":${fallback}}`;
      }
    }
    this.expect(`${path}.${k}`, ")", `to close ${k}`);
    return `{${JSON.stringify(k)}:${body}}`;
  }

  private then(path: string, parentDepth: number): string {
    const t = this.peek(path);
    if (t.kind === "punct" && t.text === ")") {
      if (parentDepth + 1 > maxDepth) {
        this.fail(path, t.pos, `nested too deep: a strategy may have at most ${maxDepth} levels, counting every node, the leaf included`);
      }
      return '"random"';
    }
    this.expect(path, ",", 'or ")"');
    return this.strategy(path, parentDepth + 1);
  }

  private key(path: string): string {
    const t = this.next(path);
    if (t.kind !== "word" && t.kind !== "string") this.fail(path, t.pos, `expected a metadata key, got ${describe(t)}`);
    if (t.text === "") this.fail(path, t.pos, "must be a non-empty string");
    if (t.text.includes("\u0000")) this.fail(path, t.pos, "must not contain NUL characters (\\u0000)");
    return JSON.stringify(t.text);
  }

  private value(path: string): string {
    const t = this.next(path);
    if (t.kind === "string") {
      if (t.text.includes("\u0000")) this.fail(path, t.pos, "must not contain NUL characters (\\u0000)");
      return JSON.stringify(t.text);
    }
    if (t.kind === "word" && isInteger(t.text)) {
      const i = BigInt(t.text);
      if (i < -(2n ** 63n) || i >= 2n ** 63n) {
        this.fail(path, t.pos, `${t.text} is out of the int64 range; quote it to keep the string ${JSON.stringify(t.text)}`);
      }
      return i.toString(); // canonical: 007 is 7
    }
    if (t.kind === "word") return JSON.stringify(t.text);
    return this.fail(path, t.pos, `must be an integer or a string, got ${describe(t)}`);
  }

  private max(path: string): string {
    const t = this.next(path);
    const message = `must be an integer between 1 and ${maxLimit}`;
    if (t.kind !== "word" || !isInteger(t.text)) this.fail(path, t.pos, `${message}, got ${describe(t)}`);
    const n = BigInt(t.text);
    if (n < 1n || n > BigInt(maxLimit)) this.fail(path, t.pos, message);
    return n.toString();
  }
}

/**
 * strategyJSON reads a strategy in either form and returns its JSON form, as text: the
 * JSON form if s starts with `"` or `{` (after spaces), such as
 * `{"or_else": {"first": {"select_only": {"key": "mode", "value": "preview"}}, "fallback": "random"}}`,
 * else the text form, such as `or_else(select_only(mode=preview, random), random)`.
 * The JSON form is only checked to be JSON here; the server checks the rest (a 400
 * naming the field). Throws StrategyError.
 */
export function strategyJSON(s: string): string {
  const t = s.trim();
  if (t.startsWith('"') || t.startsWith("{")) {
    try {
      JSON.parse(t);
    } catch (e) {
      throw new StrategyError("strategy", `invalid JSON: ${(e as Error).message}`);
    }
    return t;
  }
  const p = new Parser(s);
  const out = p.strategy("strategy", 1);
  const end = p.next("strategy");
  if (end.kind !== "eof") p.fail("strategy", end.pos, `unexpected ${describe(end)} after the strategy`);
  return out;
}
