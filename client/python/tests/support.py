"""What the tests share: the instances and keys python_test.go started and made, clients
of each role, a tag that keeps each test's chunks its own, and waiting for a condition.

The tests run against real "opsq serve" processes: OPSQ_URL and OPSQ_KEY (admin) name
the first, OPSQ_TEST_URLS all of them, OPSQ_TEST_PRODUCER_KEY and OPSQ_TEST_CONSUMER_KEY
keys of those roles; the instances export their spans to an OTLP receiver in the Go test,
which OPSQ_TEST_SPANS_URL lists. Every submission a test makes carries strategic metadata
{"test": <its tag>}, and every reserve selects it, so that no test takes another's chunks.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import unittest
import uuid
from typing import Callable, List, Optional, TypeVar

import opsq

T = TypeVar("T")

#: Generous: the tests share 2 cores with other work.
WAIT = 60.0


def urls() -> List[str]:
    v = os.environ.get("OPSQ_TEST_URLS")
    if not v:
        raise unittest.SkipTest("run through client/python/python_test.go (go test ./client/python/), which starts opsq")
    return v.split(",")


def producer(url: Optional[str] = None) -> opsq.Client:
    return opsq.Client(url or urls()[0], os.environ["OPSQ_TEST_PRODUCER_KEY"], timeout=60)


def consumer(url: Optional[str] = None) -> opsq.Client:
    return opsq.Client(url or urls()[-1], os.environ["OPSQ_TEST_CONSUMER_KEY"], timeout=60)


def admin() -> opsq.Client:
    return opsq.Client(timeout=60)  # OPSQ_URL and OPSQ_KEY


def tag() -> str:
    return "py-" + uuid.uuid4().hex[:12]


def only(t: str) -> dict:
    """The JSON strategy that hands out the chunks of tag t only."""
    return {"select_only": {"key": "test", "value": t, "then": "oldest_first"}}


def wait_for(what: str, cond: Callable[[], Optional[T]], timeout: float = WAIT, every: float = 0.1) -> T:
    """Calls cond until it returns something truthy and returns that; fails after
    timeout."""
    end = time.monotonic() + timeout
    last: Optional[T] = None
    while time.monotonic() < end:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"waited {timeout:.0f}s for {what}; last saw {last!r}")


def reserve_all(c: opsq.Client, t: str, n: int, lease: str = "1m") -> List[opsq.Chunk]:
    """Reserves n chunks of tag t, waiting for them."""
    got: List[opsq.Chunk] = []
    end = time.monotonic() + WAIT
    while len(got) < n and time.monotonic() < end:
        got += c.reserve(n - len(got), strategy=only(t), lease=lease, wait=5, consumer="py-test")
    if len(got) != n:
        raise AssertionError(f"reserved {len(got)} chunks of {t}; want {n}")
    return got


def spans(trace_id: str) -> List[dict]:
    """The spans the instances exported in trace trace_id so far (the Go test's receiver):
    dicts of name, trace_id, span_id, parent_span_id and kind, ids in hex."""
    with urllib.request.urlopen(os.environ["OPSQ_TEST_SPANS_URL"] + "?trace_id=" + trace_id, timeout=30) as r:
        return list(json.load(r))
