"""HTTP/1.1 on the wire, without I/O: the request we send and a parser of the answer.

The probes' client (``exporter.net.connection``, ``exporter.net.pool``) feeds the bytes it reads
to a :class:`ResponseParser` and sends what :func:`request_bytes` builds. Keeping the
format apart from the sockets lets it be tested byte by byte, with every split of an
answer into reads (``tests/exporter/test_exporter_http1.py``, with Hypothesis).

What the parser reads: a status line ``HTTP/1.x NNN``, headers up to
:data:`MAX_HEADER_BYTES`, informational answers (1xx but 101) skipped, then a body framed
by ``Transfer-Encoding: chunked`` (trailers allowed), by ``Content-Length``, or by the end
of the connection; 204 and 304 have none. At most ``max_bytes`` of the body are kept: past
that the answer counts as complete and the connection is not reused. ``keep_alive`` says
whether the connection may carry the next request (``Connection: close``, HTTP/1.0, a
body to the end, bytes beyond the answer: it may not). Errors are :class:`HttpError`
with a :class:`Failure` kind the probe maps to its reasons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

#: Most bytes of a status line plus headers we accept.
MAX_HEADER_BYTES = 64 * 1024
USER_AGENT = "fleetwatch-exporter"


class Failure(StrEnum):
    """What went wrong with a request (the probe turns it into a reason)."""

    CONNECT = "connect"  #: refused, unreachable, reset, or closed before the answer
    TLS = "tls"  #: handshake failed or the TLS stream broke
    PROTOCOL = "protocol"  #: the answer is not HTTP/1.x as we read it
    URL = "url"  #: the endpoint is not a usable URL
    PROXY = "proxy"  #: the proxy refused, failed or answered CONNECT with another status than 2xx


class HttpError(Exception):
    """A request got no complete answer; ``detail`` is short and never a credential."""

    def __init__(self, failure: Failure, detail: str, *, answered: bool = False) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail
        #: some of the answer arrived: the server saw the request, so no retry
        self.answered = answered


def short(value: object, limit: int = 160) -> str:
    """``value`` as one line of at most ``limit`` characters (for error details)."""
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Endpoint:
    """The parts of an API server URL a request needs, split once."""

    tls: bool
    host: str  #: for connect(), brackets removed
    port: int
    host_header: str  #: as in the URL (``[::1]:6443``, ``api.example.com``)
    prefix: str  #: path prefix (``/k8s/clusters/c-1`` behind a proxy), no trailing slash

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise HttpError(Failure.URL, "the endpoint is not a valid URL") from None
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise HttpError(Failure.URL, "the endpoint is not a valid URL")
        tls = parts.scheme == "https"
        host_header = parts.netloc.rpartition("@")[2]
        return cls(
            tls=tls,
            host=parts.hostname,
            port=port or (443 if tls else 80),
            host_header=host_header,
            prefix=parts.path.rstrip("/"),
        )


def request_bytes(ep: Endpoint, path: str, headers: Mapping[str, str]) -> bytes:
    """``GET ep.prefix + path`` with our headers and ``headers``, as bytes to send.

    Built for every request (three per cluster and cycle), so written for speed: four
    ``in`` tests and one f-string.
    """
    target = ep.prefix + path
    if " " in target or "\r" in target or "\n" in target or "\t" in target:
        raise HttpError(Failure.URL, "the request path has spaces or line breaks")
    extra = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    text = (
        f"GET {target} HTTP/1.1\r\nHost: {ep.host_header}\r\nUser-Agent: {USER_AGENT}\r\n"
        f"Accept: application/json, */*\r\n{extra}\r\n"
    )
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise HttpError(Failure.PROTOCOL, "a request header is not latin-1 text") from None


class ResponseParser:
    """One answer, fed as it arrives: :meth:`feed` returns True once it is complete."""

    __slots__ = (
        "_body_start",
        "_buf",
        "_chunk_pos",
        "_chunks",
        "_length",
        "_max_bytes",
        "_status",
        "done",
        "keep_alive",
        "received",
    )

    def __init__(self, max_bytes: int) -> None:
        self._buf = bytearray()
        self._max_bytes = max_bytes
        self._status = 0
        self._body_start = -1  #: offset of the body in ``_buf``, -1 before the headers end
        self._length: int | None = None  #: Content-Length, or None
        self._chunks: bytearray | None = None  #: decoded chunked body, or None
        self._chunk_pos = 0
        self.done = False
        self.keep_alive = True
        #: some of the answer arrived (the server saw the request); not ``bool(_buf)``:
        #: an informational 1xx answer is consumed from the buffer once parsed
        self.received = False

    def feed(self, data: bytes) -> bool:
        """Add the bytes of one read; True when the answer is complete. Raises HttpError."""
        if self.done:
            self.keep_alive = False  # bytes beyond the answer: do not reuse the connection
            return True
        buf = self._buf
        buf += data
        self.received = self.received or bool(data)
        if self._body_start < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    raise self._error(Failure.PROTOCOL, "answer headers too long")
                return False
            if not self._head(end):
                return False
        self.done = self._check_body()
        return self.done

    def feed_eof(self) -> None:
        """The connection ended: complete when the body runs to the end, else HttpError."""
        self.keep_alive = False
        if self.done:
            return
        if self._body_start >= 0 and self._chunks is None and self._length is None:
            self.done = True  # the body ran to the end of the connection: complete
            return
        if self.received:
            raise self._error(Failure.CONNECT, "connection closed in the middle of the answer")
        raise HttpError(Failure.CONNECT, "server closed the connection before answering")

    def result(self) -> tuple[int, bytes]:
        """``(status, body)`` of the complete answer, the body cut at ``max_bytes``."""
        buf = self._buf
        if self._chunks is not None:
            body = bytes(self._chunks[: self._max_bytes])
        else:
            end = len(buf) if self._length is None else self._body_start + self._length
            body = bytes(buf[self._body_start : min(end, self._body_start + self._max_bytes)])
        return self._status, body

    def _error(self, failure: Failure, detail: str) -> HttpError:
        self.keep_alive = False
        return HttpError(failure, detail, answered=True)

    def _head(self, end: int) -> bool:
        """Parse the status line and headers ending at ``end``; False when not done."""
        buf = self._buf
        lines = bytes(buf[:end]).split(b"\r\n")
        status_line = lines[0].split(None, 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise self._error(Failure.PROTOCOL, "not an HTTP/1.x answer")
        try:
            status = int(status_line[1])
        except ValueError:
            raise self._error(Failure.PROTOCOL, "invalid HTTP status line") from None
        if 100 <= status < 200 and status != 101:  # informational: the real answer follows
            del buf[: end + 4]
            again = buf.find(b"\r\n\r\n")
            return again >= 0 and self._head(again)
        length: int | None = None
        chunked = False
        close = status_line[0] == b"HTTP/1.0"
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            key = name.strip().lower()
            if key == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise self._error(Failure.PROTOCOL, "invalid Content-Length") from None
            elif key == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif key == b"connection":
                token = value.strip().lower()
                close = token == b"close" or (close and token != b"keep-alive")
        self._status = status
        self._body_start = end + 4
        if close:
            self.keep_alive = False
        if status in (204, 304):
            length = 0
        if chunked:
            self._chunks = bytearray()
            self._chunk_pos = self._body_start
        elif length is not None:
            self._length = length
        else:
            self.keep_alive = False  # body runs to the end of the connection
        return True

    def _check_body(self) -> bool:
        if self._chunks is not None:
            return self._decode_chunks()
        have = len(self._buf) - self._body_start
        if self._length is not None and have >= self._length:
            if have > self._length:
                self.keep_alive = False
            return True
        if have >= self._max_bytes:
            self.keep_alive = False
            return True
        return False

    def _decode_chunks(self) -> bool:
        buf, chunks = self._buf, self._chunks
        assert chunks is not None
        pos = self._chunk_pos
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                break
            size_text = bytes(buf[pos:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                size = -1
            if size < 0:  # a negative size would walk back over the buffer
                raise self._error(Failure.PROTOCOL, "invalid chunked encoding")
            if size == 0:  # last chunk, then optional trailers, then an empty line
                bare = bytes(buf[line_end + 2 : line_end + 4]) == b"\r\n"
                if not bare and buf.find(b"\r\n\r\n", line_end) < 0:
                    break
                return True
            start = line_end + 2
            if len(buf) < start + size + 2:
                break
            chunks += buf[start : start + size]
            pos = start + size + 2
            if len(chunks) >= self._max_bytes:
                self.keep_alive = False
                return True
        self._chunk_pos = pos
        return False
