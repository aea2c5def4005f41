"""The trace context against real instances that export their spans: a submission's
traceparent comes back on its chunks, and the worker sends a traceparent with each
chunk's complete, fail and extends — the chunk's, or the one its function sets — so that
the instance's spans of those calls join the producer's trace beneath it."""

from __future__ import annotations

import os
import threading
import unittest
from typing import Dict, List, Set

import opsq

from support import consumer, only, producer, spans, tag, wait_for


def new_trace() -> str:
    return os.urandom(16).hex()


def new_span() -> str:
    return os.urandom(8).hex()


def server_spans(trace_id: str, name: str) -> List[dict]:
    return [s for s in spans(trace_id) if s["name"] == name and s["kind"] == "SPAN_KIND_SERVER"]


def children(trace_id: str, parent: str) -> Set[str]:
    """The names of the instances' spans right under parent. (An extend that lands on an
    instance other than its chunk's owner is forwarded: the owner's span of it is a child
    of the first instance's.)"""
    return {s["name"] for s in spans(trace_id) if s["parent_span_id"] == parent and s["kind"] == "SPAN_KIND_SERVER"}


class TraceTest(unittest.TestCase):
    def test_submit_reserve_complete_fail(self) -> None:
        t = tag()
        trace_id, producer_span = new_trace(), new_span()
        tp = f"00-{trace_id}-{producer_span}-01"
        p = producer()
        p.submit(["ok", "bad"], strategic_metadata={"test": t}, on_failure="continue", traceparent=tp)
        p.submit_ndjson(iter(["more"]), strategic_metadata={"test": t}, traceparent=tp)
        p.submit(["none"], strategic_metadata={"test": t}, traceparent="not a traceparent")  # ignored

        seen: Dict[str, object] = {}
        consumer_spans: Dict[str, str] = {}
        lock = threading.Lock()

        def fn(ch: opsq.Chunk) -> str:
            # The function's own span, a child of the chunk's context: the worker sends its
            # traceparent with the chunk's complete or fail.
            span = new_span()
            with lock:
                seen[ch.input] = ch.traceparent
                consumer_spans[ch.input] = span
            if ch.traceparent:
                opsq.set_traceparent(f"00-{trace_id}-{span}-01")
            if ch.input == "bad":
                raise opsq.FailNow("bad input")
            return ch.input

        stats = opsq.Worker(consumer(), fn, strategy=only(t), concurrency=4, wait=2, once=True, handle_signals=False).run()
        self.assertEqual((stats.done, stats.failed), (3, 1), stats)
        self.assertEqual(seen, {"ok": tp, "bad": tp, "more": tp, "none": None})

        def joined() -> bool:
            submits = server_spans(trace_id, "POST /v1/submissions")
            completes = {s["parent_span_id"] for s in server_spans(trace_id, "POST /v1/complete")}
            fails = {s["parent_span_id"] for s in server_spans(trace_id, "POST /v1/fail")}
            return (
                [s["parent_span_id"] for s in submits] == [producer_span, producer_span]
                and completes == {consumer_spans["ok"], consumer_spans["more"]}
                and fails == {consumer_spans["bad"]}
            )

        wait_for("the instances' spans of both submits under the producer's, of the complete and fail under the function's", joined)

    def test_worker_sends_the_chunks_traceparent(self) -> None:
        # A function that sets none: the chunk's own goes with its extends and complete.
        t = tag()
        trace_id, producer_span = new_trace(), new_span()
        producer().submit(["slow"], strategic_metadata={"test": t}, traceparent=f"00-{trace_id}-{producer_span}-01")

        def fn(ch: opsq.Chunk) -> str:
            # Hold the chunk until the worker has extended its lease (every half of it).
            wait_for("an extend in the chunk's trace", lambda: server_spans(trace_id, "POST /v1/extend"))
            return "done"

        stats = opsq.Worker(consumer(), fn, strategy=only(t), lease=2, wait=2, once=True, handle_signals=False).run()
        self.assertEqual(stats.done, 1, stats)

        wait_for("an extend and the complete under the producer's span", lambda: children(trace_id, producer_span) >= {"POST /v1/extend", "POST /v1/complete"})

    def test_by_hand(self) -> None:
        t = tag()
        trace_id, producer_span, consumer_span = new_trace(), new_span(), new_span()
        producer().submit(["a"], strategic_metadata={"test": t}, traceparent=f"00-{trace_id}-{producer_span}-01")
        c = consumer()
        ch = wait_for("the chunk", lambda: c.reserve(1, strategy=only(t), wait=5))[0]
        self.assertEqual(ch.traceparent, f"00-{trace_id}-{producer_span}-01")
        mine = f"00-{trace_id}-{consumer_span}-01"
        self.assertEqual(c.extend(ch, 30, traceparent=mine)[0].status, "extended")
        self.assertEqual(c.complete(ch, "A", traceparent=mine).status, "completed")
        wait_for("the extend and the complete under the consumer's span", lambda: children(trace_id, consumer_span) == {"POST /v1/extend", "POST /v1/complete"})


if __name__ == "__main__":
    unittest.main()
