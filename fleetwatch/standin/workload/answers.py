"""What a stand-in API server answers to one HTTP/1.1 request, as the bytes on the wire.

The serving path (``fleetwatch.standin.workload.apiserver``) cuts a request head out of the TLS
stream and hands it here; :func:`parse_head` reads it and :func:`answer` decides, from the
cluster's mode, the credentials and the path, the whole answer (status line, headers,
body), or :data:`HANG` for a request never to be answered. No I/O, so every answer can be
tested without a socket, and the serving path stays a loop of reads and writes.

Answers are the kube-apiserver ones ``fleetwatch.standin.workload.responses`` describes, with the
headers Go's ``net/http`` writes (``Content-Type``, ``Content-Length``, ``Date``,
``Connection`` when not the default; no ``Server`` header: Go sends none). Malformed
requests get what Go's ``net/http`` server writes before any handler runs (``400 Bad
Request``, ``505``, ``431``: plain text, ``Connection: close``).
Bodies and heads are built once and cached; a request costs a dictionary look-up and one
join with the current ``Date``.

A little over 300 lines: the parser, every answer and the replays of answers share one
decision, what a request gets, kept in one place.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from fleetwatch.standin.workload import responses
from fleetwatch.standin.workload.cluster import Mode, StandinCluster
from fleetwatch.standin.workload.controlplane import ControlPlane, ListTemplate, list_template

#: Go's ``http.Server`` default ``MaxHeaderBytes`` (kube-apiserver sets the same, 1 MiB).
MAX_HEAD_BYTES: Final = 1 << 20

#: An HTTP token (RFC 9110): what a method may be made of.
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"
_JSON_UTF8 = b"application/json; charset=utf-8"
_NOSNIFF = b"X-Content-Type-Options: nosniff\r\n"
_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    500: b"Internal Server Error",
}


class Hang:
    """The answer of a request that is never answered (``hang``, a blocked client)."""

    __slots__ = ()


class Drop:
    """No answer and the connection closed at once: the server is gone (``down``)."""

    __slots__ = ()


HANG: Final = Hang()
DROP: Final = Drop()


@dataclass(frozen=True, slots=True)
class Head:
    """The parts of a request head the stand-in looks at."""

    method: bytes
    target: bytes
    http11: bool
    keep_alive: bool
    authorization: str
    #: Body bytes that follow the head (Content-Length); the body itself is discarded.
    body_length: int
    #: A chunked body follows: answered, then the connection is closed (not parsed).
    chunked: bool


class UnreadableRequest(Exception):
    """A request head Go's ``net/http`` refuses before any handler; ``wire`` is its answer."""

    def __init__(self, wire: bytes) -> None:
        super().__init__(wire.split(b"\r\n", 1)[0].decode("latin-1"))
        self.wire = wire


def _go_error(status: str) -> UnreadableRequest:
    """``net/http``'s answer to a request it cannot read: status, plain text, close."""
    text = status.encode()
    return UnreadableRequest(
        b"HTTP/1.1 " + text + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\n\r\n" + text
    )


TOO_LARGE: Final = _go_error("431 Request Header Fields Too Large")


