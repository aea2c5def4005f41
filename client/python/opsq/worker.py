"""A consumer loop: reserve chunks, run a function on each in a thread, complete or fail
them, extend long work, and stop cleanly."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .client import Client, Duration, _seconds, go_duration
from .errors import APIError, OpsqError, TransportError
from .strategy import to_json as strategy_json
from .types import Chunk

log = logging.getLogger("opsq.worker")

#: What a chunk's function returns: its output (None is the empty output).
Output = Union[str, bytes, None]

#: Why a chunk is failed when the worker stops before its function has returned.
WORKER_STOPPED = "worker stopped"
#: How long a reserve, complete, fail or extend that failed waits at most before the next try.
BACKOFF_MAX = 10.0
#: The shortest time between two reserves that found nothing (with wait 0).
RESERVE_GAP_MIN = 1.0
#: The most of an error message sent with a fail (the server keeps 8 KiB).
ERROR_MAX = 8 << 10


class RetryLater(Exception):
    """Raised by a chunk's function to fail the chunk with a ``retry_after``: it is handed
    out again after ``after`` (seconds, a timedelta or a Go duration string) instead of its
    submission's backoff — when a downstream said "slow down", say. It still counts one
    attempt."""

    def __init__(self, after: Duration, message: str = "") -> None:
        super().__init__(message or f"retry after {go_duration(after)}")
        self.after = after
        self.message = message


class FailNow(Exception):
    """Raised by a chunk's function to fail the chunk without retry (``retry: false``):
    its submission's ``on_failure`` decides the rest."""


class Throttle(Exception):
    """Raised by a chunk's function when a downstream refused the work of the chunk's
    value of a key (it said "slow down", a 429): the worker throttles that value for
    ``for_`` (1s to 1h), cluster-wide — no instance hands out a chunk of a submission with
    that value until then (``Client.throttle``) — and fails the chunk with that
    ``retry_after``. ``key`` is a strategic metadata key, or ``"@tenant"`` for the chunk's
    tenant; it defaults to the Worker's ``throttle_key``. A chunk whose submission has no
    such key throttles nothing, and is failed all the same."""

    def __init__(self, for_: Duration, message: str = "", *, key: Optional[str] = None) -> None:
        super().__init__(message or f"throttled for {go_duration(for_)}")
        self.for_ = for_
        self.message = message
        self.key = key


#: The chunk whose function runs in this thread (a Worker runs each in a thread of its own).
_current = threading.local()


def set_traceparent(traceparent: Optional[str]) -> None:
    """Called from a Worker's function, in its thread: the worker sends ``traceparent`` —
    that of the function's own span, a child of ``chunk.traceparent`` — with the chunk's
    complete, fail and extends, instead of the chunk's own, so that the instance's spans of
    those calls sit beneath the function's span. None sends none."""
    job = getattr(_current, "job", None)
    if job is None:
        raise RuntimeError("opsq.set_traceparent: call it from a Worker's function, in the thread the worker runs it in")
    job.traceparent = traceparent


@dataclass
class WorkerStats:
    """What became of the chunks a worker reserved.

    done: completed. failed: failed an attempt (retrying or failed for good). lost: went
    elsewhere before the worker could report it (its lease ran out, its submission
    finished or was cancelled), or could not be reported. abandoned: still running when
    the worker stopped, failed with "worker stopped" (counted in failed too). throttled:
    throttles set because a function raised :class:`Throttle`.
    """

    done: int = 0
    failed: int = 0
    lost: int = 0
    abandoned: int = 0
    throttled: int = 0


class _Job:
    __slots__ = ("chunk", "next_extend", "deadline", "abandoned", "gone", "traceparent")

    def __init__(self, chunk: Chunk, next_extend: float, deadline: float) -> None:
        self.chunk = chunk
        self.next_extend = next_extend
        self.deadline = deadline  # the lease's end, by this process's clock
        self.abandoned = False
        self.gone: Optional[str] = None
        # Sent with the chunk's complete, fail and extends: the chunk's, or the one its
        # function set (set_traceparent).
        self.traceparent = chunk.traceparent


