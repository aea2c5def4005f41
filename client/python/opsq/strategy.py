"""Strategies (DESIGN.md §5) in either form: the JSON form the server takes, or the text
form of the CLI and the docs, such as ``or_else(select_only(mode=preview, random), random)``.

The text form is read here, into the JSON form, with the grammar of opsq's strategy
package::

    strategy = leaf
             | "select_only" "(" key "=" value [ "," strategy ] ")"
             | "prefer_distinct" "(" key "," max [ "," strategy ] ")"
             | "max_simultaneous" "(" key "," max [ "," strategy ] ")"
             | "or_else" "(" strategy "," strategy ")" .
    leaf     = "random" | "oldest_first" | "newest_first" | "custom_priority" .
    key      = word | string .      value = word | string .
    word     = [ "@" ] letters, digits, "_", "-", "." ; a word that is an integer is an int64;
               @tenant is the key of the submission's tenant.
    string   = a JSON string literal, such as "42" or "eu west" .

The server checks the rest (depth, bounds) and names the offending node in its 400.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Tuple

LEAVES = ("random", "oldest_first", "newest_first", "custom_priority")
_KEY_MAX = ("prefer_distinct", "max_simultaneous")
_WORD = re.compile(r"@?[A-Za-z0-9_.\-]+")
_INT = re.compile(r"-?[0-9]+\Z")


class StrategyError(ValueError):
    """A strategy in the text form that does not parse; the message gives the column."""


def to_json(strategy: Any) -> Any:
    """Returns the JSON form of strategy: a dict, list or None is taken as the JSON form
    already; a string starting with ``{`` or ``"`` is JSON text; any other string is the
    text form (a leaf name such as ``random`` reads the same in both)."""
    if strategy is None or not isinstance(strategy, str):
        return strategy
    t = strategy.strip()
    if t.startswith("{") or t.startswith('"'):
        try:
            return json.loads(t)
        except ValueError as e:
            raise StrategyError(f"strategy: not valid JSON: {e}") from None
    return parse_text(strategy)


def parse_text(s: str) -> Any:
    """Reads the text form of a strategy into its JSON form."""
    p = _Parser(s)
    node = p.strategy()
    kind, text, pos = p.next()
    if kind != "eof":
        raise p.error(pos, f"unexpected {text!r} after the strategy")
    return node


class _Parser:
    def __init__(self, s: str) -> None:
        self.s = s
        self.pos = 0

    def error(self, pos: int, msg: str) -> StrategyError:
        return StrategyError(f"strategy: at column {pos + 1}: {msg}")

    def scan(self) -> Tuple[str, Any, int, int]:
        """Returns (kind, text, start, end) of the next token: kind is eof, word, string or
        punct."""
        i = self.pos
        while i < len(self.s) and self.s[i] in " \t\r\n":
            i += 1
        if i == len(self.s):
            return "eof", "end of input", i, i
        c = self.s[i]
        if c in "(),=":
            return "punct", c, i, i + 1
        m = _WORD.match(self.s, i)
        if m:
            return "word", m.group(0), i, m.end()
        if c == '"':
            j = i + 1
            while j < len(self.s) and self.s[j] != '"':
                j += 2 if self.s[j] == "\\" else 1
            if j >= len(self.s):
                raise self.error(i, "unterminated string")
            try:
                text = json.loads(self.s[i : j + 1])
            except ValueError:
                raise self.error(i, f"invalid string {self.s[i:j + 1]}: want a JSON string") from None
            return "string", text, i, j + 1
        raise self.error(i, f"unexpected character {c!r}")

    def peek(self) -> Tuple[str, Any, int]:
        kind, text, start, _ = self.scan()
        return kind, text, start

    def next(self) -> Tuple[str, Any, int]:
        kind, text, start, end = self.scan()
        self.pos = end
        return kind, text, start

    def expect(self, punct: str, what: str) -> None:
        kind, text, pos = self.next()
        if kind != "punct" or text != punct:
            raise self.error(pos, f"expected {punct!r} {what}, got {text!r}")

    def strategy(self) -> Any:
        kind, name, pos = self.next()
        if kind != "word":
            raise self.error(pos, f"expected a strategy name, got {name!r}")
        if name in LEAVES:
            k, t, p = self.peek()
            if k == "punct" and t == "(":
                raise self.error(p, f"{name} takes no parameters: write {name}")
            return name
        if name not in ("select_only", "or_else") + _KEY_MAX:
            k, t, _ = self.peek()
            if not (k == "punct" and t == "("):
                return name  # a leaf this client does not know (a newer server's?): the server decides
            raise self.error(pos, f"unknown strategy {name!r}; known: {', '.join(LEAVES + ('select_only',) + _KEY_MAX + ('or_else',))}")
        self.expect("(", f"after {name}")
        if name == "or_else":
            first = self.strategy()
            self.expect(",", "after the first strategy")
            fallback = self.strategy()
            self.expect(")", "to close or_else")
            return {"or_else": {"first": first, "fallback": fallback}}
        key = self.key()
        node: Dict[str, Any]
        if name == "select_only":
            self.expect("=", "after the key")
            node = {"key": key, "value": self.value()}
        else:
            self.expect(",", "after the key")
            kind, text, pos = self.next()
            if kind != "word" or not _INT.match(text):
                raise self.error(pos, f"expected an integer max, got {text!r}")
            node = {"key": key, "max": int(text)}
        kind, text, pos = self.peek()
        if kind == "punct" and text == ",":
            self.next()
            node["then"] = self.strategy()
        else:
            node["then"] = "random"
        self.expect(")", f"to close {name}")
        return {name: node}

    def key(self) -> str:
        kind, text, pos = self.next()
        if kind not in ("word", "string"):
            raise self.error(pos, f"expected a metadata key, got {text!r}")
        return str(text)

    def value(self) -> Any:
        kind, text, pos = self.next()
        if kind == "string":
            return text
        if kind == "word":
            if _INT.match(text):
                v = int(text)
                if not -(1 << 63) <= v < (1 << 63):
                    raise self.error(pos, f"{text} is out of the int64 range; quote it to keep the string")
                return v
            return text
        raise self.error(pos, f"expected a value (a word, an integer or a JSON string), got {text!r}")


__all__ = ["to_json", "parse_text", "StrategyError", "LEAVES"]
