"""Throughput: the Worker against a hand-written batched loop (reserve 100, complete_many)
on the same instances in the same run. It prints the figures ("figure: ..." lines, which
python_test.go logs) and asserts only that every chunk was completed once: the machine's
cores are shared, so a timing would be a flaky assertion.

Reproduce: go test -count=1 -v -run TestPythonClient ./client/python/ | grep figure:"""

from __future__ import annotations

import threading
import time
import unittest

import opsq

from support import WAIT, consumer, only, producer, tag

N = 10_000


def figure(what: str, n: int, took: float) -> float:
    rate = n / took
    print(f"figure: {what}: {n} chunks in {took:.2f}s = {rate:,.0f} chunks/s", flush=True)
    return rate


class ThroughputTest(unittest.TestCase):
    def submit(self) -> tuple:
        t = tag()
        p = producer()
        created = p.submit([str(i) for i in range(N)], strategic_metadata={"test": t})
        return p, t, created.id

    def check_all_done_once(self, p: opsq.Client, id: str) -> None:
        st = p.wait(id, timeout=WAIT)
        self.assertEqual((st.state, st.chunks_done), ("completed", N))
        self.assertEqual(list(p.all_failures(id)), [], "no chunk should fail or be handed out twice")
        outs = [r.output for r in p.results(id)]
        self.assertEqual(outs, [str(i) for i in range(N)])

    def test_worker_against_a_batched_loop(self) -> None:
        # The hand-written loop, in one thread.
        p, t, id = self.submit()
        c = consumer()
        start = time.monotonic()
        done = 0
        while done < N:
            chunks = c.reserve(100, strategy=only(t), lease="1m", wait=5)
            done += sum(1 for r in c.complete_many([(ch.token, ch.input or "") for ch in chunks]) if r.status == "completed")
        loop = figure("reserve(100) + complete_many loop, 1 thread", N, time.monotonic() - start)
        self.check_all_done_once(p, id)

        for concurrency, prefetch in ((4, None), (4, 4), (4, 100)):
            p, t, id = self.submit()
            w = opsq.Worker(consumer(), lambda ch: ch.input, concurrency=concurrency, prefetch=prefetch, strategy=only(t), lease="1m", wait=5, handle_signals=False, quiet=True)
            result = {}
            th = threading.Thread(target=lambda: result.setdefault("stats", w.run()))
            start = time.monotonic()
            th.start()
            while w.stats.done < N and th.is_alive() and time.monotonic() - start < 5 * WAIT:
                time.sleep(0.01)
            took = time.monotonic() - start
            w.stop()
            th.join(WAIT)
            self.assertFalse(th.is_alive())
            stats = result["stats"]
            self.assertEqual((stats.done, stats.failed, stats.lost), (N, 0, 0), stats)
            rate = figure(f"Worker, concurrency {concurrency}, prefetch {prefetch if prefetch is not None else 'by default'}", N, took)
            print(f"figure: the worker at {rate / loop:.2f}x the loop", flush=True)
            self.check_all_done_once(p, id)


if __name__ == "__main__":
    unittest.main()
