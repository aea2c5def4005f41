"""The values of the opsq REST API v1 (DESIGN.md §3), as dataclasses.

Each has a ``from_json`` that reads the server's JSON object; fields the server may add
later are ignored, so that a newer server does not break an older client.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from .errors import ProtocolError

#: A strategic metadata value: an integer (int64) or a string.
MetadataValue = Union[int, str]

_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_time(s: Optional[str]) -> Optional[_dt.datetime]:
    """Reads an RFC 3339 time as the server writes it (up to nanoseconds, ``Z`` or an
    offset) into an aware datetime; None stays None. Python 3.9's fromisoformat takes
    neither ``Z`` nor more than 6 fractional digits, hence this."""
    if s is None:
        return None
    m = _TIME_RE.match(s)
    if not m:
        raise ProtocolError(f"opsq: {s!r} is not an RFC 3339 time")
    base, frac, zone = m.groups()
    text = base
    if frac:
        text += "." + (frac + "000000")[:6]
    text += "+00:00" if zone == "Z" else zone
    return _dt.datetime.fromisoformat(text)


def _get(obj: Mapping[str, Any], name: str, kind: type) -> Any:
    try:
        v = obj[name]
    except (KeyError, TypeError):
        raise ProtocolError(f"opsq: the answer lacks {name!r}: {str(obj)[:200]}") from None
    if kind is int and isinstance(v, bool) or not isinstance(v, kind):
        raise ProtocolError(f"opsq: {name!r} is {type(v).__name__}, want {kind.__name__}")
    return v


@dataclass(frozen=True)
class Created:
    """The answer to a submit: the new submission's id and how many chunks it has."""

    id: str
    chunks_total: int

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Created":
        return cls(id=_get(o, "id", str), chunks_total=_get(o, "chunks_total", int))


@dataclass(frozen=True)
class Failure:
    """Why a submission failed: the chunk that failed it (or under ``continue`` its last
    failed chunk) and its last error; or, for a child that a parent's end cancelled, no
    chunk (``chunk_index`` None) and an error naming the parent (``"parent 123 failed"``)."""

    chunk_index: Optional[int]
    error: str


