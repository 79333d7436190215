"""The probes' TLS connections and the pool's deadlines, against real local servers.

TLS servers are asyncio's, with the stand-in's certificates (an OpenSSL server sends its
TLS 1.3 session tickets after the handshake, so every test here reads post-handshake
messages on an idle connection too). What is checked: answers of every size across TLS
records, a request too big for the socket written in many pieces, the end of a body at
``close_notify`` and at a TCP close without it, a kept connection the server closed,
a proxy's answer head read without one byte of the tunnel, names resolved, every socket
closed; and the ``deadline`` of :meth:`HttpPool.get` at each stage a request can hang in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from exporter.net.connection import Connection
from exporter.net.http1 import Failure, HttpError
from exporter.net.pool import HttpPool, Progress
from exporter.net.proxy import Proxy
from exporter.net.turns import TurnBudget
from fleetwatch.standin.workload.certs import FleetCerts

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> FleetCerts:
    return FleetCerts.create(tmp_path_factory.mktemp("certs"))


class Servers:
    """Local servers on 127.0.0.1 whose handler tasks are cancelled and awaited at the end.

    ``context``: the one client context of the test (a new context is a new pool key).
    """

    def __init__(self, certs: FleetCerts) -> None:
        self.certs = certs
        self.context = certs.client_context()
        self.servers: list[asyncio.Server] = []
        self.handlers: set[asyncio.Task[None]] = set()
        self.sockets: list[socket.socket] = []

    async def start(self, handler: Handler, *, tls: bool = True) -> int:
        async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.handlers.add(task)  # type: ignore[arg-type]
            try:
                await handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
                pass
            except asyncio.CancelledError:
                pass  # the test is over (asyncio 3.11 logs a handler task that ends cancelled)
            finally:
                writer.close()

        server = await asyncio.start_server(
            run,
            "127.0.0.1",
            0,
            ssl=self.certs.server_context() if tls else None,
            limit=32 * 1024 * 1024,
        )
        self.servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    def silent(self) -> int:
        """A port whose kernel accepts connections that nobody ever reads or answers."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.sockets.append(sock)
        port: int = sock.getsockname()[1]
        return port

    async def close(self) -> None:
        for server in self.servers:
            server.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        for server in self.servers:
            await server.wait_closed()
        for sock in self.sockets:
            sock.close()


@pytest.fixture
async def servers(certs: FleetCerts) -> AsyncIterator[Servers]:
    started = Servers(certs)
    yield started
    await started.close()


@pytest.fixture
async def pool(servers: Servers) -> AsyncIterator[HttpPool]:
    """The test's pool, closed at the end before its servers (it asks for them first)."""
    made = HttpPool()
    yield made
    made.close()


