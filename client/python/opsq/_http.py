"""The HTTP transport of the opsq client: http.client, one idle keep-alive connection per
thread, a timeout on every socket operation, bounded reads."""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import threading
import urllib.parse
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, Mapping, Optional, Tuple

from .errors import APIError, ProtocolError, ResponseTooLarge, TransportError, api_error

#: The most of an error body the client reads.
ERROR_BODY_MAX = 64 << 10
#: The size of the pieces an NDJSON upload is sent in.
UPLOAD_PIECE = 64 << 10

_RETRYABLE_ON_REUSE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class _Slot:
    """A thread's idle connection; closed when the thread ends and drops its locals."""

    __slots__ = ("conn", "__weakref__")

    def __init__(self) -> None:
        self.conn: Optional[http.client.HTTPConnection] = None

    def __del__(self) -> None:
        if self.conn is not None:
            self.conn.close()


class Transport:
    """Sends requests to one opsq base URL. Safe for concurrent use: each thread keeps its
    own idle connection."""

    def __init__(
        self,
        base_url: str,
        key: Optional[str],
        timeout: float,
        user_agent: str,
        max_response_bytes: int,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"opsq: base URL {base_url!r}: want http://host:port or https://host:port")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.timeout = timeout
        self.user_agent = user_agent
        self.max_response_bytes = max_response_bytes
        self.ssl_context = ssl_context
        self._local = threading.local()
        self._idle: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()

    # Connections.

    def _new_conn(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            ctx = self.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _slot(self) -> _Slot:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot()
        return slot

    def _take_idle(self) -> Optional[http.client.HTTPConnection]:
        slot = self._slot()
        conn, slot.conn = slot.conn, None
        if conn is None:
            return None
        self._idle.discard(conn)
        if conn.sock is None:
            return None
        if _readable(conn.sock):  # while idle: the server closed it (or sent junk)
            conn.close()
            return None
        return conn

    def _put_idle(self, conn: http.client.HTTPConnection) -> None:
        slot = self._slot()
        if slot.conn is not None:
            slot.conn.close()
        slot.conn = conn
        self._idle.add(conn)

    def close(self) -> None:
        """Closes this thread's idle connection."""
        slot = self._slot()
        conn, slot.conn = slot.conn, None
        if conn is not None:
            self._idle.discard(conn)
            conn.close()

    def close_all(self) -> None:
        """Closes the idle connections of every thread (call it when no request runs)."""
        for conn in list(self._idle):
            conn.close()

    def __del__(self) -> None:
        try:
            self.close_all()
        except Exception:
            pass

    # Requests.

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        p = self.prefix + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                p += "?" + urllib.parse.urlencode(q)
        return p

    def headers(self, content_type: Optional[str], extra: Optional[Mapping[str, Optional[str]]] = None) -> Dict[str, str]:
        """The headers of a request: the client's, then extra's (a None value sends none)."""
        h = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if content_type:
            h["Content-Type"] = content_type
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        for k, v in (extra or {}).items():
            if v is not None:
                h[k] = v
        return h

    def call(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        idempotent: bool = False,
        register: Optional[Callable[[Optional[socket.socket]], None]] = None,
        headers: Optional[Mapping[str, Optional[str]]] = None,
    ) -> Any:
        """Sends a request with body (None, or a value sent as JSON) and returns the JSON
        answer. No socket operation waits longer than timeout (defaults to the client's).
        register, if given, is called with the socket while the request is in flight, and
        with None after, so that another thread can cut a long poll short. headers are
        sent besides the client's own (a None value sends none)."""
        t = self.timeout if timeout is None else timeout
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        target = self.url(path, query)
        hdrs = self.headers("application/json" if data is not None else None, headers)
        for attempt in range(2):
            conn = self._take_idle() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = self._new_conn(self.timeout)  # the connect waits no longer than a call
            try:
                if conn.sock is None:
                    conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(t)
                if register is not None:
                    register(conn.sock)
                conn.request(method, target, body=data, headers=hdrs)
                resp = conn.getresponse()
                raw = self._read_answer(resp, method, path)
            except _RETRYABLE_ON_REUSE as e:
                conn.close()
                if reused and idempotent:
                    continue  # the server closed the idle connection as we sent on it
                raise TransportError(f"opsq: {method} {self.base_url}{target}: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise TransportError(f"opsq: {method} {self.base_url}{target}: {e or type(e).__name__}") from e
            except BaseException:
                conn.close()
                raise
            finally:
                if register is not None:
                    register(None)
            if resp.will_close:
                conn.close()
            else:
                self._put_idle(conn)
            if not 200 <= resp.status <= 299:
                raise error_from(resp.status, raw, resp.getheader("Retry-After"))
            if not raw and resp.status == 204:
                return None  # No Content: a delete
            try:
                return json.loads(raw)
            except ValueError as e:
                raise ProtocolError(f"opsq: {method} {path}: the answer is not JSON: {raw[:200]!r}") from e
        raise AssertionError("unreachable")

    def _read_answer(self, resp: http.client.HTTPResponse, method: str, path: str) -> bytes:
        limit = self.max_response_bytes if 200 <= resp.status <= 299 else ERROR_BODY_MAX
        raw = resp.read(limit + 1)
        if len(raw) > limit:
            if 200 <= resp.status <= 299:
                raise ResponseTooLarge(f"opsq: {method} {path}: the answer is over {limit} bytes")
            raw = raw[:limit]
            resp.close()
        return raw

    def stream(self, path: str, query: Mapping[str, Any], timeout: float, max_line: int) -> Iterator[bytes]:
        """GETs an NDJSON answer and yields its lines (without the newline) as they come.
        Each read waits at most timeout; a line over max_line bytes is an error. The
        connection is its own, closed when the generator ends or is closed."""
        target = self.url(path, query)
        conn = self._new_conn(self.timeout)
        try:
            try:
                conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(timeout)
                conn.request("GET", target, headers=self.headers(None))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"opsq: GET {self.base_url}{target}: {e or type(e).__name__}") from e
            if not 200 <= resp.status <= 299:
                raw = resp.read(ERROR_BODY_MAX)
                raise error_from(resp.status, raw, resp.getheader("Retry-After"))
            while True:
                try:
                    line = resp.readline(max_line + 2)
                except (OSError, http.client.HTTPException) as e:
                    raise TransportError(f"opsq: reading GET {self.base_url}{target}: {e or type(e).__name__}") from e
                if not line:
                    return
                if not line.endswith(b"\n"):
                    if len(line) > max_line:
                        raise ResponseTooLarge(f"opsq: GET {path}: a line is over {max_line} bytes")
                    raise TransportError(f"opsq: GET {self.base_url}{target}: the stream ended in the middle of a line")
                line = line.rstrip(b"\r\n")
                if line:
                    yield line
        finally:
            conn.close()

    def upload(
        self,
        path: str,
        content_type: str,
        pieces: Iterable[Tuple[bytes, int]],
        timeout: float,
        headers: Optional[Mapping[str, Optional[str]]] = None,
    ) -> Any:
        """POSTs a body sent with chunked transfer encoding, from pieces (bytes, and a count
        the caller keeps) of any number, and returns the JSON answer. Its connection is its
        own. If the server answers early (an error) the upload stops and its error is
        raised."""
        target = self.url(path)
        conn = self._new_conn(self.timeout)
        try:
            try:
                conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(timeout)
                conn.putrequest("POST", target, skip_accept_encoding=True)
                for k, v in self.headers(content_type, headers).items():
                    conn.putheader(k, v)
                conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"opsq: POST {self.base_url}{target}: {e or type(e).__name__}") from e
            answered_early = False
            try:
                for data, _ in pieces:
                    if data:
                        conn.send(b"%x\r\n" % len(data) + data + b"\r\n")
                    if _readable(conn.sock):
                        # The server answered before the end of the body: an error (a bad
                        # chunk, a wrong key). Stop sending the rest of a long iterable.
                        answered_early = True
                        break
                else:
                    conn.send(b"0\r\n\r\n")
            except OSError as e:
                # The server may have answered (an error) and closed: read its answer.
                try:
                    resp = conn.getresponse()
                    raw = resp.read(ERROR_BODY_MAX)
                except (OSError, http.client.HTTPException):
                    raise TransportError(f"opsq: POST {self.base_url}{target}: {e}") from e
                if not 200 <= resp.status <= 299:
                    raise error_from(resp.status, raw, resp.getheader("Retry-After")) from None
                raise TransportError(f"opsq: POST {self.base_url}{target}: {e}") from e
            try:
                resp = conn.getresponse()
                raw = self._read_answer(resp, "POST", path)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"opsq: POST {self.base_url}{target}: {e or type(e).__name__}") from e
            if not 200 <= resp.status <= 299:
                raise error_from(resp.status, raw, resp.getheader("Retry-After"))
            if answered_early:
                raise ProtocolError(f"opsq: POST {path}: the server answered {resp.status} before the end of the body")
            if not raw and resp.status == 204:
                return None  # No Content: a delete
            try:
                return json.loads(raw)
            except ValueError as e:
                raise ProtocolError(f"opsq: POST {path}: the answer is not JSON: {raw[:200]!r}") from e
        finally:
            conn.close()


def _readable(sock: Optional[socket.socket]) -> bool:
    """Whether sock has something to read (or was closed) right now."""
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def error_from(status: int, raw: bytes, retry_after_header: Optional[str]) -> APIError:
    """Builds the APIError of an answer other than 2xx from its body."""
    retry_after: Optional[float] = None
    if retry_after_header:
        try:
            retry_after = float(retry_after_header)
        except ValueError:
            pass
    try:
        body = json.loads(raw)
        err = body["error"]
        if isinstance(err, dict) and isinstance(err.get("code"), str) and err["code"]:
            return api_error(status, err["code"], str(err.get("message", "")), retry_after)
    except (ValueError, KeyError, TypeError):
        pass
    msg = raw.decode("utf-8", "replace").strip()
    if len(msg) > 1024:
        msg = msg[:1024] + "…"
    return api_error(status, f"http_{status}", msg or http.client.responses.get(status, ""), retry_after)
