"""The Worker against real instances: concurrency, RetryLater, exceptions, automatic
extend of long work, once mode, and a clean stop of a worker process on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import opsq

from support import WAIT, consumer, only, producer, reserve_all, tag, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))


class WorkerTest(unittest.TestCase):
    def test_concurrency_retry_later_and_exceptions(self) -> None:
        t = tag()
        p = producer()
        n = 24
        created = p.submit([str(i) for i in range(n)], strategic_metadata={"test": t}, max_retries=1, on_failure="continue", retry_backoff={"initial": "0s"})
        lock = threading.Lock()
        running = 0
        most = 0
        attempts = {}

        def fn(ch: opsq.Chunk) -> str:
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
                attempts[ch.chunk_index] = attempts.get(ch.chunk_index, 0) + 1
            try:
                time.sleep(0.5)
                if ch.input == "3" and ch.retries == 0:
                    raise opsq.RetryLater(2, "downstream said 429")
                if ch.input == "7":
                    raise KeyError("no such row")
                return f"<{ch.input}>"
            finally:
                with lock:
                    running -= 1

        w = opsq.Worker(consumer(), fn, concurrency=4, strategy=only(t), wait=4, once=True, handle_signals=False)
        start = time.monotonic()
        stats = w.run()
        took = time.monotonic() - start
        self.assertEqual(most, 4, "four chunks should run at once")
        # 22 clean, chunk 3 on its second attempt; chunk 7 fails both its attempts.
        self.assertEqual((stats.done, stats.failed, stats.lost), (n - 1, 3, 0), stats)
        self.assertEqual((attempts[3], attempts[7]), (2, 2))
        self.assertGreater(took, 2.0, "chunk 3 waits out its retry_after")
        st = p.wait(created.id, timeout=WAIT)
        self.assertEqual((st.state, st.chunks_done, st.chunks_failed), ("failed", n - 1, 1))
        fails = {f.chunk_index: f for f in p.all_failures(created.id)}
        self.assertEqual(set(fails), {3, 7})
        self.assertEqual(fails[3].state, "completed")
        self.assertEqual(fails[3].errors[0].error, "retry after 2s: downstream said 429")
        self.assertEqual((fails[7].state, fails[7].error), ("failed", "KeyError: 'no such row'"))
        # The consumer's name is known to the instance that holds the reservation; a fail
        # that lands on the other one records "" (api/openapi.yaml, AttemptError).
        self.assertIn(fails[7].errors[0].consumer, (w.consumer, ""))
        outs = {r.chunk_index: r.output for r in p.results(created.id)}
        self.assertEqual(outs[3], "<3>")
        self.assertEqual(outs[0], "<0>")

    def test_long_work_is_extended(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["slow", "slower"], strategic_metadata={"test": t}, max_retries=0)

        def fn(ch: opsq.Chunk) -> bytes:
            time.sleep(9)  # the lease is 4s: only extends (every 2s) keep the chunk
            return ch.input.encode()

        stats = opsq.Worker(consumer(), fn, concurrency=2, strategy=only(t), lease=4, wait=1, once=True, handle_signals=False).run()
        self.assertEqual((stats.done, stats.failed, stats.lost), (2, 0, 0), stats)
        self.assertEqual(p.wait(created.id, timeout=WAIT).state, "completed")
        self.assertEqual(list(p.all_failures(created.id)), [], "no lease should have run out")

    def test_cancelled_while_running_is_lost_not_failed(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["x"], strategic_metadata={"test": t})
        started = threading.Event()

        def fn(ch: opsq.Chunk) -> str:
            started.set()
            time.sleep(6)  # extends every 2s: at least one after the cancel
            return "nobody wants this"

        w = opsq.Worker(consumer(), fn, strategy=only(t), lease=4, wait=1, once=True, handle_signals=False)
        result = {}
        th = threading.Thread(target=lambda: result.setdefault("stats", w.run()))
        th.start()
        self.assertTrue(started.wait(WAIT))
        p.cancel(created.id)
        th.join(WAIT)
        self.assertFalse(th.is_alive())
        stats = result["stats"]
        self.assertEqual((stats.done, stats.failed, stats.lost), (0, 0, 1), stats)
        self.assertEqual(p.status(created.id).state, "cancelled")

    def test_stop_fails_what_is_still_running(self) -> None:
        t = tag()
        p = producer()
        created = p.submit(["stuck"], strategic_metadata={"test": t}, retry_backoff={"initial": "0s"})
        started = threading.Event()
        release = threading.Event()

        def fn(ch: opsq.Chunk) -> str:
            started.set()
            release.wait(WAIT)
            return "too late"

        w = opsq.Worker(consumer(), fn, strategy=only(t), wait=1, stop_grace=0.5, handle_signals=False)
        result = {}
        th = threading.Thread(target=lambda: result.setdefault("stats", w.run()))
        th.start()
        self.assertTrue(started.wait(WAIT))
        w.stop()
        th.join(WAIT)
        release.set()
        self.assertFalse(th.is_alive())
        stats = result["stats"]
        self.assertEqual((stats.done, stats.abandoned, stats.failed), (0, 1, 1), stats)
        (f,) = list(p.all_failures(created.id))
        self.assertTrue(f.error.startswith(opsq.worker.WORKER_STOPPED), f.error)
        self.assertEqual(f.state, "retrying")
        p.cancel(created.id)

    def test_bad_key_stops_the_worker_with_the_error(self) -> None:
        w = opsq.Worker(producer(), lambda ch: "", wait=1, handle_signals=False)
        with self.assertRaises(opsq.Forbidden):
            w.run()


class SignalTest(unittest.TestCase):
    def test_sigterm_finishes_running_chunks_and_reserves_no_more(self) -> None:
        t = tag()
        p = producer()
        n = 10
        created = p.submit([str(i) for i in range(n)], strategic_metadata={"test": t})
        env = dict(os.environ, OPSQ_KEY=os.environ["OPSQ_TEST_CONSUMER_KEY"], OPSQ_TEST_TAG=t)
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "worker_process.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            # The script prints "started <index>" as each chunk starts; it runs 2 at once,
            # each for 3s.
            seen = []
            assert proc.stdout is not None
            while len(seen) < 2:
                line = proc.stdout.readline()
                if not line:
                    break
                if line.startswith("started "):
                    seen.append(int(line.split()[1]))
            self.assertEqual(len(seen), 2, "the worker process should start two chunks")
            proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, rest)
        self.assertIn("stats done=2 failed=0 lost=0", rest)
        self.assertNotIn("started", rest, "no chunk should start after SIGTERM")
        st = p.status(created.id)
        self.assertEqual((st.state, st.chunks_done), ("in_progress", 2))
        done = [r.chunk_index for r in p.results(created.id) if r.state == "completed"]
        self.assertEqual(sorted(done), sorted(seen))
        # Nothing else is held: the other chunks can be reserved at once.
        reserve_all(consumer(), t, n - 2)
        self.assertEqual(consumer().reserve(n, strategy=only(t), wait=1), [])
        p.cancel(created.id)

    def test_second_sigint_to_the_group_fails_the_running_chunk_at_once(self) -> None:
        # As a terminal's Ctrl-C: SIGINT to the worker's process group, twice.
        t = tag()
        p = producer()
        created = p.submit(["slow"], strategic_metadata={"test": t}, retry_backoff={"initial": "0s"})
        env = dict(os.environ, OPSQ_KEY=os.environ["OPSQ_TEST_CONSUMER_KEY"], OPSQ_TEST_TAG=t)
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "worker_sigint.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a shell's job
        )
        lines = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            wait_for("the chunk to start", lambda: any(line.startswith("started ") for line in lines))
            os.killpg(proc.pid, signal.SIGINT)
            wait_for("the stop's note", lambda: any("Press Ctrl-C again" in line for line in lines))
            note = next(line for line in lines if "Press Ctrl-C again" in line)
            self.assertIn("for up to 300s (stop_grace)", note)
            time.sleep(1)
            self.assertIsNone(proc.poll(), "the first SIGINT waits for the running chunk")
            second = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=WAIT)
            took = time.monotonic() - second
            reader.join(WAIT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out = "".join(lines)
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(took, 10, f"the second SIGINT should stop the worker at once; it took {took:.1f}s\n{out}")
        self.assertIn("stopping now: failing 1 held chunk(s)", out)
        self.assertIn("stats done=0 failed=1 lost=0 abandoned=1", out)
        (f,) = list(p.all_failures(created.id))
        self.assertEqual(f.state, "retrying")
        self.assertTrue(f.error.startswith("worker stopped at once"), f.error)
        # Failed with retry, not left to its lease: reservable again at once.
        (ch,) = reserve_all(consumer(), t, 1)
        self.assertEqual(ch.retries, 1)
        p.cancel(created.id)


if __name__ == "__main__":
    unittest.main()
