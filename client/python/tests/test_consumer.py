"""The consumer side against real instances: reserve (strategy in JSON and text form,
wait, lease, consumer name), complete, fail (retry, retry_after) and extend."""

from __future__ import annotations

import datetime as dt
import time
import unittest

import opsq

from support import WAIT, consumer, only, producer, reserve_all, tag, urls, wait_for


class ReserveTest(unittest.TestCase):
    def test_reserve_complete_across_instances(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["a", "b", "c"], strategic_metadata={"test": t, "mode": "preview"}, metadata="m")
        # The text form, read by the client: select_only(test=<t>, oldest_first).
        c = consumer(urls()[-1])
        got = []
        end = time.monotonic() + WAIT
        while len(got) < 3 and time.monotonic() < end:
            got += c.reserve(3 - len(got), strategy=f"select_only(test={t}, select_only(mode=preview, oldest_first))", lease=30, wait=5, consumer="py-consumer/1")
        self.assertEqual(sorted(ch.chunk_index for ch in got), [0, 1, 2])
        for ch in got:
            self.assertEqual((ch.submission_id, ch.retries, ch.metadata, ch.prefix), (created.id, 0, "m", None))
            self.assertEqual(ch.strategic_metadata, {"test": t, "mode": "preview"})
            left = (ch.expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
            self.assertTrue(0 < left <= 31, left)
        # Completed through the other instance: any instance records a completion.
        other = consumer(urls()[0])
        res = other.complete_many([(ch, ch.input + "!") for ch in got])
        self.assertEqual([r.status for r in res], ["completed"] * 3)
        self.assertEqual(other.complete(got[0], "again").status, "already_finished")
        self.assertEqual(p.wait(created.id, timeout=WAIT).state, "completed")
        self.assertEqual([r.output for r in p.results(created.id)], ["a!", "b!", "c!"])

    def test_reserve_waits_then_gets_nothing(self) -> None:
        start = time.monotonic()
        self.assertEqual(consumer().reserve(1, strategy=only(tag()), wait=1.5), [])
        self.assertGreaterEqual(time.monotonic() - start, 1.0)

    def test_reserve_long_poll_wakes_on_submit(self) -> None:
        import threading

        t = tag()
        got = []
        th = threading.Thread(target=lambda: got.extend(consumer().reserve(1, strategy=only(t), wait=30)))
        th.start()
        time.sleep(1)
        producer().submit(["late"], strategic_metadata={"test": t})
        th.join(WAIT)
        self.assertEqual([ch.input for ch in got], ["late"])

    def test_object_storage_chunks_carry_a_prefix(self) -> None:
        t = tag()
        created = producer().submit(prefix="s3://bucket/run/", chunk_count=2, strategic_metadata={"test": t})
        self.assertEqual(created.chunks_total, 2)
        for ch in reserve_all(consumer(), t, 2):
            self.assertEqual((ch.input, ch.prefix), (None, "s3://bucket/run/"))

    def test_preview_reserves_nothing(self) -> None:
        t = tag()
        created = producer().submit(["a", "b"], strategic_metadata={"test": t})
        c = consumer()

        def both():
            got = c.preview(5, strategy=f"select_only(test={t}, oldest_first)")
            return got if len(got) == 2 else None

        seen = wait_for("a preview of both chunks", both)
        self.assertEqual(sorted(p.chunk_index for p in seen), [0, 1])
        self.assertEqual({p.submission_id for p in seen}, {created.id})
        self.assertEqual(len(reserve_all(c, t, 2)), 2)  # still all there to reserve

    def test_not_before(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["later"], strategic_metadata={"test": t}, not_before=3600)
        st = p.status(created.id)
        self.assertIsNotNone(st.not_before)
        assert st.not_before is not None
        left = (st.not_before - dt.datetime.now(dt.timezone.utc)).total_seconds()
        self.assertTrue(3500 < left <= 3601, left)
        self.assertEqual(consumer().reserve(1, strategy=only(t), wait=1), [])
        p.cancel(created.id)

    def test_bad_text_strategy_fails_before_sending(self) -> None:
        with self.assertRaises(opsq.StrategyError) as cm:
            consumer().reserve(1, strategy="select_only(mode preview)")
        self.assertIn("column", str(cm.exception))
        with self.assertRaises(opsq.BadRequest) as cm:
            consumer().reserve(1, strategy="fastest_first")
        self.assertIn("strategy", cm.exception.message)


class FailExtendTest(unittest.TestCase):
    def test_fail_with_retry_after(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["x"], strategic_metadata={"test": t}, retry_backoff={"initial": "0s"})
        (ch,) = reserve_all(c, t, 1)
        self.assertEqual(c.fail(ch, "slow down", retry_after=6).status, "retrying")
        # Not before retry_after, although the backoff would retry at once.
        self.assertEqual(c.reserve(1, strategy=only(t), wait=1), [])
        (again,) = reserve_all(c, t, 1)
        self.assertEqual((again.chunk_index, again.retries), (0, 1))
        c.complete(again, "done")
        self.assertEqual(p.wait(created.id, timeout=WAIT).state, "completed")
        (f,) = list(p.all_failures(created.id))
        self.assertEqual((f.state, f.retries, f.error), ("completed", 1, "slow down"))

    def test_fail_without_retry_fails_the_submission(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["x", "y"], strategic_metadata={"test": t})
        chunks = reserve_all(c, t, 2)
        self.assertEqual(c.fail(chunks[0], "fatal", retry=False).status, "failed")
        st = p.wait(created.id, timeout=WAIT)
        self.assertEqual(st.state, "failed")
        self.assertEqual(st.failure.error if st.failure else None, "fatal")
        self.assertIn(c.complete(chunks[1], "late").status, ("already_finished", "unknown"))

    def test_extend(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["x"], strategic_metadata={"test": t})
        (ch,) = reserve_all(c, t, 1, lease="2s")
        # Extended through both instances (the one that does not own the shard forwards).
        for u in urls():
            (r,) = consumer(u).extend(ch, lease="20s")
            self.assertEqual(r.status, "extended")
            self.assertIsNotNone(r.expires_at)
        time.sleep(3)  # past the first lease, well within the extended one
        self.assertEqual(c.complete(ch, "kept").status, "completed")
        self.assertEqual(p.wait(created.id, timeout=WAIT).state, "completed")
        (r,) = c.extend([ch.token])
        self.assertEqual(r.status, "already_finished")
        self.assertEqual(c.extend(["not-a-token"])[0].status, "unknown")


if __name__ == "__main__":
    unittest.main()