def answer(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def chunked(body: bytes, size: int) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + wire + b"0\r\n\r\n"


async def always_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers ``ok`` to every request on the connection."""
    while True:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(b"ok"))
        await writer.drain()


def closing_kept(close_first: asyncio.Event) -> Handler:
    """Answers ``ok N`` to the first request of the N-th connection. The first connection
    is then closed, idle, once ``close_first`` is set; every later one takes one more
    request and closes without answering it (closed under a request)."""
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await reader.readuntil(b"\r\n\r\n")
        served += 1
        writer.write(answer(b"ok %d" % served))
        await writer.drain()
        if served == 1:
            await close_first.wait()  # then the handler closes it, idle
            return
        with contextlib.suppress(asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")  # the next request: dropped unanswered

    return handle


async def get(
    pool: HttpPool,
    url: str,
    servers: Servers | None,
    *,
    path: str = "/readyz?verbose",
    headers: dict[str, str] | None = None,
    **kwargs: object,
) -> tuple[int, bytes]:
    context = servers.context if servers is not None and url.startswith("https") else None
    async with asyncio.timeout(10):  # the test's own bound, far beyond any deadline here
        return await pool.get(
            url, path, headers=headers or {}, context=context, server_hostname=None,
            max_bytes=1 << 24, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip


async def until(condition: Callable[[], bool], what: str, within: float = 5.0) -> None:
    """Poll ``condition`` with a deadline (the servers share this event loop)."""
    deadline = time.monotonic() + within
    while True:
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within:g}s")
        await asyncio.sleep(0.005)  # poll interval, not a synchronisation


def descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# -- TLS on the socket ---------------------------------------------------------------------

SIZES = [0, 1, 16383, 16384, 16385, 300_000]


async def test_answers_of_every_size_over_one_tls_connection(
    servers: Servers, pool: HttpPool
) -> None:
    bodies = [os.urandom(n) for n in SIZES]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i, body in enumerate([*bodies, *bodies]):
            await reader.readuntil(b"\r\n\r\n")
            last = i % len(bodies) == len(bodies) - 1
            writer.write(chunked(body, 7000) if last else answer(body))
            await writer.drain()
        await reader.read()  # until the client closes

    port = await servers.start(handle)
    for _ in range(2):
        for body in bodies:
            assert await get(pool, f"https://127.0.0.1:{port}", servers) == (200, body)
    assert (pool.opened, pool.idle, pool.held) == (1, 1, 1)


async def test_a_request_bigger_than_the_socket_takes_is_written_in_pieces(
    servers: Servers, pool: HttpPool
) -> None:
    """Many MiB of headers: TLS writes meet SSLWantWriteError and go on when writable."""
    value = "x" * (12 * 1024 * 1024)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(answer(b"%d" % len(head)))
            await writer.drain()

    port = await servers.start(handle)
    url = f"https://127.0.0.1:{port}"
    status, body = await get(pool, url, servers, headers={"X-Big": value})
    assert status == 200 and int(body) > len(value)
    assert (await get(pool, url, servers))[0] == 200  # the same connection after it
    assert pool.opened == 1


@pytest.mark.parametrize("ending", ["close_notify", "tcp_close"])
async def test_a_body_to_the_end_ends_at_close_notify_or_a_plain_tcp_close(
    servers: Servers, pool: HttpPool, ending: str
) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()
        if ending == "tcp_close":
            writer.transport.abort()  # no close_notify: a TCP close only
        # else the handler's writer.close() sends close_notify

    port = await servers.start(handle)
    assert await get(pool, f"https://127.0.0.1:{port}", servers) == (200, b"until the end")
    assert (pool.idle, pool.held) == (0, 0)


async def test_a_kept_tls_connection_the_server_closed_is_noticed_and_retried_once(
    servers: Servers, pool: HttpPool
) -> None:
    close_idle = asyncio.Event()
    port = await servers.start(closing_kept(close_idle))
    url = f"https://127.0.0.1:{port}"
    assert await get(pool, url, servers) == (200, b"ok 1")
    close_idle.set()
    await until(lambda: pool.held == 0, "the idle close seen (the reader stays registered)")
    assert await get(pool, url, servers) == (200, b"ok 2")  # a new connection, no retry
    assert await get(pool, url, servers) == (200, b"ok 3")  # 2nd one dropped: retried once
    assert pool.opened == 3


async def test_a_name_is_resolved_and_every_socket_is_closed(
    servers: Servers, pool: HttpPool
) -> None:
    ports = [await servers.start(always_ok) for _ in range(3)]
    plain = await servers.start(always_ok, tls=False)
    before = descriptors()
    urls = [f"https://localhost:{p}" for p in ports] + [f"http://localhost:{plain}"]
    for url in urls:  # localhost may be ::1 first: refused there, then 127.0.0.1
        assert await get(pool, url, servers) == (200, b"ok")
    assert pool.held == 4 and len(descriptors() - before) == 8  # both ends are ours
    pool.close()
    assert pool.held == 0
    # The servers' ends close when they see ours close: then nothing is left open.
    await until(lambda: descriptors() <= before, "every descriptor closed")


async def test_a_certificate_for_another_name_is_a_tls_failure(
    servers: Servers, pool: HttpPool
) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    port = await servers.start(handle)
    with pytest.raises(HttpError) as caught:
        await pool.get(
            f"https://127.0.0.1:{port}", "/", headers={}, context=servers.context,
            server_hostname="api.elsewhere.example", max_bytes=100,
        )  # fmt: skip
    assert caught.value.failure is Failure.TLS
    assert caught.value.detail.startswith("certificate not accepted: ")
    assert pool.held == 0


async def test_freeing_the_handshakes_buffer_puts_nothing_on_the_wire(certs: FleetCerts) -> None:
    """After the handshake and the session tickets the client writes nothing of its own.

    The server is an ``SSLObject`` the test drives by hand over a socket pair, so every
    byte the client sends is seen: the first request must come as exactly one TLS 1.3
    record (5 bytes of header, the content type and a 16-byte tag around the request),
    with no empty record before it from the empty writes that free OpenSSL's buffer.
    """
    ours, theirs = socket.socketpair()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = certs.server_context().wrap_bio(incoming, outgoing, server_side=True)
    try:
        ours.setblocking(False)
        theirs.setblocking(False)
        watch = ours.dup()  # TLS takes ``ours`` over: this one sees what it leaves unread
        conn = Connection(ours, certs.client_context(), "localhost")
        ready = conn.ready()
        assert ready is not None

        def pump() -> bool:
            """Move the client's bytes into the server and back; has the server shaken?"""
            with contextlib.suppress(BlockingIOError):
                incoming.write(theirs.recv(65536))
            try:
                server.do_handshake()
                shaken = True
            except ssl.SSLWantReadError:
                shaken = False
            if outgoing.pending:  # its flight, then its session tickets
                theirs.sendall(outgoing.read())
            return shaken and ready.done()

        await until(pump, "the handshake on both sides")
        assert server.version() == "TLSv1.3"
        await until(lambda: not _readable(watch), "the client reading its session tickets")
        with pytest.raises(BlockingIOError):
            theirs.recv(65536)  # nothing from the client since its Finished
        request = b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n"
        conn.send(request, 100)
        wire = b""
        while len(wire) < len(request) + 22:
            await until(lambda: _readable(theirs), "the request on the wire")
            wire += theirs.recv(65536)
        assert len(wire) == len(request) + 22  # one record, nothing before it
        incoming.write(wire)
        assert server.read(65536) == request
        conn.close()
        watch.close()
    finally:
        ours.close()
        theirs.close()


# -- the proxy's answer head ---------------------------------------------------------------


async def test_the_proxy_head_is_read_to_its_end_and_not_one_byte_further(
    certs: FleetCerts,
) -> None:
    """The head's end split over two reads; the bytes after it stay for TLS to read."""
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        conn = Connection(
            ours, certs.client_context(), "localhost", b"CONNECT x:1 HTTP/1.1\r\n\r\n"
        )
        tunnel = conn.ready()
        assert tunnel is not None and conn.tunnelling
        assert theirs.recv(100) == b"CONNECT x:1 HTTP/1.1\r\n\r\n"
        theirs.sendall(b"HTTP/1.1 200 Connection established\r\n\r")
        await until(lambda: not _readable(ours), "the connection taking the first bytes")
        assert not tunnel.done()
        theirs.sendall(b"\nTLS BYTES")
        async with asyncio.timeout(5):
            await tunnel
        assert not conn.tunnelling
        assert ours.recv(100) == b"TLS BYTES"  # left in the socket for the handshake
        conn.close()
        assert conn.closed
    finally:
        ours.close()
        theirs.close()


def _readable(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False


async def start_relay(servers: Servers) -> Proxy:
    """A CONNECT proxy that opens every tunnel asked for and relays its bytes both ways."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        host, _, port = head.split()[1].decode().rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return Proxy("127.0.0.1", await servers.start(handle, tls=False))


def locked_gate(lock: asyncio.Lock) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def gate() -> AsyncIterator[None]:
        async with lock:
            yield

    return gate


async def test_a_kept_tunnel_closed_while_its_request_waited_for_the_gate_is_retried(
    servers: Servers, pool: HttpPool
) -> None:
    """Behind a proxy the kept connection is taken before the gate; it may close meanwhile."""
    close_it = asyncio.Event()
    port = await servers.start(closing_kept(close_it))
    proxy = await start_relay(servers)
    url = f"https://127.0.0.1:{port}"
    busy = asyncio.Lock()
    assert await get(pool, url, servers, proxy=proxy) == (200, b"ok 1")
    async with busy:
        task = asyncio.create_task(get(pool, url, servers, proxy=proxy, gate=locked_gate(busy)))
        await until(lambda: pool.idle == 0, "the kept connection taken")
        close_it.set()
        await until(lambda: pool.held == 0, "the kept connection closed by the server")
    assert await task == (200, b"ok 2")  # sent on the closed one, then once more
    assert pool.opened == 2


async def test_a_request_cancelled_waiting_for_the_gate_closes_a_new_tunnel_keeps_a_kept_one(
    servers: Servers, pool: HttpPool
) -> None:
    """Behind a proxy the connection comes before the gate: a new tunnel is half set up
    (closed), a kept connection was not used yet (kept)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(b"ok"))
        await writer.drain()
        await _hung_answer(reader, writer)

    hung = await servers.start(_hung_answer)
    once = await servers.start(handle)
    proxy = await start_relay(servers)
    busy = asyncio.Lock()
    assert await get(pool, f"https://127.0.0.1:{once}", servers, proxy=proxy) == (200, b"ok")
    gate = locked_gate(busy)

    async def cancelled_at_the_gate(port: int, there: Callable[[], bool], what: str) -> None:
        task = asyncio.create_task(
            get(pool, f"https://127.0.0.1:{port}", servers, proxy=proxy, gate=gate)
        )
        await until(there, what)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async with busy:
        await cancelled_at_the_gate(
            hung, lambda: pool.held == 2, "a new tunnel open, its request at the gate"
        )
        assert (pool.held, pool.idle) == (1, 1)  # the new tunnel closed
        await cancelled_at_the_gate(
            once, lambda: pool.idle == 0, "the kept connection taken, at the gate"
        )
    assert (pool.opened, pool.held, pool.idle) == (2, 1, 1)  # the kept one, kept


# -- deadlines -----------------------------------------------------------------------------

#: What a loaded machine may add to a deadline before its TimeoutError is seen. The servers
#: here never answer and nothing else in the pool times out, so whatever ends the request is
#: the deadline: the lower bound says it waited for it, the upper one only that it ended.
SLACK = 5.0


async def _hung_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    await asyncio.Event().wait()  # never answers (cancelled at the end of the test)


async def _timed_out(
    pool: HttpPool, url: str, servers: Servers, seconds: float, **kwargs: object
) -> tuple[float, Progress]:
    """How long until the deadline's TimeoutError, and the progress it left."""
    loop = asyncio.get_running_loop()
    progress = Progress()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await get(pool, url, servers, deadline=started + seconds, progress=progress, **kwargs)
    return loop.time() - started, progress


@pytest.mark.parametrize("tls", [True, False])
async def test_a_deadline_ends_a_request_waiting_for_its_answer(
    servers: Servers, pool: HttpPool, tls: bool
) -> None:
    port = await servers.start(_hung_answer, tls=tls)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    elapsed, progress = await _timed_out(pool, url, servers, 0.3)
    assert 0.3 <= elapsed < 0.3 + SLACK
    assert progress.stage == "server"
    assert (pool.held, pool.idle) == (0, 0)  # the connection is discarded


async def test_a_deadline_ends_a_tls_handshake_nobody_answers(
    servers: Servers, pool: HttpPool
) -> None:
    port = servers.silent()
    elapsed, _ = await _timed_out(pool, f"https://127.0.0.1:{port}", servers, 0.3)
    assert 0.3 <= elapsed < 0.3 + SLACK and pool.held == 0
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):  # preconnect too
        await pool.preconnect(
            f"https://127.0.0.1:{port}", context=servers.context,
            server_hostname=None, deadline=loop.time() + 0.2,
        )  # fmt: skip
    assert (pool.held, pool.idle) == (0, 0)


