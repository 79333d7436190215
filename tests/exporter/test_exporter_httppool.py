"""The probes' connection pool against scripted local servers: framing, keep-alive, bounds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from exporter.net.http1 import Failure, HttpError
from exporter.net.pool import HttpPool

Script = Callable[[int], bytes]  # request number on the connection -> raw answer
Starter = Callable[..., Awaitable[str]]  # (script, close_after=False) -> base URL


@pytest.fixture
async def serve() -> AsyncIterator[Starter]:
    """Start plain-HTTP servers on 127.0.0.1 that answer each request with a script."""
    servers: list[asyncio.Server] = []

    async def start(script: Script, *, close_after: bool = False) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            n = 0
            try:
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    writer.write(script(n))
                    await writer.drain()
                    n += 1
                    if close_after:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def _get(pool: HttpPool, url: str, max_bytes: int = 1 << 20) -> tuple[int, bytes]:
    async with asyncio.timeout(5):
        return await pool.get(
            url, "/readyz?verbose", headers={}, context=None, server_hostname=None,
            max_bytes=max_bytes,
        )  # fmt: skip


def _answer(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n".encode()
    return head + extra + b"\r\n" + body


async def test_content_length_answers_reuse_one_connection(serve: Starter) -> None:
    url = await serve(lambda n: _answer(b"ok %d" % n))
    pool = HttpPool()
    try:
        assert await _get(pool, url) == (200, b"ok 0")
        assert await _get(pool, url) == (200, b"ok 1")
        assert (pool.opened, pool.idle) == (1, 1)
        assert await pool.prune_idle(3600) == 0
        assert (await pool.prune_idle(-1), pool.idle) == (1, 0)  # idle "too long": closed
    finally:
        pool.close()


async def test_chunked_body_with_trailer_and_informational_answer(serve: Starter) -> None:
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\n[-]e\r\n6\r\ntcd ok\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    url = await serve(lambda n: chunked if n == 0 else _answer(b"next"))
    pool = HttpPool()
    try:
        assert await _get(pool, url) == (500, b"[-]etcd ok")
        assert await _get(pool, url) == (200, b"next")  # framing kept the connection usable
        assert pool.opened == 1
    finally:
        pool.close()


async def test_body_to_the_end_of_the_connection_and_max_bytes(serve: Starter) -> None:
    url = await serve(lambda n: b"HTTP/1.0 200 OK\r\n\r\nuntil eof", close_after=True)
    pool = HttpPool()
    try:
        assert await _get(pool, url) == (200, b"until eof")
        assert pool.idle == 0  # no framing: the connection cannot be reused
        big = await serve(lambda n: _answer(b"x" * 10_000))
        status, body = await _get(pool, big, max_bytes=100)
        assert (status, body) == (200, b"x" * 100)
    finally:
        pool.close()


async def test_garbage_and_early_close_are_failures(serve: Starter) -> None:
    pool = HttpPool()
    try:
        garbage = await serve(lambda n: b"SSH-2.0-OpenSSH\r\n\r\n")
        with pytest.raises(HttpError) as err:
            await _get(pool, garbage)
        assert err.value.failure is Failure.PROTOCOL
        silent = await serve(lambda n: b"", close_after=True)
        with pytest.raises(HttpError) as err:
            await _get(pool, silent)
        assert err.value.failure is Failure.CONNECT
        with pytest.raises(HttpError) as err:
            await _get(pool, "ftp://127.0.0.1:1")
        assert err.value.failure is Failure.URL
    finally:
        pool.close()


async def test_max_idle_keeps_the_same_connections_cycle_after_cycle(serve: Starter) -> None:
    urls = [await serve(lambda n: _answer(b"ok")) for _ in range(4)]
    pool = HttpPool(max_idle=2)
    try:
        for _ in range(3):
            await asyncio.gather(*(_get(pool, url) for url in urls))
        assert pool.idle == 2
        # two kept connections reused on every round, two new ones per round for the rest
        assert pool.opened == 2 + 2 * 3
    finally:
        pool.close()
