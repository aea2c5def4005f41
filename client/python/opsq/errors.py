"""The exceptions of the opsq client.

Every error the client raises is an :class:`OpsqError`. An answer of the server other than
2xx is an :class:`APIError` (or one of its subclasses, chosen by the HTTP status), carrying
the status and the ``code`` and ``message`` of opsq's error body
(``{"error": {"code": ..., "message": ...}}``).
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class OpsqError(Exception):
    """The base of every error the opsq client raises."""


class TransportError(OpsqError):
    """The server could not be reached, or the connection broke or timed out.

    The cause (an ``OSError`` such as ``ConnectionRefusedError`` or ``socket.timeout``) is
    in ``__cause__``. Such an error is worth retrying later.
    """


class ResponseTooLarge(OpsqError):
    """An answer (or one line of a results stream) was larger than the client's bound."""


class ProtocolError(OpsqError):
    """The server answered something that is not what the API says (not JSON, say)."""


class APIError(OpsqError):
    """An answer of the server other than 2xx.

    Attributes:
        status: the HTTP status, such as 400 or 409.
        code: the snake_case code of opsq's error body (``not_found``, ``bad_request``,
            ``nothing_to_retry``…), or ``http_<status>`` when the body was not an opsq
            error (a proxy's error page, say).
        message: the error body's message (a 400 names the field), or the body's text.
        retry_after: the ``Retry-After`` header in seconds (429 and 503), else None.
    """

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"opsq: {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Whether the same request may succeed later (408, 429, 5xx)."""
        return self.status in (408, 429) or self.status >= 500


class BadRequest(APIError):
    """400: bad input; the message names the field."""


class Unauthorized(APIError):
    """401: a missing or wrong API key."""


class Forbidden(APIError):
    """403: an API key of a role that may not do this."""


class NotFound(APIError):
    """404: no such submission (or one of another tenant), no such throttle in force, or
    no such route."""


class Conflict(APIError):
    """409: a state conflict (``already_finished``, ``nothing_to_retry``)."""


class PayloadTooLarge(APIError):
    """413: a JSON body over OPSQ_MAX_BODY, or a chunk over OPSQ_MAX_CHUNK_BYTES."""


class TooManyRequests(APIError):
    """429: over a quota or a rate; ``retry_after`` says when to try again."""


class Unavailable(APIError):
    """503: not now (database unreachable, instance not ready, busy)."""


_BY_STATUS: Dict[int, Type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: TooManyRequests,
    503: Unavailable,
}


def api_error(status: int, code: str, message: str, retry_after: Optional[float] = None) -> APIError:
    """Returns the APIError subclass instance for status."""
    cls = _BY_STATUS.get(status, APIError)
    return cls(status, code, message, retry_after)