@dataclass(frozen=True)
class Status:
    """A submission's status (``GET /v1/submissions/{id}``)."""

    id: str
    tenant: str
    state: str  # in_progress, completed, failed, cancelled
    paused: bool
    chunks_total: int
    chunks_done: int
    chunks_failed: int
    chunks_skipped: int
    priority: int
    metadata: str
    strategic_metadata: Dict[str, MetadataValue]
    on_failure: Any  # "fail_submission", "continue" or {"fail_after": {...}}
    not_before: Optional[_dt.datetime]
    created_at: _dt.datetime
    finished_at: Optional[_dt.datetime]
    failure: Optional[Failure] = None
    prefix: Optional[str] = None
    # A child's (``submit(after=...)``): its parents, its policy, and the parents not
    # finished yet; empty and None for a submission without after.
    after: List[str] = field(default_factory=list)
    after_policy: Optional[str] = None
    waiting_on: List[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Whether the submission has finished (completed, failed or cancelled)."""
        return self.state != "in_progress"

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Status":
        f = o.get("failure") if isinstance(o, Mapping) else None
        return cls(
            id=_get(o, "id", str),
            tenant=o.get("tenant", "default"),
            state=_get(o, "state", str),
            paused=bool(o.get("paused", False)),
            chunks_total=_get(o, "chunks_total", int),
            chunks_done=_get(o, "chunks_done", int),
            chunks_failed=o.get("chunks_failed", 0),
            chunks_skipped=o.get("chunks_skipped", 0),
            priority=o.get("priority", 0),
            metadata=o.get("metadata", ""),
            strategic_metadata=dict(o.get("strategic_metadata") or {}),
            on_failure=o.get("on_failure"),
            not_before=parse_time(o.get("not_before")),
            created_at=parse_time(_get(o, "created_at", str)),  # type: ignore[arg-type]
            finished_at=parse_time(o.get("finished_at")),
            failure=Failure(chunk_index=_get(f, "chunk_index", int) if "chunk_index" in f else None, error=f.get("error", "")) if f else None,
            prefix=o.get("prefix"),
            after=[str(a) for a in o.get("after") or []],
            after_policy=o.get("after_policy"),
            waiting_on=[str(a) for a in o.get("waiting_on") or []],
        )


@dataclass(frozen=True)
class Result:
    """One line of a submission's results, in chunk order.

    ``state`` is ``completed`` (``output`` holds the chunk's output), ``failed`` (``error``
    holds its last error), ``skipped`` or ``pending``.
    """

    chunk_index: int
    state: str
    output: Optional[str] = None
    error: Optional[str] = None

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Result":
        idx = _get(o, "chunk_index", int)
        if "output" in o:
            return cls(chunk_index=idx, state="completed", output=_get(o, "output", str))
        return cls(chunk_index=idx, state=_get(o, "state", str), error=o.get("error"))


@dataclass(frozen=True)
class AttemptError:
    """One failed attempt of a chunk: its error, who reported it, when."""

    error: str
    consumer: str
    at: _dt.datetime


@dataclass(frozen=True)
class FailedChunk:
    """A chunk that failed at least one attempt, with its last errors (newest first)."""

    chunk_index: int
    state: str  # failed, skipped, retrying, completed
    retries: int
    error: str
    errors: List[AttemptError] = field(default_factory=list)

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "FailedChunk":
        return cls(
            chunk_index=_get(o, "chunk_index", int),
            state=_get(o, "state", str),
            retries=o.get("retries", 0),
            error=o.get("error", ""),
            errors=[
                AttemptError(error=e.get("error", ""), consumer=e.get("consumer", ""), at=parse_time(e.get("at")))  # type: ignore[arg-type]
                for e in o.get("errors") or []
            ],
        )


@dataclass(frozen=True)
class FailuresPage:
    """One page of a submission's failed chunks; ``next_after`` is None on the last."""

    failures: List[FailedChunk]
    next_after: Optional[int]

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "FailuresPage":
        return cls(
            failures=[FailedChunk.from_json(f) for f in _get(o, "failures", list)],
            next_after=o.get("next_after"),
        )


@dataclass(frozen=True)
class SubmissionsPage:
    """One page of submissions, newest first; ``next_after`` is None on the last."""

    submissions: List[Status]
    next_after: Optional[str]

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "SubmissionsPage":
        return cls(
            submissions=[Status.from_json(s) for s in _get(o, "submissions", list)],
            next_after=o.get("next_after"),
        )


@dataclass(frozen=True)
class Chunk:
    """A reserved chunk. Exactly one of ``input`` (inline content) and ``prefix``
    (object-storage mode: read ``prefix`` + ``chunk_index`` yourself) is set. Its ``token``
    completes, fails or extends it. ``traceparent`` is the W3C traceparent its submission
    was sent with (None if none): start the consumer's span as its child."""

    token: str
    submission_id: str
    chunk_index: int
    input: Optional[str]
    prefix: Optional[str]
    metadata: str
    strategic_metadata: Dict[str, MetadataValue]
    retries: int
    expires_at: _dt.datetime
    traceparent: Optional[str] = None

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Chunk":
        return cls(
            token=_get(o, "token", str),
            submission_id=_get(o, "submission_id", str),
            chunk_index=_get(o, "chunk_index", int),
            input=o.get("input"),
            prefix=o.get("prefix"),
            metadata=o.get("metadata", ""),
            strategic_metadata=dict(o.get("strategic_metadata") or {}),
            retries=o.get("retries", 0),
            expires_at=parse_time(_get(o, "expires_at", str)),  # type: ignore[arg-type]
            traceparent=o.get("traceparent") or None,
        )


@dataclass(frozen=True)
class PreviewChunk:
    """A chunk a reserve would hand out now (``POST /v1/reserve/preview``): no token,
    nothing reserved."""

    submission_id: str
    chunk_index: int
    strategic_metadata: Dict[str, MetadataValue]

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "PreviewChunk":
        return cls(
            submission_id=_get(o, "submission_id", str),
            chunk_index=_get(o, "chunk_index", int),
            strategic_metadata=dict(o.get("strategic_metadata") or {}),
        )


@dataclass(frozen=True)
class TokenResult:
    """The server's answer for one token of a complete, fail or extend.

    ``status``: complete — ``completed``, ``already_finished`` or ``unknown``; fail —
    ``retrying``, ``failed``, ``already_finished``, ``lost`` or ``unknown``; extend —
    ``extended`` (with ``expires_at``), ``lost``, ``already_finished`` or ``unknown``.
    """

    token: str
    status: str
    expires_at: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "TokenResult":
        return cls(token=_get(o, "token", str), status=_get(o, "status", str), expires_at=parse_time(o.get("expires_at")))
