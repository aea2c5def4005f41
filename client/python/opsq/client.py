"""The opsq client: the producer and consumer routes of the REST API v1 (DESIGN.md §3)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import warnings
import time
from urllib.parse import quote as _quote
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ._http import UPLOAD_PIECE, Transport
from .errors import OpsqError, ProtocolError, TransportError
from .strategy import to_json as strategy_json
from .types import (
    Chunk,
    Created,
    FailedChunk,
    FailuresPage,
    MetadataValue,
    PreviewChunk,
    Result,
    Status,
    SubmissionsPage,
    TokenResult,
    parse_time,
)

#: The base URL when neither the url argument nor OPSQ_URL gives one.
URL_DEFAULT = "http://localhost:3999"
#: How long any socket operation of a call may wait, beyond a long poll's own wait.
TIMEOUT_DEFAULT = 30.0
#: The largest answer the client reads (a reserve's answer is at most 16 MiB of input).
MAX_RESPONSE_BYTES_DEFAULT = 64 << 20
#: The longest results line the client reads (an output is a JSON string).
MAX_LINE_BYTES_DEFAULT = 16 << 20
#: How long a followed results stream may send nothing before the client gives up on it:
#: the server ends a follow after OPSQ_MAX_FOLLOW (1h), so a silence past that is a dead
#: connection.
FOLLOW_IDLE_DEFAULT = 3660.0
#: The longest wait the server grants a reserve or a status (60s).
MAX_WAIT = 60.0
USER_AGENT = "opsq-python"
#: The W3C Trace Context header: sent with a submission (kept and handed out with each of
#: its chunks), and with a consumer's complete, fail and extend (its own span's).
TRACEPARENT = "traceparent"

#: A duration: seconds (int or float), a timedelta, or a Go duration string such as "5m".
Duration = Union[int, float, _dt.timedelta, str]
#: Where a token is wanted, a reserved Chunk may be given instead.
TokenLike = Union[str, Chunk]


def go_duration(d: Optional[Duration]) -> Optional[str]:
    """Returns d as a Go duration string, to the millisecond ("30s", "1500ms")."""
    if d is None or isinstance(d, str):
        return d
    if isinstance(d, bool):
        raise TypeError("opsq: a duration is seconds, a timedelta or a string, not a bool")
    secs = d.total_seconds() if isinstance(d, _dt.timedelta) else float(d)
    if secs < 0:
        raise ValueError(f"opsq: negative duration {d!r}")
    ms = round(secs * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _seconds(d: Optional[Duration]) -> float:
    """Returns d in seconds, for the client's own timeouts; a string it cannot read is 60s
    (the longest wait there is)."""
    if d is None:
        return 0.0
    if isinstance(d, _dt.timedelta):
        return d.total_seconds()
    if isinstance(d, (int, float)):
        return float(d)
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, num = 0.0, ""
    i = 0
    try:
        while i < len(d):
            if d[i].isdigit() or d[i] == ".":
                num += d[i]
                i += 1
                continue
            j = i
            while j < len(d) and not (d[j].isdigit() or d[j] == "."):
                j += 1
            total += float(num) * units[d[i:j]]
            num, i = "", j
        return total if not num else MAX_WAIT
    except (KeyError, ValueError):
        return MAX_WAIT


def _token(t: TokenLike) -> str:
    return t.token if isinstance(t, Chunk) else t


def _value_param(v: Optional[MetadataValue]) -> Optional[str]:
    """A strategic metadata value as the list route's value parameter takes it: an integer
    bare, a string quoted (so that "42" stays the string)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError("opsq: a strategic metadata value is an int or a str")
    return str(v) if isinstance(v, int) else json.dumps(v, ensure_ascii=False)


