"""The producer side against real instances: submit (JSON and streamed NDJSON), status
and wait, results and follow, failures, retry, pause, resume, cancel, list, and errors."""

from __future__ import annotations

import threading
import time
import unittest

import opsq

from support import WAIT, admin, consumer, only, producer, reserve_all, tag, urls, wait_for


class SubmitTest(unittest.TestCase):
    def test_submit_json_and_status(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["one", "two", "th\u00e9\u0000e"], metadata="meta", strategic_metadata={"test": t, "n": 7}, priority=3, max_retries=2)
        self.assertEqual(created.chunks_total, 3)
        st = p.status(created.id)
        self.assertEqual((st.id, st.state, st.chunks_total, st.chunks_done), (created.id, "in_progress", 3, 0))
        self.assertFalse(st.finished)
        self.assertEqual(st.strategic_metadata, {"test": t, "n": 7})
        self.assertEqual((st.metadata, st.priority, st.paused), ("meta", 3, False))
        self.assertIsNone(st.finished_at)
        self.assertIsNotNone(st.created_at.tzinfo)
        chunks = reserve_all(consumer(), t, 3)
        self.assertEqual(sorted(c.input for c in chunks), sorted(["one", "two", "th\u00e9\u0000e"]))
        self.assertEqual({c.metadata for c in chunks}, {"meta"})

    def test_idempotency_key(self) -> None:
        p = producer()
        key = tag()
        a = p.submit(["x"], idempotency_key=key, strategic_metadata={"test": tag()})
        b = p.submit(["x"], idempotency_key=key, strategic_metadata={"test": tag()})
        self.assertEqual(a.id, b.id)

    def test_submit_ndjson_streams_with_progress(self) -> None:
        t = tag()
        p = producer()
        n = 20000
        calls = []

        def chunks():
            for i in range(n):
                yield f"line {i} \"quoted\" \\ tab\t" if i % 2 else f"line {i}".encode()

        created = p.submit_ndjson(chunks(), progress=lambda c, b: calls.append((c, b)), strategic_metadata={"test": t}, metadata="nd")
        self.assertEqual(created.chunks_total, n)
        self.assertGreater(len(calls), 2, "progress should be called for each 64 KiB piece")
        self.assertEqual(calls[-1][0], n)
        self.assertEqual([c for c, _ in calls], sorted(c for c, _ in calls))
        st = p.status(created.id)
        self.assertEqual((st.chunks_total, st.metadata), (n, "nd"))
        for ch in reserve_all(consumer(), t, 4):
            i = ch.chunk_index
            self.assertEqual(ch.input, f"line {i} \"quoted\" \\ tab\t" if i % 2 else f"line {i}")
        p.cancel(created.id)

    def test_ndjson_error_leaves_no_submission(self) -> None:
        t = tag()
        p = producer()

        def chunks():
            yield "fine"
            raise RuntimeError("the source broke")

        with self.assertRaises(RuntimeError):
            p.submit_ndjson(chunks(), strategic_metadata={"test": t})
        self.assertEqual(p.list(key="test", value=t).submissions, [])

    def test_ndjson_stops_sending_when_the_server_answers_early(self) -> None:
        t = tag()
        total = 3_000_000
        consumed = 0

        def chunks():
            nonlocal consumed
            for i in range(total):
                consumed += 1
                yield "x" * (2 << 20) if i == 1 else "y" * 100  # chunk 1 is over 1 MiB

        start = time.monotonic()
        with self.assertRaises(opsq.APIError) as cm:
            producer().submit_ndjson(chunks(), strategic_metadata={"test": t})
        self.assertIn(cm.exception.status, (400, 413), cm.exception)
        self.assertLess(consumed, total // 2, f"the upload went on after the server's answer ({time.monotonic() - start:.1f}s)")

    def test_zero_chunks_completes_at_once(self) -> None:
        p = producer()
        created = p.submit([], strategic_metadata={"test": tag()})
        self.assertEqual(p.status(created.id).state, "completed")


class WaitAndResultsTest(unittest.TestCase):
    def test_status_wait_returns_when_finished(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["a", "b"], strategic_metadata={"test": t})
        chunks = reserve_all(c, t, 2)

        def finish() -> None:
            time.sleep(1.0)
            for ch in chunks:
                c.complete(ch, ch.input.upper())

        th = threading.Thread(target=finish)
        th.start()
        start = time.monotonic()
        st = p.status(created.id, wait=WAIT)
        th.join()
        self.assertEqual(st.state, "completed", st)
        self.assertLess(time.monotonic() - start, WAIT - 5, "status wait should return when the submission finishes, not at the end of the wait")
        self.assertIsNotNone(st.finished_at)
        self.assertEqual(p.wait(created.id, timeout=WAIT).state, "completed")

    def test_status_wait_runs_out(self) -> None:
        p = producer()
        created = p.submit(["a"], strategic_metadata={"test": tag()})
        start = time.monotonic()
        st = p.status(created.id, wait=1.5)
        self.assertEqual(st.state, "in_progress")
        self.assertGreaterEqual(time.monotonic() - start, 1.0)
        self.assertFalse(p.wait(created.id, timeout=1).finished)
        p.cancel(created.id)

    def test_results_in_any_state_and_follow_while_a_worker_runs(self) -> None:
        t = tag()
        p = producer()
        n = 12
        created = p.submit([str(i) for i in range(n)], strategic_metadata={"test": t}, max_retries=0, on_failure="continue")
        # Before any work: every line pending.
        self.assertEqual([(r.chunk_index, r.state) for r in p.results(created.id)], [(i, "pending") for i in range(n)])

        def fn(ch: opsq.Chunk) -> str:
            time.sleep(0.05)
            if ch.input == "5":
                raise ValueError("five is bad")
            return f"out-{ch.input}"

        w = opsq.Worker(consumer(), fn, concurrency=3, strategy=only(t), wait=1, handle_signals=False)
        th = threading.Thread(target=w.run)
        followed = []
        th.start()
        try:
            for r in p.follow(created.id):
                followed.append(r)
        finally:
            w.stop()
            th.join(WAIT)
        self.assertEqual([r.chunk_index for r in followed], list(range(n)))
        for r in followed:
            if r.chunk_index == 5:
                self.assertEqual((r.state, r.error), ("failed", "ValueError: five is bad"))
            else:
                self.assertEqual((r.state, r.output), ("completed", f"out-{r.chunk_index}"))
        st = p.status(created.id)
        self.assertEqual((st.state, st.chunks_done, st.chunks_failed), ("failed", n - 1, 1))
        self.assertEqual(st.failure, opsq.Failure(chunk_index=5, error="ValueError: five is bad"))
        self.assertEqual(list(p.results(created.id)), followed)


class LifecycleTest(unittest.TestCase):
    def test_failures_retry_pause_resume_cancel(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["a", "b", "c", "d"], strategic_metadata={"test": t}, max_retries=0, on_failure="continue")
        chunks = {ch.chunk_index: ch for ch in reserve_all(c, t, 4)}
        self.assertEqual(c.fail(chunks[1], "one broke", retry=False).status, "failed")
        self.assertEqual(c.fail(chunks[3], "three broke").status, "failed")  # max_retries 0: no retry left
        self.assertEqual(c.complete(chunks[0], "A").status, "completed")
        self.assertEqual(c.complete(chunks[2], "C").status, "completed")
        st = p.wait(created.id, timeout=WAIT)
        self.assertEqual((st.state, st.chunks_failed), ("failed", 2))

        fails = list(p.all_failures(created.id, page_size=1))  # one page per chunk: the iterator pages
        self.assertEqual([(f.chunk_index, f.state, f.error) for f in fails], [(1, "failed", "one broke"), (3, "failed", "three broke")])
        page = p.failures(created.id, limit=1)
        self.assertEqual((len(page.failures), page.next_after), (1, 1))
        # The names before 0.2, deprecated for one release: failures_page is failures, and
        # iterating failures' page yields them all.
        with self.assertWarns(DeprecationWarning):
            self.assertEqual(p.failures_page(created.id, limit=1), page)
        with self.assertWarns(DeprecationWarning):
            self.assertEqual([f.chunk_index for f in p.failures(created.id, limit=1)], [1, 3])

        # One chunk of the two, by its index; then the rest.
        st = p.retry(created.id, chunk_indexes=[3], max_retries=1)
        self.assertEqual((st.state, st.chunks_failed), ("in_progress", 1))
        with self.assertRaises(opsq.BadRequest) as bad:
            p.retry(created.id, chunk_indexes=[99])
        self.assertIn("chunk_indexes[0]", str(bad.exception))
        st = p.retry(created.id, max_retries=1)
        self.assertEqual((st.state, st.finished_at), ("in_progress", None))
        with self.assertRaises(opsq.Conflict) as cm:
            p.retry(created.id)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "nothing_to_retry"))

        # Paused: nothing is handed out; resumed: at once.
        self.assertTrue(p.pause(created.id).paused)
        self.assertTrue(p.pause(created.id).paused)  # idempotent
        self.assertEqual(c.reserve(2, strategy=only(t), wait=1), [])
        self.assertFalse(p.resume(created.id).paused)
        again = reserve_all(c, t, 2)
        self.assertEqual(sorted(ch.chunk_index for ch in again), [1, 3])
        for ch in again:
            c.complete(ch, "retried")
        st = p.wait(created.id, timeout=WAIT)
        self.assertEqual(st.state, "completed")
        self.assertEqual([r.output for r in p.results(created.id)], ["A", "retried", "C", "retried"])

        with self.assertRaises(opsq.Conflict) as cm:
            p.cancel(created.id)
        self.assertEqual(cm.exception.code, "already_finished")

    def test_producer_keeps_its_submission_after_a_retry(self) -> None:
        # Before tenants, a retried submission lost the key that created it
        # (created_by_key), and its producer key got 403 from then on.
        p = producer()
        created = p.submit(["a"], strategic_metadata={"test": tag()})
        p.cancel(created.id)
        p.retry(created.id, "unfinished")
        self.assertTrue(p.pause(created.id).paused)

    def test_cancel_and_retry_unfinished(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["a", "b"], strategic_metadata={"test": t})
        st = p.cancel(created.id)
        self.assertEqual((st.state, st.chunks_skipped), ("cancelled", 2))
        self.assertEqual([r.state for r in p.results(created.id)], ["skipped", "skipped"])
        with self.assertRaises(opsq.Conflict):
            p.retry(created.id)  # "failed": nothing failed
        st = p.retry(created.id, "unfinished")
        self.assertEqual(st.state, "in_progress")
        self.assertEqual(len(reserve_all(consumer(), t, 2)), 2)
        p.cancel(created.id)

    def test_after(self) -> None:
        t = tag()
        p = producer()
        parent = p.submit(["a"], strategic_metadata={"test": t})
        child = p.submit(["b"], strategic_metadata={"test": t}, after=[parent.id])
        loose = p.submit_ndjson(["c"], strategic_metadata={"test": t}, after=[parent.id], after_policy="finished")
        st = p.status(child.id)
        self.assertEqual((st.after, st.waiting_on, st.after_policy), ([parent.id], [parent.id], "completed"))
        self.assertEqual(p.status(loose.id).after_policy, "finished")
        self.assertEqual(p.status(parent.id).after, [])
        p.cancel(parent.id)
        st = p.status(child.id, wait=30)
        self.assertEqual(st.state, "cancelled")
        self.assertIsNone(st.failure.chunk_index)
        self.assertEqual(st.failure.error, f"parent {parent.id} cancelled")
        self.assertEqual([c.input for c in reserve_all(consumer(), t, 1)], ["c"])
        with self.assertRaises(opsq.BadRequest) as e:
            p.submit(["d"], after=[parent.id, "999"])
        self.assertIn("after[1]", str(e.exception))

    def test_retry_many(self) -> None:
        t = tag()
        p, c = producer(), consumer()
        created = p.submit(["a"], strategic_metadata={"test": t}, max_retries=0)
        (ch,) = reserve_all(c, t, 1)
        c.fail(ch, "no", retry=False)
        p.wait(created.id, timeout=WAIT)
        self.assertEqual(p.retry_many(state="failed", key="test", value=t), [created.id])

    def test_list(self) -> None:
        t = tag()
        p = producer()
        ids = [p.submit(["x"], strategic_metadata={"test": t, "k": 42}).id for _ in range(3)]
        page = p.list(key="test", value=t, limit=2)
        self.assertEqual([s.id for s in page.submissions], ids[::-1][:2])
        self.assertIsNotNone(page.next_after)
        self.assertEqual([s.id for s in p.all_submissions(key="test", value=t, limit=2)], ids[::-1])
        self.assertEqual(len(p.list(key="k", value=42, state="in_progress").submissions) >= 3, True)
        self.assertEqual(p.list(key="k", value="42").submissions, [], "the string '42' is not the integer 42")
        for i in ids:
            p.cancel(i)
        self.assertEqual({s.state for s in p.all_submissions(key="test", value=t)}, {"cancelled"})


