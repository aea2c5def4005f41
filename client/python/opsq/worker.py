"""A consumer loop: reserve chunks, run a function on each in a thread, complete or fail
them, extend long work, and stop cleanly."""

from __future__ import annotations

import collections
import logging
import os
import signal
import socket
import sys
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
#: How many completions or failures go in one request at most (batch_max's default).
BATCH_MAX_DEFAULT = 100
#: How long a completion or failure waits at most for others to go with it (batch_delay's default, seconds).
BATCH_DELAY_DEFAULT = 0.05
#: The most chunks a worker prefetches when prefetch is not set.
PREFETCH_MAX_DEFAULT = 100
#: When prefetch is not set, a worker holds about this many seconds of work beyond what runs.
PREFETCH_AHEAD = 1.0
#: How often the worker prints a progress line (progress_every's default, seconds).
PROGRESS_EVERY_DEFAULT = 10.0


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
    __slots__ = ("chunk", "next_extend", "deadline", "state", "gone", "traceparent")

    def __init__(self, chunk: Chunk, next_extend: float, deadline: float) -> None:
        self.chunk = chunk
        self.next_extend = next_extend
        self.deadline = deadline  # the lease's end, by this process's clock
        # queued (prefetched, waiting for a thread), running, reporting (its outcome is
        # in the batch to send), abandoned (failed at the stop; its result is dropped).
        self.state = "queued"
        self.gone: Optional[str] = None
        # Sent with the chunk's complete, fail and extends: the chunk's, or the one its
        # function set (set_traceparent).
        self.traceparent = chunk.traceparent


class _Outcome:
    __slots__ = ("job", "output", "failure", "retry", "retry_after")

    def __init__(self, job: _Job, output: str, failure: Optional[str], retry: bool, retry_after: Optional[Duration]) -> None:
        self.job = job
        self.output = output
        self.failure = failure
        self.retry = retry
        self.retry_after = retry_after


