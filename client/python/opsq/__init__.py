"""opsq: a Python client for opsq, a work queue on PostgreSQL (standard library only).

Producers submit submissions (ordered lists of chunks) and read their results; consumers
reserve chunks, do the work and complete or fail each one — by hand with the Client, or
with a Worker that runs a function per chunk::

    import opsq

    c = opsq.Client()  # OPSQ_URL (default http://localhost:3999) and OPSQ_KEY
    sub = c.submit(["a", "b", "c"])
    opsq.Worker(c, lambda chunk: chunk.input.upper(), once=True, wait=1).run()
    print([r.output for r in c.results(sub.id)])
"""

from .client import Client, go_duration
from .errors import (
    APIError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    OpsqError,
    PayloadTooLarge,
    ProtocolError,
    ResponseTooLarge,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unavailable,
)
from .strategy import StrategyError, parse_text as parse_strategy
from .types import (
    AttemptError,
    Chunk,
    Created,
    FailedChunk,
    Failure,
    FailuresPage,
    PreviewChunk,
    Result,
    Status,
    SubmissionsPage,
    TokenResult,
)
from .worker import FailNow, RetryLater, Throttle, Worker, WorkerStats, set_traceparent, work

__version__ = "0.2.0"

__all__ = [
    "APIError",
    "AttemptError",
    "BadRequest",
    "Chunk",
    "Client",
    "Conflict",
    "Created",
    "FailNow",
    "FailedChunk",
    "Failure",
    "FailuresPage",
    "Forbidden",
    "NotFound",
    "OpsqError",
    "PayloadTooLarge",
    "PreviewChunk",
    "ProtocolError",
    "ResponseTooLarge",
    "Result",
    "RetryLater",
    "Status",
    "StrategyError",
    "SubmissionsPage",
    "Throttle",
    "TokenResult",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "Worker",
    "WorkerStats",
    "go_duration",
    "parse_strategy",
    "set_traceparent",
    "work",
]