class Worker:
    """Reserves chunks and calls ``fn(chunk)`` for each, in up to ``concurrency`` threads.

    What ``fn`` returns (str, UTF-8 bytes or None) completes the chunk. An exception fails
    it with the exception's text (``ValueError: bad row``) and ``retry: true``, so it is
    handed out again after its backoff while its attempts last; :class:`RetryLater` sets
    the ``retry_after``; :class:`FailNow` fails it without retry; :class:`Throttle`
    throttles the chunk's value of a key, cluster-wide, and fails it until then.

    The chunk's complete, fail and extends carry its ``traceparent`` (the one its
    submission was sent with), or the one ``fn`` sets with :func:`set_traceparent` (that
    of its own span), so that the instance's spans of those calls join the trace.

    While ``fn`` runs, the chunk's lease is extended every ``extend_every`` (default: half
    the lease). If an extend says the chunk went elsewhere (its submission was cancelled or
    failed, its lease ran out), the worker stops extending it; when ``fn`` returns, its
    output is still offered (a late first completion wins) but counted as lost if refused.

    :meth:`run` reserves as many chunks at once as there are free threads, with one long
    poll. It returns on :meth:`stop`, on SIGTERM or SIGINT (when run from the main thread
    with ``handle_signals``), or with ``once`` when a reserve found no work and nothing
    runs: it stops reserving, waits up to ``stop_grace`` (default: the lease) for the
    running functions, fails the chunks of those still running with "worker stopped"
    (retried elsewhere), and returns the :class:`WorkerStats`. A second stop (or signal)
    skips the wait. A function still running then is left to its thread (a daemon), its
    result dropped. It raises the APIError of a reserve the server refuses for good (a bad
    strategy, a wrong key), after stopping so.

    Args:
        client: the Client (a consumer key).
        fn: the function run on each chunk, in a thread of its own.
        concurrency: chunks worked on at once, 1 to 10 000.
        strategy: the strategy, JSON or text form (see Client.reserve); default random.
        lease: each reservation's lease (1s to 24h), default 5 minutes.
        wait: how long each reserve long-polls (at most 60s), default 20s.
        consumer: this worker's name in the server's records; default HOSTNAME/pid-PID.
        once: return once a reserve finds no work, nothing runs and nothing failed since
            (a failed chunk may come back).
        throttle_key: the strategic metadata key (or "@tenant") whose value a
            :class:`Throttle` raised without a key throttles.
    """

    def __init__(
        self,
        client: Client,
        fn: Callable[[Chunk], Output],
        *,
        concurrency: int = 1,
        strategy: Any = None,
        lease: Duration = 300.0,
        wait: Duration = 20.0,
        consumer: Optional[str] = None,
        once: bool = False,
        extend_every: Optional[float] = None,
        stop_grace: Optional[float] = None,
        handle_signals: bool = True,
        throttle_key: Optional[str] = None,
    ) -> None:
        if not 1 <= concurrency <= 10_000:
            raise ValueError(f"opsq: concurrency {concurrency}: want 1 to 10000")
        self.client = client
        self.fn = fn
        self.concurrency = concurrency
        self.strategy = strategy_json(strategy)  # a bad text form fails here, not at the first reserve
        self.lease = go_duration(lease) or "5m"
        self.lease_seconds = _seconds(lease)
        if not 1 <= self.lease_seconds <= 86400:
            raise ValueError(f"opsq: lease {lease!r}: want 1s to 24h")
        self.wait = go_duration(wait) if wait else None
        self.wait_seconds = _seconds(wait)
        if not 0 <= self.wait_seconds <= 60:
            raise ValueError(f"opsq: wait {wait!r}: want 0 to 60s")
        self.consumer = consumer or f"{socket.gethostname() or 'localhost'}/pid-{os.getpid()}"
        self.once = once
        self.extend_every = extend_every if extend_every is not None else self.lease_seconds / 2
        self.stop_grace = stop_grace if stop_grace is not None else self.lease_seconds
        self.handle_signals = handle_signals
        self.throttle_key = throttle_key

        self.stats = WorkerStats()
        self._cv = threading.Condition()  # guards busy, jobs, stats
        self._busy = 0  # slots taken: running jobs and chunks being reserved for
        self._jobs: Dict[str, _Job] = {}
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._signals = 0  # set by the signal handler, which takes no lock
        self._reserve_sock: Optional[socket.socket] = None
        self._quit_extender = threading.Event()

    # Stopping.

    def stop(self) -> None:
        """Asks the worker to stop (safe from any thread): no more reserves, the running
        functions may finish within stop_grace. A second call skips that wait."""
        if self._stop.is_set():
            self._hurry.set()
        self._stop.set()
        self._cut_reserve()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Runs in the main thread between two bytecodes, maybe while it holds a lock:
        # take none, only count; the loops look at the count.
        self._signals += 1
        self._cut_reserve()

    def _cut_reserve(self) -> None:
        sock = self._reserve_sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _register(self, sock: Optional[socket.socket]) -> None:
        self._reserve_sock = sock

    def stopping(self) -> bool:
        """Whether the worker was asked to stop."""
        return self._stop.is_set() or self._signals > 0

    def _hurrying(self) -> bool:
        return self._hurry.is_set() or self._signals > 1 or (self._signals > 0 and self._stop.is_set())

    def _sleep(self, seconds: float) -> bool:
        """Sleeps up to seconds, less if asked to stop; returns whether it is stopping."""
        end = time.monotonic() + seconds
        while not self.stopping():
            left = end - time.monotonic()
            if left <= 0:
                return False
            self._stop.wait(min(left, 0.2))
        return True

    # Running.

    def run(self) -> WorkerStats:
        """Runs the worker until it is stopped (see the class); returns its counts."""
        old: List[Tuple[signal.Signals, Any]] = []
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old.append((sig, signal.signal(sig, self._on_signal)))
        extender = threading.Thread(target=self._extend_loop, name="opsq-extend", daemon=True)
        extender.start()
        err: Optional[BaseException] = None
        try:
            err = self._reserve_loop()
            self._drain()
        finally:
            self._quit_extender.set()
            extender.join()
            for sig, handler in old:
                signal.signal(sig, handler)
            self.client._t.close()  # this thread's idle connection
        log.info("opsq worker stopped: %d done, %d failed, %d lost", self.stats.done, self.stats.failed, self.stats.lost)
        if err is not None:
            raise err
        return self.stats

    def _reserve_loop(self) -> Optional[BaseException]:
        failures = 0
        while not self.stopping():
            with self._cv:
                while self._busy >= self.concurrency and not self.stopping():
                    self._cv.wait(0.2)
                if self.stopping():
                    return None
                n = self.concurrency - self._busy
                self._busy += n
                unsettled = self.stats.failed + self.stats.lost
            asked = time.monotonic()
            try:
                chunks = self.client.reserve(
                    n, strategy=self.strategy, lease=self.lease, wait=self.wait, consumer=self.consumer, _register=self._register
                )
            except (TransportError, APIError) as e:
                self._release(n)
                if self.stopping():
                    return None
                if isinstance(e, APIError) and not e.transient:
                    log.error("opsq worker: the server refuses the reserves: %s", e)
                    return e
                backoff = min(2.0 ** min(failures, 5), BACKOFF_MAX)
                if isinstance(e, APIError) and e.retry_after:
                    backoff = max(backoff, min(e.retry_after, 60.0))
                failures += 1
                log.warning("opsq worker: reserve failed (%s); retrying in %.0fs", e, backoff)
                self._sleep(backoff)
                continue
            if failures:
                log.info("opsq worker: reserve works again")
                failures = 0
            self._release(n - len(chunks))
            for ch in chunks:
                self._start(ch)
            if not chunks:
                if self.once:
                    with self._cv:
                        if self._busy == 0 and self.stats.failed + self.stats.lost == unsettled:
                            return None
                self._sleep(RESERVE_GAP_MIN - (time.monotonic() - asked))
        return None

    def _release(self, n: int) -> None:
        if n <= 0:
            return
        with self._cv:
            self._busy -= n
            self._cv.notify_all()

    def _start(self, ch: Chunk) -> None:
        now = time.monotonic()
        job = _Job(ch, now + self.extend_every, now + self.lease_seconds)
        with self._cv:
            self._jobs[ch.token] = job
        threading.Thread(target=self._run_job, args=(job,), name=f"opsq-chunk-{ch.submission_id}/{ch.chunk_index}", daemon=True).start()

    def _run_job(self, job: _Job) -> None:
        ch = job.chunk
        try:
            failure: Optional[str] = None
            retry, retry_after = True, None
            output = ""
            try:
                _current.job = job
                try:
                    out = self.fn(ch)
                finally:
                    _current.job = None
                if out is None:
                    output = ""
                elif isinstance(out, bytes):
                    try:
                        output = out.decode("utf-8")
                    except UnicodeDecodeError:
                        failure = "the output is not valid UTF-8: outputs are JSON strings, so encode binary output first (base64, say)"
                elif isinstance(out, str):
                    output = out
                else:
                    failure = f"the function returned {type(out).__name__}; want str, bytes or None"
            except RetryLater as e:
                retry_after = e.after
                failure = f"retry after {go_duration(e.after)}: {e.message}" if e.message else f"retry after {go_duration(e.after)}"
            except FailNow as e:
                retry = False
                failure = _exception_text(e)
            except Throttle as e:
                self._throttle(ch, e)
                retry_after = e.for_
                failure = f"throttled for {go_duration(e.for_)}: {e.message}" if e.message else f"throttled for {go_duration(e.for_)}"
            except Exception as e:  # a chunk's failure, not the worker's
                failure = _exception_text(e)
            with self._cv:
                if job.abandoned:
                    return  # failed at the stop already; its result is dropped
            self._report(job, output, failure, retry, retry_after)
        finally:
            self.client._t.close()  # this thread's idle connection: the thread ends here
            with self._cv:
                self._jobs.pop(ch.token, None)
                self._busy -= 1
                self._cv.notify_all()

    def _report(self, job: _Job, output: str, failure: Optional[str], retry: bool, retry_after: Optional[Duration]) -> None:
        """Completes or fails the chunk, retrying while the server cannot be reached and the
        lease lasts; after that the server releases the chunk itself."""
        ch = job.chunk
        attempt = 0
        while True:
            try:
                if failure is None:
                    res = self.client.complete(ch.token, output, traceparent=job.traceparent)
                else:
                    res = self.client.fail(ch.token, failure[:ERROR_MAX], retry=retry, retry_after=retry_after, traceparent=job.traceparent)
                self._count(job, res.status, failure)
                return
            except OpsqError as e:
                backoff = min(2.0 ** min(attempt, 5), BACKOFF_MAX)
                attempt += 1
                transient = isinstance(e, TransportError) or (isinstance(e, APIError) and e.transient)
                if not transient or time.monotonic() + backoff > job.deadline:
                    with self._cv:
                        self.stats.lost += 1
                    log.warning("opsq worker: chunk %s/%d: giving up reporting it (%s); the server releases it when its lease ends", ch.submission_id, ch.chunk_index, e)
                    return
                log.warning("opsq worker: chunk %s/%d: reporting it failed (%s); retrying in %.0fs", ch.submission_id, ch.chunk_index, e, backoff)
                time.sleep(backoff)

    def _throttle(self, ch: Chunk, e: Throttle) -> None:
        """Throttles ch's value of e's key (or throttle_key) for e.for_, and says so."""
        key = e.key or self.throttle_key
        if not key:
            log.warning("opsq worker: chunk %s/%d raised Throttle without a key, and the worker has no throttle_key: nothing throttled", ch.submission_id, ch.chunk_index)
            return
        try:
            value: Any = self.client.status(ch.submission_id).tenant if key == "@tenant" else ch.strategic_metadata.get(key)
            if value is None:
                log.info("opsq worker: chunk %s/%d: its submission has no %s to throttle", ch.submission_id, ch.chunk_index, key)
                return
            until = self.client.throttle(key, value, e.for_)
        except OpsqError as err:
            log.warning("opsq worker: chunk %s/%d: throttling its %s failed: %s", ch.submission_id, ch.chunk_index, key, err)
            return
        with self._cv:
            self.stats.throttled += 1
        log.info("opsq worker: chunk %s/%d: %s = %r throttled until %s", ch.submission_id, ch.chunk_index, key, value, until.isoformat())

    def _count(self, job: _Job, status: str, failure: Optional[str]) -> None:
        ch = job.chunk
        with self._cv:
            if status == "completed":
                self.stats.done += 1
            elif status in ("retrying", "failed"):
                self.stats.failed += 1
            else:
                self.stats.lost += 1
        if status in ("retrying", "failed"):
            log.info("opsq worker: chunk %s/%d failed (%s): %s", ch.submission_id, ch.chunk_index, status, (failure or "")[:300])
        elif status != "completed":
            log.warning("opsq worker: chunk %s/%d: the server answered %s%s", ch.submission_id, ch.chunk_index, status, f" (earlier: {job.gone})" if job.gone else "")

    def _drain(self) -> None:
        """Waits for the running functions, up to stop_grace, then fails the chunks of those
        still running."""
        end = time.monotonic() + self.stop_grace
        with self._cv:
            if self._jobs:
                log.info("opsq worker: stopping: waiting up to %.0fs for %d running chunk(s)", self.stop_grace, len(self._jobs))
            while self._jobs and time.monotonic() < end and not self._hurrying():
                self._cv.wait(0.2)
            left = [j for j in self._jobs.values() if not j.abandoned]
            for j in left:
                j.abandoned = True
        for j in left:
            why = f"{WORKER_STOPPED}: the function did not finish within {self.stop_grace:g}s of the worker's shutdown"
            try:
                res = self.client.fail(j.chunk.token, why, retry=True, traceparent=j.traceparent)
                with self._cv:
                    self.stats.abandoned += 1
                    if res.status in ("retrying", "failed"):
                        self.stats.failed += 1
                    else:
                        self.stats.lost += 1
            except OpsqError as e:
                with self._cv:
                    self.stats.abandoned += 1
                    self.stats.lost += 1
                log.warning("opsq worker: chunk %s/%d: failing it at the stop: %s", j.chunk.submission_id, j.chunk.chunk_index, e)

    def _extend_loop(self) -> None:
        """Extends the leases of the chunks whose functions run, each every extend_every, in
        one request for all those due."""
        try:
            self._extend_until_quit()
        finally:
            self.client._t.close()  # this thread's idle connection

    def _extend_until_quit(self) -> None:
        while not self._quit_extender.wait(0.2):
            now = time.monotonic()
            with self._cv:
                due = [j for j in self._jobs.values() if j.next_extend <= now and j.gone is None and not j.abandoned]
            # One request per traceparent (most chunks of a submission share one).
            by_trace: Dict[Optional[str], List[_Job]] = {}
            for j in due:
                by_trace.setdefault(j.traceparent, []).append(j)
            for traceparent, jobs in by_trace.items():
                self._extend(jobs, traceparent, now)

    def _extend(self, due: List[_Job], traceparent: Optional[str], now: float) -> None:
        """Extends the leases of due in one request that carries traceparent."""
        try:
            results = self.client.extend([j.chunk for j in due], self.lease, traceparent=traceparent)
        except OpsqError as e:
            retry_in = min(5.0, self.extend_every)
            log.warning("opsq worker: extending %d lease(s) failed (%s); trying again in %.0fs", len(due), e, retry_in)
            for j in due:
                j.next_extend = now + retry_in
            return
        for j, r in zip(due, results):
            if r.status == "extended":
                j.next_extend = now + self.extend_every
                j.deadline = now + self.lease_seconds
            else:
                j.gone = r.status
                log.warning(
                    "opsq worker: chunk %s/%d: extending its lease answered %s; the chunk went elsewhere (its submission finished or was cancelled, or its lease ran out)",
                    j.chunk.submission_id,
                    j.chunk.chunk_index,
                    r.status,
                )


def _exception_text(e: BaseException) -> str:
    """The text a failed chunk is reported with: "ValueError: bad row"."""
    msg = str(e)
    name = type(e).__name__
    return f"{name}: {msg}" if msg else name


def work(
    fn: Callable[[Chunk], Output],
    *,
    url: Optional[str] = None,
    key: Optional[str] = None,
    **options: Any,
) -> WorkerStats:
    """Runs a :class:`Worker` of fn with a Client of url and key (OPSQ_URL and OPSQ_KEY by
    default) until it stops; options are the Worker's."""
    return Worker(Client(url, key), fn, **options).run()
