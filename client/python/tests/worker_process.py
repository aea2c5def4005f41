"""A worker process for test_worker.SignalTest: works the chunks of tag OPSQ_TEST_TAG, two
at once with no prefetch, 3s each, printing "started <index>" as each starts, and prints its stats when it
stops (on SIGTERM)."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opsq  # noqa: E402


out = threading.Lock()


def fn(ch: opsq.Chunk) -> str:
    with out:  # whole lines: two threads print at once
        sys.stdout.write(f"started {ch.chunk_index}\n")
        sys.stdout.flush()
    time.sleep(3)
    return "done " + (ch.input or "")


t = os.environ["OPSQ_TEST_TAG"]
stats = opsq.Worker(
    opsq.Client(),
    fn,
    concurrency=2,
    prefetch=0,
    strategy={"select_only": {"key": "test", "value": t, "then": "oldest_first"}},
    wait=20,
).run()
print(f"stats done={stats.done} failed={stats.failed} lost={stats.lost}", flush=True)
