"""The stand-in on the wire: HTTP/1.1 framing, TLS details and connection life as Go serves them.

Raw TLS sockets (blocking, in a worker thread while the fleet runs on the test's loop), so
that every byte, every close and every session ticket the server sends can be seen.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload import apiserver, ports

pytestmark = pytest.mark.live

GET = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
GET_CLOSE = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
VERSION_505 = "505 HTTP Version Not Supported: unsupported protocol version"
BIG = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (1 << 20) + b"\r\n\r\n"
DATE = rb"Date: [A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT\r\n"


def _connect(port: int, ctx: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    # Ragged EOFs raise: a close without close_notify is told apart from one with it.
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False)


def _read_all(sock: ssl.SSLSocket) -> tuple[bytes, str]:
    """Everything until the server closes, and how: ``close_notify``, ``eof`` or ``timeout``."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ssl.SSLEOFError:
        return out, "eof"
    except TimeoutError:
        return out, "timeout"
    return out, "close_notify"


def _exchange(port: int, ctx: ssl.SSLContext, data: bytes, wait: float = 5) -> tuple[bytes, str]:
    with _connect(port, ctx) as sock:
        sock.settimeout(wait)
        sock.sendall(data)
        return _read_all(sock)


def _answer(sock: ssl.SSLSocket) -> bytes:
    """One answer with a ``Content-Length``, read off a kept-alive connection."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    assert len(body) == length
    return head + b"\r\n\r\n" + body


async def test_a_kept_alive_answer_is_kube_apiserver_shaped(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c")

    def two_on_one_connection() -> list[bytes]:
        with _connect(cluster.port, cert_ctx) as sock:
            sock.sendall(GET)
            first = _answer(sock)
            sock.sendall(GET)
            return [first, _answer(sock)]

    for answer in await asyncio.to_thread(two_on_one_connection):
        assert re.fullmatch(
            rb"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
            rb"X-Content-Type-Options: nosniff\r\nContent-Length: 2\r\n" + DATE + rb"\r\nok",
            answer,
        ), answer  # no Server header: Go's net/http sends none
    assert fleet.requests("c") == 2


async def test_connection_close_http10_pipelining_and_bodies(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    port = (await fleet.add_cluster("c")).port
    close = b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    out, how = await asyncio.to_thread(_exchange, port, cert_ctx, close)
    assert b"\r\nConnection: close\r\n" in out and out.endswith(b"\r\n\r\nok")
    assert how == "close_notify"

    out, how = await asyncio.to_thread(_exchange, port, cert_ctx, b"GET /livez HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.0 200 OK\r\n") and b"Connection:" not in out
    assert how == "close_notify"

    # Pipelined, the second with a body to skip: answered in order on one connection.
    pipelined = (
        b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        b"HEAD /readyz?verbose HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    out, _ = await asyncio.to_thread(_exchange, port, cert_ctx, pipelined)
    statuses = re.findall(rb"HTTP/1.1 (\d{3}) ", out)
    assert statuses == [b"200", b"405", b"200"]
    assert out.endswith(b"Connection: close\r\n\r\n")  # HEAD: the length, not the body
    assert re.search(rb"Content-Length: 1634\r\n", out.rsplit(b"HTTP/1.1", 1)[1])


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"BLAH\r\n\r\n", "400 Bad Request"),
        (b"GET /readyz HTTP/1.1\r\n\r\n", "400 Bad Request: missing required Host header"),
        (b"GET /readyz HTTP/2.0\r\nHost: x\r\n\r\n", VERSION_505),
        (BIG, "431 Request Header Fields Too Large"),
    ],
)
async def test_unreadable_requests_get_go_net_http_answers(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext, request_bytes: bytes, status: str
) -> None:
    port = (await fleet.add_cluster("c")).port
    out, how = await asyncio.to_thread(_exchange, port, cert_ctx, request_bytes)
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close"
    assert out == f"{head}\r\n\r\n{status}".encode()
    assert how == "close_notify"
    assert fleet.requests("c") == 0  # refused before any handler, as in Go


async def test_one_session_ticket_per_full_handshake_as_go_sends(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """Go's crypto/tls sends one NewSessionTicket after a TLS 1.3 handshake (OpenSSL: two)."""
    port = (await fleet.add_cluster("c")).port
    received: list[object] = []

    def record(_conn: object, direction: str, *args: object) -> None:
        if direction == "read":
            received.append(args[2])  # version, content type, message type, data

    cert_ctx._msg_callback = record  # type: ignore[attr-defined]  # CPython's TLS message hook
    out, _ = await asyncio.to_thread(_exchange, port, cert_ctx, GET_CLOSE)
    assert out.startswith(b"HTTP/1.1 200 OK")
    assert ssl._TLSMessageType.FINISHED in received  # type: ignore[attr-defined]
    assert received.count(ssl._TLSMessageType.NEWSESSION_TICKET) == 1  # type: ignore[attr-defined]


