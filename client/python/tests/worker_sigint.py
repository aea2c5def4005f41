"""A worker process for test_worker.SignalTest: works the chunks of tag OPSQ_TEST_TAG one
at a time, each for a minute, printing "started <index>" as each starts, with the default
stop grace (the lease, 5 minutes); it prints its stats when it stops."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opsq  # noqa: E402


def fn(ch: opsq.Chunk) -> str:
    print(f"started {ch.chunk_index}", flush=True)
    time.sleep(60)
    return "too late"


t = os.environ["OPSQ_TEST_TAG"]
stats = opsq.Worker(opsq.Client(), fn, strategy={"select_only": {"key": "test", "value": t, "then": "oldest_first"}}, wait=20).run()
print(f"stats done={stats.done} failed={stats.failed} lost={stats.lost} abandoned={stats.abandoned}", flush=True)
