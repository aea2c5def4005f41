"""Throttles against real instances: Client.throttle, and a Worker whose function raises
Throttle. A throttled value is checked by a reserve that gets nothing of it while a value
not throttled is handed out, never by timing."""

from __future__ import annotations

import datetime as dt
import unittest

import opsq

from support import consumer, only, producer, reserve_all, tag, urls


class ThrottleTest(unittest.TestCase):
    def test_throttle_holds_the_value_back(self) -> None:
        t = tag()
        held, free = f"{t}-held", f"{t}-free"  # values of this test only: a throttle is cluster-wide
        # Through each instance: the one that takes a throttle knows it at once, the
        # others when its NOTIFY reaches them; this test checks the client, not that.
        for u in urls():
            until = consumer(u).throttle("company", held, "10m")
            left = (until - dt.datetime.now(dt.timezone.utc)).total_seconds()
            self.assertTrue(500 < left <= 601, left)
        p = producer()
        p.submit(["held"], strategic_metadata={"test": t, "company": held})
        p.submit(["free"], strategic_metadata={"test": t, "company": free})
        c = consumer()
        # oldest_first would hand out the held chunk first, were it not throttled.
        got = reserve_all(c, t, 1)
        self.assertEqual([ch.input for ch in got], ["free"])
        self.assertEqual(c.reserve(1, strategy=only(t), wait=1), [])
        self.assertEqual(c.reserve(1, strategy={"select_only": {"key": "company", "value": held, "then": "random"}}, wait=1), [])
        c.complete(got[0], "done")

    def test_throttle_an_integer_and_bad_input(self) -> None:
        c = consumer()
        until = c.throttle("py_throttle_test", 2**62 + 7, dt.timedelta(seconds=2))
        self.assertGreater(until, dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1))
        with self.assertRaises(opsq.BadRequest) as e:
            c.throttle("company", "x", "2h")
        self.assertIn("for", e.exception.message)
        with self.assertRaises(TypeError):
            c.throttle("company", True, 30)  # type: ignore[arg-type]
        with self.assertRaises(opsq.Forbidden):
            producer().throttle("company", "x", 30)

    def test_lift_throttle(self) -> None:
        t = tag()
        held = f"{t}-held"
        c = consumer()
        c.throttle("company", held, "1h")
        producer().submit(["held"], strategic_metadata={"test": t, "company": held})
        self.assertEqual(c.reserve(1, strategy=only(t), wait=1), [])
        # Lifted through the other instance: every instance has it lifted when it answers.
        self.assertEqual(consumer(urls()[-1]).lift_throttle("company", held), 1)
        got = c.reserve(1, strategy=only(t))
        self.assertEqual([ch.input for ch in got], ["held"])
        c.complete(got[0], "done")
        with self.assertRaises(opsq.NotFound) as e:
            c.lift_throttle("company", held)
        self.assertIn("no throttle of company", e.exception.message)
        with self.assertRaises(TypeError):
            c.lift_throttle("company", 1.5)  # type: ignore[arg-type]
        with self.assertRaises(opsq.Forbidden):
            producer().lift_throttle("company", held)

    def test_worker_throttle(self) -> None:
        t = tag()
        refused, other = f"{t}-refused", f"{t}-other"
        p = producer()
        created = p.submit(["429"], strategic_metadata={"test": t, "company": refused})
        p.submit(["ok"], strategic_metadata={"test": t, "company": other})

        def fn(ch: opsq.Chunk) -> str:
            if ch.input == "429":
                raise opsq.Throttle("10m", "downstream said 429")
            return ch.input

        stats = opsq.Worker(consumer(), fn, strategy=only(t), throttle_key="company", wait=1, once=True, handle_signals=False).run()
        self.assertEqual((stats.done, stats.failed, stats.throttled), (1, 1, 1), stats)
        (f,) = list(p.all_failures(created.id))
        self.assertEqual((f.state, f.error), ("retrying", "throttled for 10m: downstream said 429"))

        # The refused company's new work is held back, cluster-wide; another's is not.
        p.submit(["later"], strategic_metadata={"test": t, "company": refused})
        p.submit(["free"], strategic_metadata={"test": t, "company": other})
        c = consumer(urls()[0])
        got = reserve_all(c, t, 1)
        self.assertEqual([ch.input for ch in got], ["free"])
        self.assertEqual(c.reserve(1, strategy=only(t), wait=1), [])
        c.complete(got[0], "done")

    def test_worker_throttle_without_a_key_fails_the_chunk_only(self) -> None:
        t = tag()
        created = producer().submit(["429"], strategic_metadata={"test": t}, max_retries=0)

        def fn(ch: opsq.Chunk) -> str:
            raise opsq.Throttle(30)

        stats = opsq.Worker(consumer(), fn, strategy=only(t), wait=1, once=True, handle_signals=False).run()
        self.assertEqual((stats.failed, stats.throttled), (1, 0), stats)
        self.assertEqual(producer().status(created.id).state, "failed")


if __name__ == "__main__":
    unittest.main()