async def test_a_deadline_behind_a_silent_proxy_says_proxy(
    servers: Servers, pool: HttpPool
) -> None:
    proxy = Proxy("127.0.0.1", servers.silent())
    elapsed, progress = await _timed_out(pool, "https://127.0.0.1:1", servers, 0.3, proxy=proxy)
    assert 0.3 <= elapsed < 0.3 + SLACK
    assert progress.stage == "proxy"  # the probe then names the proxy, not the server
    assert pool.held == 0


async def test_a_deadline_counts_the_wait_for_the_gate(servers: Servers, pool: HttpPool) -> None:
    port = await servers.start(_hung_answer)
    busy = asyncio.Lock()
    entered = 0

    @contextlib.asynccontextmanager
    async def gate() -> AsyncIterator[None]:
        nonlocal entered
        async with busy:
            entered += 1
            yield

    async with busy:  # every slot taken for longer than the deadline
        elapsed, _ = await _timed_out(pool, f"https://127.0.0.1:{port}", servers, 0.2, gate=gate)
    assert 0.2 <= elapsed < 0.2 + SLACK
    assert (entered, pool.opened) == (0, 0)
    assert not busy.locked()  # the wait for the gate was withdrawn cleanly


async def test_the_callers_own_timeout_and_cancellation_still_win(
    servers: Servers, pool: HttpPool
) -> None:
    port = await servers.start(_hung_answer)
    url = f"https://127.0.0.1:{port}"
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2) as bound:
            await get(pool, url, servers, deadline=loop.time() + 30)
    assert bound.expired()  # the caller's timeout, not the pool's deadline
    task = asyncio.create_task(get(pool, url, servers, deadline=loop.time() + 30))
    await until(lambda: pool.held == 1 and bool(servers.handlers), "the request sent")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.held == 0