class ErrorsTest(unittest.TestCase):
    def test_not_found(self) -> None:
        with self.assertRaises(opsq.NotFound) as cm:
            producer().status("123456789")
        e = cm.exception
        self.assertIsInstance(e, opsq.APIError)
        self.assertEqual((e.status, e.code), (404, "not_found"))
        self.assertTrue(e.message)
        self.assertIn("404 not_found", str(e))

    def test_bad_request_names_the_field(self) -> None:
        with self.assertRaises(opsq.BadRequest) as cm:
            producer().submit(["x"], max_retries=-1)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertIn("max_retries", cm.exception.message)
        with self.assertRaises(opsq.BadRequest) as cm:
            consumer().reserve(1, lease="1h", wait="2m")
        self.assertIn("wait", cm.exception.message)
        with self.assertRaises(opsq.BadRequest) as cm:
            consumer().reserve(1, strategy={"select_only": {"key": "k"}})
        self.assertIn("strategy", cm.exception.message)
        # A chunk over 1 MiB, in the middle of an upload: the server's early answer is raised.
        t = tag()
        with self.assertRaises(opsq.APIError) as cm:
            producer().submit_ndjson(iter(["ok"] + ["x" * (2 << 20)] * 3), strategic_metadata={"test": t})
        self.assertIn(cm.exception.status, (400, 413), cm.exception)
        self.assertEqual(producer().list(key="test", value=t).submissions, [])

    def test_keys_and_roles(self) -> None:
        with self.assertRaises(opsq.Unauthorized) as cm:
            opsq.Client(urls()[0], "opsq_not-a-key-not-a-key-not-a-key-xx").status("1")
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        with self.assertRaises(opsq.Forbidden) as cm:
            producer().reserve(1)
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        self.assertTrue(admin().ready())

    def test_tenants(self) -> None:
        # The producer key is of tenant "default"; an admin key may name another.
        t = tag()
        a, p = admin(), producer()
        theirs = a.submit(["x"], strategic_metadata={"test": t}, tenant="py-other")
        self.assertEqual(a.status(theirs.id).tenant, "py-other")
        with self.assertRaises(opsq.NotFound):
            p.status(theirs.id)  # another tenant's submission does not exist for it
        with self.assertRaises(opsq.Forbidden):
            p.submit(["x"], tenant="py-other")
        self.assertEqual([s.id for s in a.list(tenant="py-other", key="test", value=t).submissions], [theirs.id])
        # The text form's @tenant key selects by tenant.
        got = []
        end = time.monotonic() + WAIT
        while not got and time.monotonic() < end:
            got = consumer().reserve(1, strategy=f"select_only(@tenant=py-other, select_only(test={t}))", wait=5)
        self.assertEqual([c.submission_id for c in got], [theirs.id])
        a.cancel(theirs.id)

    def test_unreachable_is_a_transport_error(self) -> None:
        with self.assertRaises(opsq.TransportError):
            opsq.Client("http://127.0.0.1:9", "k", timeout=5).status("1")


if __name__ == "__main__":
    unittest.main()