async def test_idle_and_silent_connections_are_closed_like_kube_apiserver(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IdleTimeout after an answer, ReadHeaderTimeout before a request (90 s and 32 s)."""
    monkeypatch.setattr(apiserver, "IDLE_TIMEOUT", 1.0)
    monkeypatch.setattr(apiserver, "HEADER_TIMEOUT", 1.5)
    port = (await fleet.add_cluster("c")).port

    def idle_then_closed() -> tuple[float, str]:
        with _connect(port, cert_ctx) as sock:
            sock.sendall(GET)
            _answer(sock)
            t0 = time.monotonic()
            out, how = _read_all(sock)
            assert out == b""
            return time.monotonic() - t0, how

    def silent_then_closed() -> tuple[float, str]:
        with _connect(port, cert_ctx) as sock:
            t0 = time.monotonic()
            sock.do_handshake()
            _, how = _read_all(sock)
            return time.monotonic() - t0, how

    waited, how = await asyncio.to_thread(idle_then_closed)
    assert 0.9 <= waited < 3.5 and how == "close_notify"
    waited, how = await asyncio.to_thread(silent_then_closed)
    assert 1.4 <= waited < 4.0 and how == "close_notify"
    await _until(lambda: fleet.connections == 0)


async def test_down_drops_connections_a_restart_closes_them(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """A dead process sends no close_notify; a restarted one (wrong_ca, a cut) does."""
    cluster = await fleet.add_cluster("c")

    def kept_then(change: Callable[[], None]) -> str:
        with _connect(cluster.port, cert_ctx) as sock:
            sock.sendall(GET)
            _answer(sock)
            change()
            return _read_all(sock)[1]

    loop = asyncio.get_running_loop()

    def on_loop(coro_fn: Callable[[], object]) -> Callable[[], None]:
        return lambda: asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(5)  # type: ignore[arg-type]

    assert await asyncio.to_thread(kept_then, on_loop(lambda: fleet.set_mode("c", "down"))) == "eof"
    await fleet.set_mode("c", "ok")
    how = await asyncio.to_thread(kept_then, on_loop(lambda: fleet.set_mode("c", "wrong_ca")))
    assert how == "close_notify"
    await fleet.set_mode("c", "ok")
    cut = on_loop(lambda: fleet.set_blocked_clients("c", ["someone"]))
    assert await asyncio.to_thread(kept_then, cut) == "close_notify"


async def test_back_on_its_port_after_down_with_clients_that_never_read(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """Round 1's EADDRINUSE: kept-alive connections whose clients never read again."""
    cluster = await fleet.add_cluster("c")
    port = cluster.port
    stuck = []
    for _ in range(5):
        sock = await asyncio.to_thread(_connect, port, cert_ctx)
        sock.sendall(GET * 50)  # answers the client will never read
        stuck.append(sock)
        await fleet.set_mode("c", "down")
        with pytest.raises(OSError):
            ports.claim(port).close()  # held for the comeback, by no one else
        await fleet.set_mode("c", "ok")
        assert cluster.port == port
        out, _ = await asyncio.to_thread(_exchange, port, cert_ctx, GET_CLOSE)
        assert out.startswith(b"HTTP/1.1 200 OK")
    for sock in stuck:
        sock.close()


async def _until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


class Kept:
    """One kept-alive TLS connection: each request sent on it, its answer read in a thread."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock

    async def ask(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        return await asyncio.to_thread(_answer, self.sock)


@asynccontextmanager
async def _kept(port: int, ctx: ssl.SSLContext) -> AsyncIterator[Kept]:
    sock = await asyncio.to_thread(_connect, port, ctx)
    try:
        yield Kept(sock)
    finally:
        sock.close()


async def test_a_repeated_request_follows_every_change_of_its_cluster(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """A kept-alive client repeating itself sees modes and topology change at once."""
    cluster = await fleet.add_cluster("c")
    pods = b"GET /api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd HTTP/1.1\r\n"
    pods += b"Host: x\r\n\r\n"
    async with _kept(cluster.port, cert_ctx) as conn:
        ask = conn.ask
        first, again = await ask(pods), await ask(pods)
        assert first.split(b"\r\n\r\n")[1] == again.split(b"\r\n\r\n")[1]
        assert first.count(b'"ready": true') == 3
        plane = cluster.control_plane.with_etcd_ready("cp-2", False)
        await fleet.set_control_plane("c", plane)
        assert (await ask(pods)).count(b'"ready": true') == 2
        await fleet.set_mode("c", "error")
        assert (await ask(pods)).startswith(b"HTTP/1.1 500 Internal Server Error")
        await fleet.set_mode("c", "not_ready")
        assert (await ask(GET)).startswith(b"HTTP/1.1 500 ")
        await fleet.set_mode("c", "ok")
        assert (await ask(GET)).endswith(b"\r\n\r\nok")
        assert fleet.requests("c") == 6


async def test_a_client_that_stops_reading_is_waited_for_not_spun_on(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """Answers pile up until the socket is full; the server waits, then sends the rest."""
    cluster = await fleet.add_cluster("c")
    pods = b"GET /api/v1/namespaces/kube-system/pods HTTP/1.1\r\nHost: x\r\n\r\n"
    # 1,000 requests (62 KB, read a TLS record at a time) for 22 MB of answers: far
    # more than the socket buffers hold, with requests left unread when they are full.
    count = 1000
    async with _kept(cluster.port, cert_ctx) as conn:
        sock = conn.sock
        sender = asyncio.create_task(asyncio.to_thread(sock.sendall, pods * count))
        await _until(lambda: fleet.requests("c") > 10)
        cpu0 = time.process_time()
        await asyncio.sleep(1.0)  # measuring a window, not waiting for a condition
        assert time.process_time() - cpu0 < 0.4  # an idle server, not a busy loop
        await sender  # the requests fit the socket buffers; one thread on the socket now

        def read_all_answers() -> int:
            return sum(_answer(sock).startswith(b"HTTP/1.1 200 OK") for _ in range(count))

        assert await asyncio.to_thread(read_all_answers) == count


async def test_a_repeated_request_with_a_rotated_token_is_refused(
    fleet: StandinFleet, ca_ctx: ssl.SSLContext
) -> None:
    """The token is part of what a repeated request's answer depends on."""
    cluster = await fleet.add_cluster("c")
    request = GET.replace(
        b"\r\n\r\n", f"\r\nAuthorization: Bearer {cluster.token}\r\n\r\n".encode()
    )
    async with _kept(cluster.port, ca_ctx) as conn:
        assert (await conn.ask(request)).endswith(b"\r\n\r\nok")
        assert (await conn.ask(request)).endswith(b"\r\n\r\nok")
        cluster.token = "rotated-token-0123456789"  # revoked, as the exporter's tests do
        assert (await conn.ask(request)).startswith(b"HTTP/1.1 401 Unauthorized")