class Client:
    """A client of one opsq deployment (one instance, or a load balancer in front of
    several). Safe for concurrent use from several threads.

    Args:
        url: the base URL, such as ``http://localhost:3999``. Defaults to the OPSQ_URL
            environment variable, else ``http://localhost:3999``.
        key: an API key (``opsq keys create``), sent as ``Authorization: Bearer <key>``.
            Defaults to the OPSQ_KEY environment variable; none if that is unset too.
        timeout: the longest any socket operation of a call waits, in seconds (a long poll
            waits its own wait on top). Defaults to 30.
        max_response_bytes: the largest answer read; past it a call raises
            ResponseTooLarge. Defaults to 64 MiB.
        ssl_context: for https URLs, the context that checks the server (defaults to the
            system's trust store).

    Every error is an :class:`opsq.OpsqError`; an answer other than 2xx an
    :class:`opsq.APIError` carrying ``status``, ``code`` and ``message``.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        key: Optional[str] = None,
        *,
        timeout: float = TIMEOUT_DEFAULT,
        max_response_bytes: int = MAX_RESPONSE_BYTES_DEFAULT,
        user_agent: str = USER_AGENT,
        ssl_context: Any = None,
    ) -> None:
        url = url or os.environ.get("OPSQ_URL") or URL_DEFAULT
        key = key if key is not None else os.environ.get("OPSQ_KEY") or None
        if timeout <= 0:
            raise ValueError("opsq: timeout must be positive")
        self._t = Transport(url, key, timeout, user_agent, max_response_bytes, ssl_context)
        self.timeout = timeout

    @property
    def url(self) -> str:
        """The base URL this client calls."""
        return self._t.base_url

    def close(self) -> None:
        """Closes the client's idle connections. Call it when no request is running; a
        client closed can still be used (it connects again)."""
        self._t.close_all()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Producer.

    def submit(
        self,
        chunks: Optional[Sequence[Union[str, bytes]]] = None,
        *,
        metadata: Optional[str] = None,
        strategic_metadata: Optional[Mapping[str, MetadataValue]] = None,
        priority: Optional[int] = None,
        max_retries: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        prefix: Optional[str] = None,
        chunk_count: Optional[int] = None,
        on_failure: Any = None,
        retry_backoff: Optional[Mapping[str, Any]] = None,
        not_before: Union[None, str, _dt.datetime, _dt.timedelta, int, float] = None,
        tenant: Optional[str] = None,
        traceparent: Optional[str] = None,
        after: Optional[Sequence[str]] = None,
        after_policy: Optional[str] = None,
    ) -> Created:
        """Creates a submission from one JSON body (at most 32 MiB on the server): chunks
        inline, or ``prefix`` and ``chunk_count`` for object-storage mode. For many chunks,
        :meth:`submit_ndjson` streams them instead. ``tenant`` is for admin keys (a
        producer key's submissions are its tenant's).

        ``on_failure``: ``"fail_submission"`` (default), ``"continue"``, or
        ``{"fail_after": {"chunks": K}}`` / ``{"fail_after": {"fraction": F}}``.
        ``retry_backoff``: ``{"initial": "1s", "factor": 2, "max": "1m"}``.
        ``not_before``: a datetime (aware, or taken as UTC), or a duration from now.
        ``after``: the ids (at most 100, of the same tenant) of the submissions it starts
        after; it is created at once and hands nothing out until they finished.
        ``after_policy``: ``"completed"`` (default: a parent that failed or was cancelled
        cancels it) or ``"finished"`` (start whatever their states).
        ``traceparent``: the W3C traceparent of the producer's span, kept with the
        submission and handed out with each of its chunks (``Chunk.traceparent``), so that
        consumers' spans join the producer's trace; one that is not valid is ignored.
        """
        body = self._header(locals())
        if chunks is not None:
            if isinstance(chunks, (str, bytes)):
                raise TypeError("opsq: chunks is a sequence of strings, not one string")
            body["chunks"] = [c.decode("utf-8") if isinstance(c, bytes) else c for c in chunks]
        return Created.from_json(
            self._t.call("POST", "/v1/submissions", body=body, idempotent=idempotency_key is not None, headers={TRACEPARENT: traceparent})
        )

    def submit_ndjson(
        self,
        chunks: Iterable[Union[str, bytes]],
        *,
        progress: Optional[Callable[[int, int], None]] = None,
        metadata: Optional[str] = None,
        strategic_metadata: Optional[Mapping[str, MetadataValue]] = None,
        priority: Optional[int] = None,
        max_retries: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        on_failure: Any = None,
        retry_backoff: Optional[Mapping[str, Any]] = None,
        not_before: Union[None, str, _dt.datetime, _dt.timedelta, int, float] = None,
        tenant: Optional[str] = None,
        traceparent: Optional[str] = None,
        after: Optional[Sequence[str]] = None,
        after_policy: Optional[str] = None,
    ) -> Created:
        """Creates a submission from chunks, any iterable (a generator reading a file, say),
        streamed as an ``application/x-ndjson`` body: nothing is held in memory beyond a
        64 KiB piece, and the body has no total limit. Each chunk is a str (or UTF-8
        bytes) of at most 1 MiB.

        ``progress(chunks_sent, bytes_sent)``, if given, is called after each piece sent
        and once at the end. The server inserts the submission atomically: an error (from
        the iterable, or the server's) leaves no submission. The other arguments are those
        of :meth:`submit`.
        """
        header = self._header(locals())
        head = json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n"

        def pieces() -> Iterator[Tuple[bytes, int]]:
            buf = bytearray(head)
            n = sent = 0
            for c in chunks:
                if isinstance(c, bytes):
                    try:
                        c = c.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise ValueError(f"opsq: chunk {n} is not valid UTF-8 ({e}): chunks are JSON strings, so encode binary data first (base64, say)") from None
                elif not isinstance(c, str):
                    raise TypeError(f"opsq: chunk {n} is {type(c).__name__}; want str or bytes")
                try:
                    buf += json.dumps(c, ensure_ascii=False).encode("utf-8")
                except UnicodeEncodeError as e:
                    raise ValueError(f"opsq: chunk {n} cannot be sent as UTF-8: {e}") from None
                buf += b"\n"
                n += 1
                if len(buf) >= UPLOAD_PIECE:
                    sent += len(buf)
                    yield bytes(buf), n
                    buf.clear()
                    if progress is not None:
                        progress(n, sent)
            sent += len(buf)
            yield bytes(buf), n
            if progress is not None:
                progress(n, sent)

        return Created.from_json(
            self._t.upload("/v1/submissions", "application/x-ndjson", pieces(), self.timeout, headers={TRACEPARENT: traceparent})
        )

    @staticmethod
    def _header(args: Dict[str, Any]) -> Dict[str, Any]:
        """The header fields of a submission from submit's arguments, those given only."""
        body: Dict[str, Any] = {}
        for name in (
            "metadata",
            "strategic_metadata",
            "priority",
            "max_retries",
            "idempotency_key",
            "prefix",
            "chunk_count",
            "on_failure",
            "retry_backoff",
            "tenant",
            "after_policy",
        ):
            v = args.get(name)
            if v is not None:
                body[name] = dict(v) if name in ("strategic_metadata", "retry_backoff") else v
        after = args.get("after")
        if after is not None:
            if isinstance(after, (str, bytes)):
                raise TypeError("opsq: after is a sequence of submission ids, not one string")
            body["after"] = [str(a) for a in after]
        nb = args.get("not_before")
        if isinstance(nb, _dt.datetime):
            if nb.tzinfo is None:
                nb = nb.replace(tzinfo=_dt.timezone.utc)
            body["not_before"] = nb.isoformat()
        elif nb is not None:
            body["not_before"] = go_duration(nb)
        return body

    def status(self, id: str, wait: Optional[Duration] = None) -> Status:
        """Returns the status of submission id. With ``wait`` (at most 60s) the server holds
        the request until the submission finishes or the wait runs out."""
        w = go_duration(wait) if wait else None
        return Status.from_json(
            self._t.call("GET", self._path(id), {"wait": w}, timeout=self.timeout + _seconds(wait), idempotent=True)
        )

    def wait(self, id: str, timeout: Optional[float] = None) -> Status:
        """Waits until submission id has finished, or ``timeout`` seconds have passed
        (None: no limit), long-polling 60s at a time, and returns its last status: check
        ``status.finished``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT if deadline is None else min(MAX_WAIT, deadline - time.monotonic())
            st = self.status(id, wait=max(left, 0.001) if left > 0 else None)
            if st.finished or (deadline is not None and time.monotonic() >= deadline):
                return st

    def results(self, id: str, *, max_line_bytes: int = MAX_LINE_BYTES_DEFAULT) -> Iterator[Result]:
        """Yields the results of submission id, in any state, one per chunk in chunk order:
        a completed chunk's output, or the state of one that is not (failed, skipped,
        pending)."""
        for line in self._t.stream(self._path(id, "/results"), {}, self.timeout, max_line_bytes):
            yield self._result(line)

    def follow(
        self,
        id: str,
        *,
        idle_timeout: float = FOLLOW_IDLE_DEFAULT,
        max_line_bytes: int = MAX_LINE_BYTES_DEFAULT,
    ) -> Iterator[Result]:
        """Yields the results of submission id as its chunks finish, in chunk order: each
        line once its chunk and every chunk before it are finished (completed, failed or
        skipped). Ends once the submission has finished and every line is yielded. The
        server ends a followed stream after a while (OPSQ_MAX_FOLLOW, 1h): it is then
        followed again from the line after the last yielded, so each line comes once.
        ``idle_timeout`` bounds a silence of the stream (a chunk that takes that long)."""
        last = -1
        while True:
            progressed = False
            for line in self._t.stream(self._path(id, "/results"), {"follow": "true"}, idle_timeout, max_line_bytes):
                r = self._result(line)
                if r.chunk_index <= last:
                    continue  # yielded from an earlier stream
                yield r
                last = r.chunk_index
                progressed = True
            st = self.status(id)
            if st.finished and last + 1 >= st.chunks_total:
                return
            if st.finished and not progressed:
                raise OpsqError(f"opsq: following results of submission {id}: the stream ended after chunk {last} of {st.chunks_total}")
            if not progressed:
                time.sleep(1)  # do not spin on a proxy that cuts streams at once

    @staticmethod
    def _result(line: bytes) -> Result:
        try:
            return Result.from_json(json.loads(line))
        except ValueError as e:
            raise ProtocolError(f"opsq: a results line is not JSON: {line[:200]!r}") from e

    def failures(self, id: str, *, limit: Optional[int] = None, after: Optional[int] = None) -> FailuresPage:
        """Returns one page of the chunks of submission id that failed at least one
        attempt, in chunk order, each with its last errors (newest first); ``limit`` at
        most 1000 (server default 100), ``after`` the previous page's ``next_after``. For
        all of them, :meth:`all_failures`.

        For one release (0.2), iterating what this returns still yields every failed
        chunk, page after page, as ``failures`` did in 0.1, with a DeprecationWarning:
        iterate :meth:`all_failures` instead."""
        page = FailuresPage.from_json(self._t.call("GET", self._path(id, "/failures"), {"limit": limit, "after": after}, idempotent=True))
        return _FailuresPageIterable(page.failures, page.next_after, lambda: self.all_failures(id, page_size=limit))

    def all_failures(self, id: str, *, page_size: Optional[int] = None) -> Iterator[FailedChunk]:
        """Yields every chunk of submission id that failed at least one attempt, in chunk
        order, each with its last errors (newest first), a page at a time."""
        after: Optional[int] = None
        while True:
            page = self.failures(id, limit=page_size, after=after)
            yield from page.failures
            if page.next_after is None:
                return
            after = page.next_after

    def failures_page(self, id: str, *, limit: Optional[int] = None, after: Optional[int] = None) -> FailuresPage:
        """Deprecated in 0.2, removed in the next release: :meth:`failures` is one page now."""
        warnings.warn("opsq: Client.failures_page is Client.failures now", DeprecationWarning, stacklevel=2)
        return self.failures(id, limit=limit, after=after)

    def retry(
        self,
        id: str,
        chunks: Optional[str] = None,
        *,
        chunk_indexes: Optional[Sequence[int]] = None,
        max_retries: Optional[int] = None,
    ) -> Status:
        """Gives the failed chunks of submission id (with ``chunks="unfinished"``, the
        skipped ones too; with ``chunk_indexes``, only those of them it names, at most
        1 000) a fresh attempt budget and returns its status. Raises Conflict (code
        ``nothing_to_retry``) when there is nothing to retry."""
        body: Dict[str, Any] = {}
        if chunk_indexes is not None:
            body["chunk_indexes"] = list(chunk_indexes)
            if chunks is not None:
                body["chunks"] = chunks  # the server says why not both
        else:
            body["chunks"] = chunks or "failed"
        if max_retries is not None:
            body["max_retries"] = max_retries
        return Status.from_json(self._t.call("POST", self._path(id, "/retry"), body=body))

    def retry_many(
        self,
        *,
        state: Optional[str] = None,
        key: Optional[str] = None,
        value: Optional[MetadataValue] = None,
        limit: Optional[int] = None,
        chunks: Optional[str] = None,
        max_retries: Optional[int] = None,
        tenant: Optional[str] = None,
    ) -> List[str]:
        """Retries every submission the filter selects (``state`` defaults to failed;
        ``tenant`` for admin keys), newest first, and returns the ids retried."""
        body = {k: v for k, v in locals().items() if k != "self" and v is not None}
        return list(self._t.call("POST", "/v1/submissions/retry", body=body)["retried"])

    def pause(self, id: str) -> Status:
        """Stops handing out the chunks of submission id (those in flight finish) and
        returns its status. Idempotent; Conflict if it has finished."""
        return Status.from_json(self._t.call("POST", self._path(id, "/pause"), idempotent=True))

    def resume(self, id: str) -> Status:
        """Makes a paused submission reservable again at once and returns its status."""
        return Status.from_json(self._t.call("POST", self._path(id, "/resume"), idempotent=True))

    def cancel(self, id: str) -> Status:
        """Cancels submission id and returns its status; Conflict if it has finished."""
        return Status.from_json(self._t.call("POST", self._path(id, "/cancel")))

    def list(
        self,
        *,
        state: Optional[str] = None,
        key: Optional[str] = None,
        value: Optional[MetadataValue] = None,
        tenant: Optional[str] = None,
        limit: Optional[int] = None,
        after: Optional[str] = None,
    ) -> SubmissionsPage:
        """Returns one page of submissions, newest first: by ``state`` and by strategic
        metadata ``key`` = ``value`` (give both or neither); ``limit`` at most 1000,
        ``after`` the previous page's ``next_after``; ``tenant`` for admin keys."""
        q = {"state": state, "key": key, "value": _value_param(value), "tenant": tenant, "limit": limit, "after": after}
        return SubmissionsPage.from_json(self._t.call("GET", "/v1/submissions", q, idempotent=True))

    def all_submissions(self, **filters: Any) -> Iterator[Status]:
        """Yields every submission :meth:`list` selects with filters, page after page."""
        after = filters.pop("after", None)
        while True:
            page = self.list(after=after, **filters)
            yield from page.submissions
            if page.next_after is None:
                return
            after = page.next_after

    def list_all(self, **filters: Any) -> Iterator[Status]:
        """Deprecated in 0.2, removed in the next release: :meth:`all_submissions`."""
        warnings.warn("opsq: Client.list_all is Client.all_submissions now", DeprecationWarning, stacklevel=2)
        return self.all_submissions(**filters)

    @staticmethod
    def _path(id: str, suffix: str = "") -> str:
        if not isinstance(id, str) or not id:
            raise ValueError(f"opsq: submission id {id!r}: want a non-empty string")
        from urllib.parse import quote

        return "/v1/submissions/" + quote(id, safe="") + suffix

    # Consumer.

    def reserve(
        self,
        max: int = 1,
        *,
        strategy: Any = None,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        consumer: Optional[str] = None,
        _register: Optional[Callable[[Optional[socket.socket]], None]] = None,
    ) -> List[Chunk]:
        """Reserves up to ``max`` chunks (1 to 10 000). ``strategy`` is the JSON form (a
        str such as ``"oldest_first"`` or a dict) or the text form
        (``"select_only(mode=preview, random)"``); the default is random. ``lease`` (1s to
        24h, default 5m) is how long the chunks are yours; ``wait`` (at most 60s) how long
        to long-poll when none is available; an empty list means none came. ``consumer``
        names you in the server's records (at most 256 bytes)."""
        body: Dict[str, Any] = {"max": max}
        s = strategy_json(strategy)
        if s is not None:
            body["strategy"] = s
        if lease is not None:
            body["lease"] = go_duration(lease)
        if wait:
            body["wait"] = go_duration(wait)
        if consumer:
            body["consumer"] = consumer
        out = self._t.call("POST", "/v1/reserve", body=body, timeout=self.timeout + _seconds(wait), register=_register)
        return [Chunk.from_json(c) for c in out["chunks"]]

    def preview(self, max: int = 1, *, strategy: Any = None) -> List[PreviewChunk]:
        """Returns the chunks a reserve of ``max`` with ``strategy`` would hand out now, in
        order, without reserving anything: to check a strategy."""
        body: Dict[str, Any] = {"max": max}
        s = strategy_json(strategy)
        if s is not None:
            body["strategy"] = s
        out = self._t.call("POST", "/v1/reserve/preview", body=body, idempotent=True)
        return [PreviewChunk.from_json(c) for c in out["chunks"]]

    def complete(self, token: TokenLike, output: Union[str, bytes] = "", *, traceparent: Optional[str] = None) -> TokenResult:
        """Completes a reserved chunk with its output; the first completion wins, repeats
        are harmless. Returns the server's answer (status ``completed``,
        ``already_finished`` or ``unknown``).

        ``traceparent`` is that of the consumer's span (a child of ``chunk.traceparent``):
        the instance's span of the call joins the trace beneath it. The same holds for
        fail and extend."""
        return self.complete_many([(token, output)], traceparent=traceparent)[0]

    def complete_many(
        self, completions: Iterable[Tuple[TokenLike, Union[str, bytes]]], *, traceparent: Optional[str] = None
    ) -> List[TokenResult]:
        """Completes several chunks at once (at most 10 000); results in request order."""
        items = []
        for tok, out in completions:
            if isinstance(out, bytes):
                out = out.decode("utf-8")
            items.append({"token": _token(tok), "output": out})
        return self._token_results(
            self._t.call("POST", "/v1/complete", body={"completions": items}, idempotent=True, headers={TRACEPARENT: traceparent})
        )

    def fail(
        self,
        token: TokenLike,
        error: str = "",
        *,
        retry: bool = True,
        retry_after: Optional[Duration] = None,
        traceparent: Optional[str] = None,
    ) -> TokenResult:
        """Reports a failed attempt. With ``retry`` (the default) the chunk is handed out
        again after its backoff, or after ``retry_after`` (more than 0s, at most 24h),
        unless its attempts are spent; without, it fails now. Returns the server's answer
        (``retrying``, ``failed``, ``already_finished``, ``lost`` or ``unknown``)."""
        return self.fail_many([(token, error, retry, retry_after)], traceparent=traceparent)[0]

    def fail_many(
        self, failures: Iterable[Tuple[TokenLike, str, bool, Optional[Duration]]], *, traceparent: Optional[str] = None
    ) -> List[TokenResult]:
        """Reports several failed attempts at once, as (token, error, retry, retry_after)
        tuples; results in request order."""
        items = []
        for tok, err, retry, after in failures:
            f: Dict[str, Any] = {"token": _token(tok), "error": err, "retry": bool(retry)}
            if after is not None and retry:
                f["retry_after"] = go_duration(after)
            items.append(f)
        return self._token_results(self._t.call("POST", "/v1/fail", body={"failures": items}, headers={TRACEPARENT: traceparent}))

    def extend(
        self, tokens: Union[TokenLike, Sequence[TokenLike]], lease: Optional[Duration] = None, *, traceparent: Optional[str] = None
    ) -> List[TokenResult]:
        """Moves the leases of reserved chunks to now + ``lease`` (default 5m); results in
        request order (``extended`` with the new ``expires_at``, ``lost``,
        ``already_finished`` or ``unknown``)."""
        if isinstance(tokens, (str, Chunk)):
            tokens = [tokens]
        body: Dict[str, Any] = {"tokens": [_token(t) for t in tokens]}
        if lease is not None:
            body["lease"] = go_duration(lease)
        return self._token_results(self._t.call("POST", "/v1/extend", body=body, idempotent=True, headers={TRACEPARENT: traceparent}))

    def throttle(self, key: str, value: MetadataValue, for_: Duration) -> _dt.datetime:
        """Hands out no chunk of a submission whose strategic metadata has ``key`` =
        ``value`` (key ``"@tenant"``: of the tenant ``value``), by any instance, for
        ``for_`` (1s to 1h): back-pressure when a downstream said "slow down". A consumer
        key limited to tenants throttles within them only; a throttle set again keeps the
        later end. Returns at once, with the time the throttle ends."""
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError("opsq: a strategic metadata value is an int or a str")
        out = self._t.call("POST", "/v1/throttle", body={"key": key, "value": value, "for": go_duration(for_)})
        until = parse_time(out.get("until") if isinstance(out, dict) else None)
        if until is None:
            raise ProtocolError(f"opsq: POST /v1/throttle: the answer lacks until: {str(out)[:200]}")
        return until

    def lift_throttle(self, key: str, value: MetadataValue) -> int:
        """Ends the throttles of ``key`` = ``value`` at once (``DELETE /v1/throttle``),
        before their end, and returns how many ended (one per tenant of a consumer limited
        to tenants that set it) once no instance holds them any more. A consumer key
        limited to tenants lifts its tenants' only; any other consumer key, and an admin
        key, lifts them in every tenant. None in force raises NotFound."""
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError("opsq: a strategic metadata value is an int or a str")
        out = self._t.call("DELETE", "/v1/throttle", body={"key": key, "value": value})
        lifted = out.get("lifted") if isinstance(out, dict) else None
        if not isinstance(lifted, int) or isinstance(lifted, bool):
            raise ProtocolError(f"opsq: DELETE /v1/throttle: the answer lacks lifted: {str(out)[:200]}")
        return lifted

    @staticmethod
    def _token_results(out: Any) -> List[TokenResult]:
        return [TokenResult.from_json(r) for r in out["results"]]

    # Schedules: submissions that start themselves (DESIGN.md §3). A producer key manages
    # its tenant's; an admin key names the tenant (None: "default"; for schedules, every
    # tenant). The answers are the server's JSON.

    def create_schedule(
        self,
        name: str,
        cron: str,
        submission: Mapping[str, Any],
        *,
        timezone: Optional[str] = None,
        overlap: Optional[str] = None,
        catch_up: Optional[str] = None,
        paused: bool = False,
        tenant: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Makes a schedule: each run of ``cron`` (robfig/cron syntax, in ``timezone``)
        submits ``submission``, a submission body whose prefix, metadata and
        idempotency_key may hold {{.Time}} and {{.Date}}; once per run across all
        instances. Returns it with its ``next_runs``. A name in use raises Conflict."""
        body = self._schedule_body(cron, submission, timezone, overlap, catch_up, paused, tenant)
        body["name"] = name
        return dict(self._t.call("POST", "/v1/schedules", body=body))

    def replace_schedule(
        self,
        name: str,
        cron: str,
        submission: Mapping[str, Any],
        *,
        timezone: Optional[str] = None,
        overlap: Optional[str] = None,
        catch_up: Optional[str] = None,
        paused: bool = False,
        tenant: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Replaces the definition of schedule ``name`` (its runs so far stay)."""
        body = self._schedule_body(cron, submission, timezone, overlap, catch_up, paused, tenant)
        return dict(self._t.call("PUT", _schedule_path(name), query=_tenant_query(tenant), body=body))

    @staticmethod
    def _schedule_body(cron: str, submission: Mapping[str, Any], timezone: Optional[str], overlap: Optional[str],
                       catch_up: Optional[str], paused: bool, tenant: Optional[str]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"cron": cron, "submission": dict(submission), "paused": paused}
        for k, v in (("timezone", timezone), ("overlap", overlap), ("catch_up", catch_up), ("tenant", tenant)):
            if v is not None:
                body[k] = v
        return body

    def schedule(self, name: str, tenant: Optional[str] = None) -> Dict[str, Any]:
        """Returns schedule ``name`` with its ``next_runs`` and ``last_runs`` (each run's
        scheduled time, outcome — submitted with its submission_id, skipped, missed,
        failed with its error — and when)."""
        return dict(self._t.call("GET", _schedule_path(name), query=_tenant_query(tenant), idempotent=True))

    def schedules(self, tenant: Optional[str] = None) -> List[Dict[str, Any]]:
        """Returns the schedules of the key's tenant (an admin key's of ``tenant``, or of
        every tenant), by tenant and name."""
        out = self._t.call("GET", "/v1/schedules", query=_tenant_query(tenant), idempotent=True)
        return list(out["schedules"])

    def delete_schedule(self, name: str, tenant: Optional[str] = None) -> None:
        """Deletes schedule ``name`` and its runs (their submissions stay)."""
        self._t.call("DELETE", _schedule_path(name), query=_tenant_query(tenant))

    def pause_schedule(self, name: str, tenant: Optional[str] = None) -> Dict[str, Any]:
        """Makes no run of schedule ``name`` until resume_schedule."""
        return dict(self._t.call("POST", _schedule_path(name, "/pause"), query=_tenant_query(tenant)))

    def resume_schedule(self, name: str, tenant: Optional[str] = None) -> Dict[str, Any]:
        """Runs a paused schedule again from its next time after now."""
        return dict(self._t.call("POST", _schedule_path(name, "/resume"), query=_tenant_query(tenant)))

    def trigger_schedule(self, name: str, tenant: Optional[str] = None) -> Dict[str, Any]:
        """Makes one run of schedule ``name`` now and returns it."""
        return dict(self._t.call("POST", _schedule_path(name, "/trigger"), query=_tenant_query(tenant)))

    def backfill_schedule(self, name: str, from_: Union[str, _dt.datetime], to: Union[str, _dt.datetime],
                          tenant: Optional[str] = None) -> List[Dict[str, Any]]:
        """Makes the runs of schedule ``name`` scheduled from ``from_`` to ``to`` (both
        included, at most 1 000), each once, and returns those it made."""
        body = {"from": _rfc3339(from_), "to": _rfc3339(to)}
        out = self._t.call("POST", _schedule_path(name, "/backfill"), query=_tenant_query(tenant), body=body)
        return list(out["runs"])

    # Operations.

    def cluster(self) -> Dict[str, Any]:
        """Returns ``GET /v1/cluster`` (admin keys): the instances and their shards, as
        the server's JSON."""
        return dict(self._t.call("GET", "/v1/cluster", idempotent=True))

    def ready(self) -> bool:
        """Whether ``GET /readyz`` answers 200 (no key needed)."""
        try:
            self._t.call("GET", "/readyz", idempotent=True)
            return True
        except (OpsqError, TransportError):
            return False


class _FailuresPageIterable(FailuresPage):
    """A FailuresPage that, iterated, yields every failed chunk (all pages) with a
    DeprecationWarning: what failures returned in 0.1. Removed after 0.2."""

    def __init__(self, failures: List[FailedChunk], next_after: Optional[int], all_pages: Callable[[], Iterator[FailedChunk]]) -> None:
        super().__init__(failures=failures, next_after=next_after)
        object.__setattr__(self, "_all_pages", all_pages)

    def __iter__(self) -> Iterator[FailedChunk]:
        warnings.warn("opsq: Client.failures returns one page now; iterate Client.all_failures for every failed chunk", DeprecationWarning, stacklevel=2)
        return iter(self._all_pages())  # type: ignore[attr-defined]


def _schedule_path(name: str, suffix: str = "") -> str:
    if not name:
        raise ValueError("opsq: empty schedule name")
    return "/v1/schedules/" + _quote(name, safe="") + suffix


def _tenant_query(tenant: Optional[str]) -> Optional[Dict[str, str]]:
    return {"tenant": tenant} if tenant else None


def _rfc3339(t: Union[str, _dt.datetime]) -> str:
    if isinstance(t, str):
        return t
    if t.tzinfo is None:
        raise ValueError("opsq: a naive datetime; give one with a time zone")
    return t.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")