async def test_requests_that_end_in_time_leave_no_deadline_behind(
    servers: Servers, pool: HttpPool
) -> None:
    port = await servers.start(always_ok, tls=False)
    hung = await servers.start(_hung_answer, tls=False)
    loop = asyncio.get_running_loop()
    stuck = asyncio.create_task(
        get(pool, f"http://127.0.0.1:{hung}", None, deadline=loop.time() + 1.0)
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(500):
        assert await get(pool, url, None, deadline=loop.time() + 30) == (200, b"ok")
    # Behind the hung request's entry, the 500 ended ones do not pile up.
    assert len(pool._deadlines._heap) < 100
    with pytest.raises(TimeoutError):
        await stuck
    assert len(pool._deadlines._heap) == 0


async def test_closing_the_pool_fails_a_request_under_way(servers: Servers, pool: HttpPool) -> None:
    port = await servers.start(_hung_answer)
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(
        get(pool, f"https://127.0.0.1:{port}", servers, deadline=loop.time() + 30)
    )
    await until(lambda: pool.held == 1 and bool(servers.handlers), "the request sent")
    pool.close()
    with pytest.raises(HttpError) as caught:
        await task  # at once, not at the deadline, and not retried
    assert caught.value.detail == "connection closed by the exporter"
    assert (pool.opened, pool.held) == (1, 0)


async def test_a_cancellation_just_before_the_deadline_stays_the_callers(
    servers: Servers, pool: HttpPool
) -> None:
    """The caller cancels, then the deadline passes, before the task runs again: the
    task must see the caller's CancelledError, not the deadline's TimeoutError."""
    port = await servers.start(_hung_answer)
    busy = asyncio.Lock()
    loop = asyncio.get_running_loop()
    async with busy:
        deadline = loop.time() + 0.2
        task = asyncio.create_task(
            get(pool, f"https://127.0.0.1:{port}", servers, gate=locked_gate(busy),
                deadline=deadline)
        )  # fmt: skip
        loop.call_at(deadline - 0.05, task.cancel)
        # Hold the loop past both, so that they run in one turn, the caller's first.
        loop.call_at(deadline - 0.06, time.sleep, 0.1)
        with pytest.raises(asyncio.CancelledError):
            await task


# -- the handshake work of one turn of the loop (exporter.net.turns) -----------------------


async def test_handshakes_past_a_turns_budget_wait_for_the_next_turns_in_order() -> None:
    ticks = iter(range(1000))
    turns = TurnBudget(budget=2.5, clock=lambda: float(next(ticks)))  # a step: 1 s
    ran: list[int] = []
    parked: list[int] = []
    for i in range(6):  # six handshakes ready in one turn
        turns.run(lambda i=i: ran.append(i), lambda i=i: parked.append(i))  # type: ignore[misc]
    assert ran == [0, 1, 2]  # 0 s, 1 s, 2 s spent before each: the budget of 2.5 s
    assert parked == [3, 4, 5] and turns.waiting == 3 and turns.deferred == 3
    await asyncio.sleep(0)  # the next turn starts with the parked ones
    assert ran == [0, 1, 2, 3, 4, 5]
    turns.run(lambda: ran.append(6), lambda: parked.append(6))  # that turn's budget is spent
    assert parked == [3, 4, 5, 6]
    await asyncio.sleep(0)
    assert ran[-1] == 6 and turns.waiting == 0
    with pytest.raises(ValueError):
        TurnBudget(budget=0)


async def test_handshakes_one_per_turn_all_complete_and_a_close_ends_parked_ones(
    servers: Servers,
) -> None:
    async def ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(b"ok"))
        await writer.drain()

    port = await servers.start(ok)
    url = f"https://127.0.0.1:{port}"
    pool = HttpPool(turn_budget=1e-9)  # one step a turn
    try:
        got = await asyncio.gather(*(get(pool, url, servers) for _ in range(20)))
        assert got == [(200, b"ok")] * 20
        assert pool.turns.deferred > 0 and pool.turns.waiting == 0
        assert pool.opened == 20
    finally:
        pool.close()

    pool = HttpPool(turn_budget=1e-9)
    calls = [asyncio.ensure_future(get(pool, url, servers)) for _ in range(20)]
    await until(lambda: pool.turns.waiting > 0, "handshakes parked")
    pool.close()  # the exporter stops: parked handshakes end with their connections
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, HttpError) for r in results), results
    await until(lambda: pool.turns.waiting == 0, "the parked steps run out")
    assert pool.held == 0