class Worker:
    """Reserves chunks and calls ``fn(chunk)`` for each, in up to ``concurrency`` threads.

    What ``fn`` returns (str, UTF-8 bytes or None) completes the chunk. An exception fails
    it with the exception's text (``ValueError: bad row``) and ``retry: true``, so it is
    handed out again after its backoff while its attempts last; :class:`RetryLater` sets
    the ``retry_after``; :class:`FailNow` fails it without retry; :class:`Throttle`
    throttles the chunk's value of a key, cluster-wide, and fails it until then.

    The worker reserves up to ``concurrency + prefetch`` chunks with one long poll, so that
    a thread that finishes finds its next chunk waiting; the leases of prefetched chunks
    are extended as those of running ones. Without ``prefetch``, it prefetches what its
    threads finish in about a second by ``fn``'s average time, from ``concurrency`` to 100. It completes and fails in batches
    (:meth:`Client.complete_many`, :meth:`Client.fail_many`): an outcome waits at most
    ``batch_delay`` for others, and at most ``batch_max`` go in one request.

    It prints a line to stderr for each failed chunk and a progress line every
    ``progress_every`` seconds (done, failed, lost, running, chunks/s); ``quiet`` sends
    those to the ``opsq.worker`` logger at INFO instead. Other notes (the stop, a server
    out of reach) always go to stderr.

    The chunk's complete, fail and extends carry its ``traceparent`` (the one its
    submission was sent with), or the one ``fn`` sets with :func:`set_traceparent` (that
    of its own span), so that the instance's spans of those calls join the trace.

    While a chunk is held, its lease is extended every ``extend_every`` (default: half
    the lease). If an extend says the chunk went elsewhere (its submission was cancelled or
    failed, its lease ran out), the worker stops extending it; when ``fn`` returns, its
    output is still offered (a late first completion wins) but counted as lost if refused.

    :meth:`run` returns on :meth:`stop`, on SIGTERM or SIGINT (when run from the main
    thread with ``handle_signals``), or with ``once`` when a reserve found no work and
    nothing is held. The first stop reserves nothing more and waits up to ``stop_grace``
    (default: the lease) for the chunks it holds (running and prefetched), and says so;
    then it fails those still unfinished with "worker stopped" and ``retry: true``, so they
    are handed out again at once elsewhere. A second stop (or signal: a second Ctrl-C)
    skips the wait and does that now. A function still running then is left to its thread
    (a daemon), its result dropped. It raises the APIError of a reserve the server refuses
    for good (a bad strategy, a wrong key), after stopping so.

    Args:
        client: the Client (a consumer key).
        fn: the function run on each chunk, in one of ``concurrency`` threads.
        concurrency: chunks worked on at once, 1 to 10 000.
        strategy: the strategy, JSON or text form (see Client.reserve); default random.
        lease: each reservation's lease (1s to 24h), default 5 minutes.
        wait: how long each reserve long-polls (at most 60s), default 20s.
        consumer: this worker's name in the server's records; default HOSTNAME/pid-PID.
        once: return once a reserve finds no work, nothing is held and nothing failed since
            (a failed chunk may come back).
        stop_grace: seconds the held chunks may take after a first stop, 0 to the lease;
            default the lease.
        prefetch: chunks reserved beyond those that can run at once, 0 to 10 000; default:
            about a second of work by fn's average time, from ``concurrency`` to 100.
        batch_max: completions or failures in one request at most, 1 to 10 000; default 100.
        batch_delay: seconds an outcome waits at most for others; default 0.05.
        quiet: no line per failure and no progress line on stderr (they go to logging).
        progress_every: seconds between two progress lines; default 10, 0 for none.
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
        stop_grace: Optional[Duration] = None,
        handle_signals: bool = True,
        throttle_key: Optional[str] = None,
        prefetch: Optional[int] = None,
        batch_max: int = BATCH_MAX_DEFAULT,
        batch_delay: float = BATCH_DELAY_DEFAULT,
        quiet: bool = False,
        progress_every: float = PROGRESS_EVERY_DEFAULT,
    ) -> None:
        if not 1 <= concurrency <= 10_000:
            raise ValueError(f"opsq: concurrency {concurrency}: want 1 to 10000")
        self.client = client
        self.fn = fn
        self.concurrency = concurrency
        self.prefetch = prefetch  # None: as many as the threads finish in PREFETCH_AHEAD
        if prefetch is not None and not 0 <= prefetch <= 10_000:
            raise ValueError(f"opsq: prefetch {prefetch}: want 0 to 10000")
        if not 1 <= batch_max <= 10_000:
            raise ValueError(f"opsq: batch_max {batch_max}: want 1 to 10000")
        if not 0 <= batch_delay <= 10:
            raise ValueError(f"opsq: batch_delay {batch_delay}: want 0 to 10 (seconds)")
        self.batch_max = batch_max
        self.batch_delay = batch_delay
        self.quiet = quiet
        self.progress_every = progress_every
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
        self.stop_grace = _seconds(stop_grace) if stop_grace is not None else self.lease_seconds
        if not 0 <= self.stop_grace <= self.lease_seconds:
            raise ValueError(f"opsq: stop_grace {stop_grace!r}: want 0 to the lease ({self.lease}): a chunk past its lease is lost anyway")
        self.handle_signals = handle_signals
        self.throttle_key = throttle_key

        self.stats = WorkerStats()
        self._cv = threading.Condition()  # guards busy, queue, jobs, outcomes, stats
        self._busy = 0  # slots taken: queued and running jobs, and chunks being reserved for
        self._queue: "collections.deque[_Job]" = collections.deque()  # reserved, waiting for a thread
        self._jobs: Dict[str, _Job] = {}  # every chunk held: queued, running or being reported
        self._outcomes: List[_Outcome] = []  # to report, oldest first
        self._outcomes_since = 0.0  # when the oldest of them came
        self._fn_seconds: Optional[float] = None  # how long fn takes, a moving average
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._signals = 0  # set by the signal handler, which takes no lock
        self._reserve_sock: Optional[socket.socket] = None
        self._quit_extender = threading.Event()
        self._quit_pool = False
        self._quit_reporter = False

    # Saying what happens.

    def _say(self, msg: str, *args: Any, chatty: bool = False) -> None:
        """A line to stderr ("opsq worker: ..."); a chatty one (a failed chunk, progress)
        goes to logging at INFO instead when quiet."""
        if self.quiet and chatty:
            log.info("opsq worker: " + msg, *args)
            return
        try:
            sys.stderr.write("opsq worker: " + (msg % args if args else msg) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def _counts(self) -> str:
        s = self.stats
        return f"{s.done:,} done, {s.failed:,} failed, {s.lost:,} lost"

    # Stopping.

    def stop(self) -> None:
        """Asks the worker to stop (safe from any thread): no more reserves, the held
        chunks may finish within stop_grace. A second call skips that wait."""
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
        helpers = [
            threading.Thread(target=self._extend_loop, name="opsq-extend", daemon=True),
            threading.Thread(target=self._report_loop, name="opsq-report", daemon=True),
        ]
        pool = [threading.Thread(target=self._pool_loop, name=f"opsq-worker-{i}", daemon=True) for i in range(self.concurrency)]
        for th in helpers + pool:
            th.start()
        self._started = time.monotonic()
        err: Optional[BaseException] = None
        try:
            err = self._reserve_loop()
            self._drain()
        finally:
            with self._cv:
                self._quit_pool = True
                self._quit_reporter = True
                self._cv.notify_all()
            helpers[1].join()  # the last outcomes are sent
            self._quit_extender.set()
            helpers[0].join()
            for sig, handler in old:
                signal.signal(sig, handler)
            self.client._t.close()  # this thread's idle connection
        took = time.monotonic() - self._started
        self._say("stopped: %s in %.1fs", self._counts(), took, chatty=True)
        if err is not None:
            raise err
        return self.stats

    def _reserve_loop(self) -> Optional[BaseException]:
        failures = 0
        next_progress = time.monotonic() + self.progress_every
        last_done = 0
        while not self.stopping():
            with self._cv:
                capacity = self._capacity()
                while self._busy >= capacity and not self.stopping():
                    self._cv.wait(0.2)
                    if self.progress_every and time.monotonic() >= next_progress:
                        next_progress, last_done = self._progress(last_done)
                    capacity = self._capacity()
                if self.stopping():
                    return None
                n = capacity - self._busy
                self._busy += n
                unsettled = self.stats.failed + self.stats.lost
            if self.progress_every and time.monotonic() >= next_progress:
                with self._cv:
                    next_progress, last_done = self._progress(last_done)
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
                    self._say("the server refuses the reserves: %s", e)
                    return e
                backoff = min(2.0 ** min(failures, 5), BACKOFF_MAX)
                if isinstance(e, APIError) and e.retry_after:
                    backoff = max(backoff, min(e.retry_after, 60.0))
                failures += 1
                self._say("reserve failed (%s); retrying in %.0fs", e, backoff)
                self._sleep(backoff)
                continue
            if failures:
                self._say("reserve works again")
                failures = 0
            now = time.monotonic()
            with self._cv:
                self._busy -= n - len(chunks)
                for ch in chunks:
                    job = _Job(ch, now + self.extend_every, asked + self.lease_seconds)
                    self._jobs[ch.token] = job
                    self._queue.append(job)
                self._cv.notify_all()
            if not chunks:
                if self.once:
                    with self._cv:
                        if not self._jobs and self.stats.failed + self.stats.lost == unsettled:
                            return None
                self._sleep(RESERVE_GAP_MIN - (time.monotonic() - asked))
        return None

    def _capacity(self) -> int:
        """How many chunks to hold: those that run and the prefetch (called holding _cv).
        Without a prefetch set, as many as the threads finish in about PREFETCH_AHEAD by
        fn's average time, from concurrency to PREFETCH_MAX_DEFAULT: fast functions get
        a deep queue, slow ones hold little more than they run."""
        if self.prefetch is not None:
            return self.concurrency + self.prefetch
        avg = self._fn_seconds
        if avg is None:
            return 2 * self.concurrency
        ahead = self.concurrency * PREFETCH_AHEAD / max(avg, 1e-6)
        return self.concurrency + int(min(PREFETCH_MAX_DEFAULT, max(self.concurrency, ahead)))

    def _progress(self, last_done: int) -> Tuple[float, int]:
        """Says how far the worker got (called holding _cv); returns when to say it next
        and the done count it said."""
        done = self.stats.done
        self._say("%s, %d running, %.1f chunks/s", self._counts(), self._running(), (done - last_done) / self.progress_every, chatty=True)
        return time.monotonic() + self.progress_every, done

    def _running(self) -> int:
        return sum(1 for j in self._jobs.values() if j.state == "running")

    def _release(self, n: int) -> None:
        if n <= 0:
            return
        with self._cv:
            self._busy -= n
            self._cv.notify_all()

    def _pool_loop(self) -> None:
        """One of the concurrency threads: runs the queued chunks' functions, one by one."""
        try:
            while True:
                with self._cv:
                    while not self._queue and not self._quit_pool:
                        self._cv.wait()
                    if not self._queue:
                        return
                    job = self._queue.popleft()
                    if job.state != "queued":  # abandoned at the stop
                        continue
                    job.state = "running"
                self._run_job(job)
        finally:
            self.client._t.close()  # this thread's idle connection

    def _run_job(self, job: _Job) -> None:
        ch = job.chunk
        failure: Optional[str] = None
        retry, retry_after = True, None
        output = ""
        began = time.monotonic()
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
        took = time.monotonic() - began
        with self._cv:
            self._fn_seconds = took if self._fn_seconds is None else 0.9 * self._fn_seconds + 0.1 * took
            self._busy -= 1
            if job.state == "abandoned":
                self._cv.notify_all()
                return  # failed at the stop already; its result is dropped
            job.state = "reporting"
            self._add_outcome(_Outcome(job, output, failure, retry, retry_after))

    def _add_outcome(self, o: _Outcome) -> None:
        """Hands an outcome to the reporter (called holding _cv)."""
        if not self._outcomes:
            self._outcomes_since = time.monotonic()
        self._outcomes.append(o)
        self._cv.notify_all()

    def _report_loop(self) -> None:
        """Sends the outcomes in batches: when batch_max are waiting, when the oldest has
        waited batch_delay, and at the stop."""
        try:
            while True:
                with self._cv:
                    while True:
                        if len(self._outcomes) >= self.batch_max or (self._outcomes and self._quit_reporter):
                            break
                        if not self._outcomes:
                            if self._quit_reporter:
                                return
                            self._cv.wait()
                            continue
                        left = self._outcomes_since + self.batch_delay - time.monotonic()
                        if left <= 0:
                            break
                        self._cv.wait(left)
                    batch = self._outcomes[: self.batch_max]
                    del self._outcomes[: self.batch_max]
                    if self._outcomes:
                        self._outcomes_since = time.monotonic()
                self._send(batch)
        finally:
            self.client._t.close()  # this thread's idle connection

    def _send(self, batch: List[_Outcome]) -> None:
        """Completes and fails the chunks of batch, one request per kind and traceparent."""
        groups: Dict[Tuple[bool, Optional[str]], List[_Outcome]] = {}
        for o in batch:
            groups.setdefault((o.failure is None, o.job.traceparent), []).append(o)
        for (complete, traceparent), outcomes in groups.items():
            self._send_group(complete, traceparent, outcomes)

    def _send_group(self, complete: bool, traceparent: Optional[str], outcomes: List[_Outcome]) -> None:
        """Reports outcomes in one request, retrying while the server cannot be reached and
        their leases last; after that the server releases the chunks itself."""
        attempt = 0
        deadline = min(o.job.deadline for o in outcomes)
        while True:
            try:
                if complete:
                    res = self.client.complete_many([(o.job.chunk.token, o.output) for o in outcomes], traceparent=traceparent)
                else:
                    res = self.client.fail_many(
                        [(o.job.chunk.token, (o.failure or "")[:ERROR_MAX], o.retry, o.retry_after) for o in outcomes], traceparent=traceparent
                    )
                break
            except OpsqError as e:
                backoff = min(2.0 ** min(attempt, 5), BACKOFF_MAX)
                attempt += 1
                transient = isinstance(e, TransportError) or (isinstance(e, APIError) and e.transient)
                if not transient or time.monotonic() + backoff > deadline or self._hurrying():
                    self._say("giving up reporting %d chunk(s) (%s); the server releases them when their leases end", len(outcomes), e)
                    with self._cv:
                        self.stats.lost += len(outcomes)
                        for o in outcomes:
                            self._jobs.pop(o.job.chunk.token, None)
                        self._cv.notify_all()
                    return
                self._say("reporting %d chunk(s) failed (%s); retrying in %.0fs", len(outcomes), e, backoff)
                time.sleep(backoff)
        for o, r in zip(outcomes, res):
            self._count(o, r.status)
        with self._cv:
            for o in outcomes:
                self._jobs.pop(o.job.chunk.token, None)
            self._cv.notify_all()

    def _throttle(self, ch: Chunk, e: Throttle) -> None:
        """Throttles ch's value of e's key (or throttle_key) for e.for_, and says so."""
        where = f"chunk {ch.submission_id}/{ch.chunk_index}"
        key = e.key or self.throttle_key
        if not key:
            self._say("%s raised Throttle without a key, and the worker has no throttle_key: nothing throttled", where)
            return
        try:
            value: Any = self.client.status(ch.submission_id).tenant if key == "@tenant" else ch.strategic_metadata.get(key)
            if value is None:
                self._say("%s: its submission has no %s to throttle", where, key)
                return
            until = self.client.throttle(key, value, e.for_)
        except OpsqError as err:
            self._say("%s: throttling its %s failed: %s", where, key, err)
            return
        with self._cv:
            self.stats.throttled += 1
        self._say("%s: %s = %r throttled until %s", where, key, value, until.isoformat())

    def _count(self, o: _Outcome, status: str) -> None:
        job = o.job
        ch = job.chunk
        with self._cv:
            if status == "completed":
                self.stats.done += 1
            elif status in ("retrying", "failed"):
                self.stats.failed += 1
            else:
                self.stats.lost += 1
        if status in ("retrying", "failed"):
            self._say("chunk %s/%d failed (%s): %s", ch.submission_id, ch.chunk_index, status, _one_line(o.failure or "", 300), chatty=True)
        elif status != "completed":
            self._say("chunk %s/%d: the server answered %s%s", ch.submission_id, ch.chunk_index, status, f" (earlier: {job.gone})" if job.gone else "")

    def _drain(self) -> None:
        """Waits for the held chunks, up to stop_grace, then fails those unfinished."""
        end = time.monotonic() + self.stop_grace
        hurried = False
        with self._cv:
            held = sum(1 for j in self._jobs.values() if j.state in ("queued", "running"))
            if held and not self._hurrying():
                self._say(
                    "stopping: waiting for %d chunk(s) (%d running), for up to %gs (stop_grace); then they are failed and handed out again. Press Ctrl-C again to stop now",
                    held,
                    self._running(),
                    self.stop_grace,
                )
            while self._jobs and time.monotonic() < end:
                if self._hurrying():
                    hurried = True
                    break
                self._cv.wait(0.2)
            left = [j for j in self._jobs.values() if j.state in ("queued", "running")]
            for j in left:
                if j.state == "queued":
                    self._busy -= 1
                j.state = "abandoned"
            if left and hurried:
                self._say("stopping now: failing %d held chunk(s); they are handed out again", len(left))
        if hurried:
            why = f"{WORKER_STOPPED} at once: the worker was asked to stop a second time"
        else:
            why = f"{WORKER_STOPPED}: the chunk did not finish within {self.stop_grace:g}s (stop_grace) of the worker's shutdown"
        by_trace: Dict[Optional[str], List[_Job]] = {}
        for j in left:
            by_trace.setdefault(j.traceparent, []).append(j)
        for traceparent, jobs in by_trace.items():
            for i in range(0, len(jobs), self.batch_max):
                part = jobs[i : i + self.batch_max]
                try:
                    results = self.client.fail_many([(j.chunk.token, why, True, None) for j in part], traceparent=traceparent)
                except OpsqError as e:
                    with self._cv:
                        self.stats.abandoned += len(part)
                        self.stats.lost += len(part)
                    self._say("failing %d chunk(s) at the stop: %s; the server releases them when their leases end", len(part), e)
                    continue
                with self._cv:
                    for r in results:
                        self.stats.abandoned += 1
                        if r.status in ("retrying", "failed"):
                            self.stats.failed += 1
                        else:
                            self.stats.lost += 1
        with self._cv:
            for j in left:
                self._jobs.pop(j.chunk.token, None)
        # What finished meanwhile is in _outcomes: the reporter sends it before run returns.

    def _extend_loop(self) -> None:
        """Extends the leases of the chunks held (queued or running), each every
        extend_every, in one request for all those due."""
        try:
            self._extend_until_quit()
        finally:
            self.client._t.close()  # this thread's idle connection

    def _extend_until_quit(self) -> None:
        while not self._quit_extender.wait(0.2):
            now = time.monotonic()
            with self._cv:
                due = [j for j in self._jobs.values() if j.next_extend <= now and j.gone is None and j.state in ("queued", "running", "reporting")]
            # One request per traceparent (most chunks of a submission share one).
            by_trace: Dict[Optional[str], List[_Job]] = {}
            for j in due:
                by_trace.setdefault(j.traceparent, []).append(j)
            for traceparent, jobs in by_trace.items():
                for i in range(0, len(jobs), 10_000):
                    self._extend(jobs[i : i + 10_000], traceparent, now)

    def _extend(self, due: List[_Job], traceparent: Optional[str], now: float) -> None:
        """Extends the leases of due in one request that carries traceparent."""
        try:
            results = self.client.extend([j.chunk for j in due], self.lease, traceparent=traceparent)
        except OpsqError as e:
            retry_in = min(5.0, self.extend_every)
            self._say("extending %d lease(s) failed (%s); trying again in %.0fs", len(due), e, retry_in)
            for j in due:
                j.next_extend = now + retry_in
            return
        for j, r in zip(due, results):
            if r.status == "extended":
                j.next_extend = now + self.extend_every
                j.deadline = now + self.lease_seconds
            else:
                j.gone = r.status
                self._say(
                    "chunk %s/%d: extending its lease answered %s; the chunk went elsewhere (its submission finished or was cancelled, or its lease ran out)",
                    j.chunk.submission_id,
                    j.chunk.chunk_index,
                    r.status,
                )


def _one_line(s: str, n: int) -> str:
    """s on one line, at most n characters, for a note."""
    one = " ".join(s.split())
    return one if len(one) <= n else one[:n] + "…"


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