def parse_head(head: bytes) -> Head:
    """Read a request head (without its final blank line), or raise :class:`UnreadableRequest`."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise _go_error("400 Bad Request")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        raise _go_error("400 Bad Request")
    if version == b"HTTP/1.1":
        http11 = True
    elif version == b"HTTP/1.0":
        http11 = False
    elif len(version) == 8 and version[:5] == b"HTTP/" and version[5:].replace(b".", b"").isdigit():
        raise _go_error("505 HTTP Version Not Supported: unsupported protocol version")
    else:
        raise _go_error("400 Bad Request")
    connection = authorization = b""
    length = b""
    chunked = host = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise _go_error("400 Bad Request")
        key = name.lower()
        if key == b"host":
            host = True
        elif key == b"authorization":
            authorization = authorization or value.strip()
        elif key == b"connection":
            connection += b"," + value.lower()
        elif key == b"content-length":
            length = value.strip()
        elif key == b"transfer-encoding":
            chunked = True
    if http11 and not host:
        raise _go_error("400 Bad Request: missing required Host header")
    if length and not length.isdigit():
        raise _go_error("400 Bad Request")
    tokens = {t.strip() for t in connection.split(b",")}
    keep_alive = b"close" not in tokens if http11 else b"keep-alive" in tokens
    return Head(
        method=method,
        target=target,
        http11=http11,
        keep_alive=keep_alive and not chunked,
        authorization=authorization.decode("latin-1"),
        body_length=int(length) if length and not chunked else 0,
        chunked=chunked,
    )


@dataclass(frozen=True, slots=True)
class PreparedAnswer:
    """A status and body with their headers, but for ``Date`` and ``Connection``."""

    status: int
    #: ``Content-Type`` ... ``Content-Length`` ... up to ``Date: `` (built once).
    head: bytes
    body: bytes
    #: A list's template and cluster: what renders the body again (``Replay``).
    template: ListTemplate | None = None
    index: int = 0


def _answer(status: int, content_type: bytes, body: bytes, extra: bytes = b"") -> PreparedAnswer:
    head = (
        b"Content-Type: " + content_type + b"\r\n" + extra
        + b"Content-Length: " + str(len(body)).encode() + b"\r\nDate: "
    )  # fmt: skip
    return PreparedAnswer(status, head, body)


_UNAUTHORIZED = _answer(401, _JSON_UTF8, responses.UNAUTHORIZED.encode())
_NOT_FOUND = _answer(404, _JSON_UTF8, responses.NOT_FOUND.encode())
_ERROR = _answer(500, _TEXT, b"Internal Server Error\n")
_NOT_ALLOWED = _answer(
    405,
    _JSON_UTF8,
    responses.status_json(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    ).encode(),
)
_VERSION = _answer(200, _JSON_UTF8, json.dumps(responses.VERSION).encode())


@functools.lru_cache(maxsize=64)
def _forbidden(path: str) -> PreparedAnswer:
    body = responses.forbidden(_STANDIN_USER, "get", path[:200]).encode()
    return _answer(403, _JSON_UTF8, body)


#: Who the stand-in says a refused client is (it does not map credentials to users).
_STANDIN_USER = "system:serviceaccount:fleetwatch:exporter"


@functools.lru_cache(maxsize=64)
def _health(endpoint: str, verbose: bool, failing: frozenset[str]) -> PreparedAnswer:
    status, body = responses.health_body(endpoint, verbose, failing)
    return _answer(status, _TEXT, body.encode(), _NOSNIFF)


@functools.lru_cache(maxsize=4096)
def _split_target(target: bytes) -> tuple[str, dict[str, str]]:
    """Decoded path and query (first value of each name) of a request target."""
    text = target.decode("latin-1")
    if not text.startswith("/"):
        text = urlsplit(text).path or "/"  # absolute form (or ``*``)
        return text, {}
    raw_path, _, query = text.partition("?")
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, value)
    return unquote(raw_path), params


def _list(kind: str, cluster: StandinCluster, selector: str) -> PreparedAnswer:
    try:
        template = list_template(kind, cluster.control_plane, selector)
    except ValueError as exc:
        return _answer(400, _JSON_UTF8, responses.status_json(400, "BadRequest", str(exc)).encode())
    answer = _answer(200, _JSON, template.render(cluster.index))
    return PreparedAnswer(answer.status, answer.head, answer.body, template, cluster.index)


def _authenticated(head: Head, token: str, has_client_cert: bool) -> bool:
    """kube-apiserver's authenticator union: a client certificate the CA signed, or a token.

    The TLS layer has already verified any certificate the client sent against the fleet
    CA, so its presence is proof enough.
    """
    if has_client_cert:
        return True
    scheme, _, given = head.authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def respond(
    cluster: StandinCluster, head: Head, has_client_cert: bool, client_name: str | None
) -> PreparedAnswer | Hang | Drop:
    """What ``cluster`` answers to ``head`` in its current mode (its request count moves)."""
    cluster.requests += 1
    mode = cluster.mode
    if mode is Mode.HANG or mode is Mode.FROZEN:  # FROZEN: a connection from before it
        return HANG
    if mode is Mode.DOWN:  # a request that raced the outage
        return DROP
    if cluster.blocked_clients and client_name in cluster.blocked_clients:
        return HANG  # cut off from this client only
    if mode is Mode.ERROR:
        return _ERROR
    if mode is Mode.UNAUTHORIZED or not _authenticated(head, cluster.token, has_client_cert):
        return _UNAUTHORIZED
    if head.method not in (b"GET", b"HEAD"):
        return _NOT_ALLOWED
    path, query = _split_target(head.target)
    if mode is Mode.FORBIDDEN:  # authenticated, and RBAC grants this user nothing
        return _forbidden(path)
    endpoint = path.strip("/")
    if endpoint in responses.CHECKS:
        failing = (
            responses.ETCD_CHECKS
            if (mode is Mode.NOT_READY and endpoint != "livez")
            else frozenset()
        )
        return _health(endpoint, "verbose" in query, failing)
    if path in ("/version", "/version/"):
        return _VERSION
    if path == "/api/v1/nodes":
        return _list("nodes", cluster, query.get("labelSelector", ""))
    if path == "/api/v1/namespaces/kube-system/pods":
        return _list("pods", cluster, query.get("labelSelector", ""))
    return _NOT_FOUND


_DAYS = (b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun")
_MONTHS = (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun",
           b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")  # fmt: skip


class _Clock:
    """The ``Date`` value (RFC 9110 IMF-fixdate), formatted once a second."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = b""

    def date(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            t = time.gmtime(now)
            self._text = b"%s, %02d %s %04d %02d:%02d:%02d GMT" % (
                _DAYS[t.tm_wday], t.tm_mday, _MONTHS[t.tm_mon - 1], t.tm_year,
                t.tm_hour, t.tm_min, t.tm_sec,
            )  # fmt: skip
            self._second = now
        return self._text


_CLOCK = _Clock()
_STATUS_LINES = {
    (http11, status): b"HTTP/1.%d %d %s\r\n" % (http11, status, reason)
    for http11 in (True, False)
    for status, reason in _REASONS.items()
}


def _tail(head: Head, keep_alive: bool) -> bytes:
    """The end of an answer's head after ``Date``: ``Connection`` when it is not the default."""
    if head.http11:
        return b"\r\n\r\n" if keep_alive else b"\r\nConnection: close\r\n\r\n"
    return b"\r\nConnection: keep-alive\r\n\r\n" if keep_alive else b"\r\n\r\n"


def wire(answer: PreparedAnswer, head: Head, keep_alive: bool) -> bytes:
    """The bytes of ``answer`` to ``head``: ``keep_alive`` false adds ``Connection: close``."""
    body = b"" if head.method == b"HEAD" else answer.body
    line = _STATUS_LINES[(head.http11, answer.status)]
    return b"".join((line, answer.head, _CLOCK.date(), _tail(head, keep_alive), body))


@dataclass(frozen=True, slots=True)
class Replay:
    """An answer a connection gives again to the same request head.

    Valid while the cluster's mode, topology, blocked clients and token are the objects
    it was made with (all immutable, replaced on change): the answer depends on nothing
    else but the connection's own certificate. A kept-alive client asks the same few things
    every cycle, so a request it repeats skips the parsing and the routing.
    """

    mode: Mode
    plane: ControlPlane
    blocked: frozenset[str]
    token: str
    #: Status line and headers up to ``Date: ``, and what follows the date.
    prefix: bytes
    tail: bytes
    #: The body, when it is the same every time; a list's is rendered again per answer.
    body: bytes
    template: ListTemplate | None
    index: int

    def wire(self) -> bytes:
        body = self.body if self.template is None else self.template.render(self.index)
        return b"".join((self.prefix, _CLOCK.date(), self.tail, body))


def replay_of(answer: PreparedAnswer, head: Head, cluster: StandinCluster) -> Replay:
    """The :class:`Replay` of ``answer`` to ``head`` (kept-alive, without a request body)."""
    is_head = head.method == b"HEAD"
    return Replay(
        mode=cluster.mode,
        plane=cluster.control_plane,
        blocked=cluster.blocked_clients,
        token=cluster.token,
        prefix=_STATUS_LINES[(head.http11, answer.status)] + answer.head,
        tail=_tail(head, keep_alive=True),
        body=b"" if is_head or answer.template is not None else answer.body,
        template=None if is_head else answer.template,
        index=answer.index,
    )
