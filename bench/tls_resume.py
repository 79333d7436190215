"""TLS session resumption over memory BIOs: does it work, what it costs, what it saves.

The exporter keeps one TLS connection per cluster alive between cycles (about 56 KiB of
OpenSSL state each, bench/RESULTS.md). The alternative weighed here: close it after each
cycle and keep only the TLS session (a ticket), so the next cycle's handshake is a resumed
one. This measures, against the stand-in fleet (Python ``ssl`` serving, as a Go API
server issues TLS 1.3 tickets too), on the exporter's own TLS path (``SSLObject`` over two
``MemoryBIO``, ``SSLContext.wrap_bio(..., session=)``):

- CPU per connection on the client side: full handshake vs resumed, each followed by one
  ``GET /readyz`` (the ticket arrives after the handshake, with the first answer);
- whether ``session_reused`` is true;
- memory: N open connections vs N kept ``SSLSession`` objects (RSS deltas; only the first
  run of a process gives them: later runs reuse memory the first one freed).

Run: ``.venv/bin/python -m bench.tls_resume --clusters 1000``
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine_load, memory_kib, write_result
from bench.fleet_server import FleetInfo, start_fleet


class Conn:
    """A blocking socket with TLS on memory BIOs, as ``exporter.net.connection`` does it."""

    def __init__(self, ctx: ssl.SSLContext, port: int, session: ssl.SSLSession | None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out, server_hostname="localhost", session=session)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._pump()
        self._flush()

    def _flush(self) -> None:
        if self.out.pending:
            self.sock.sendall(self.out.read())

    def _pump(self) -> None:
        self._flush()
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.inc.write(data)

    def get(self, path: str) -> bytes:
        self.tls.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        self._flush()
        body = b""
        while b"\r\n\r\n" not in body or not body.endswith(b"ok"):
            try:
                body += self.tls.read(65536)
            except ssl.SSLWantReadError:
                self._pump()
        return body

    def close(self) -> None:
        self.sock.close()


def context(info: FleetInfo) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(info.ca))
    ctx.load_cert_chain(str(info.client_cert), str(info.client_key))
    return ctx


def rss_kib() -> int:
    return memory_kib(os.getpid())["VmRSS"]


def measure(info: FleetInfo, ports: list[int]) -> dict[str, Any]:
    """Phases in the order that keeps each RSS delta clean (freed memory is not returned)."""
    ctx = context(info)
    n = len(ports)
    # 1. Full handshake + GET, closed at once, only the session kept: CPU, sessions' RSS.
    gc.collect()
    rss0 = rss_kib()
    cpu0 = time.process_time()
    sessions = []
    for port in ports:
        c = Conn(ctx, port, None)
        c.get("/readyz")
        sessions.append(c.tls.session)
        c.close()
    full_cpu = time.process_time() - cpu0
    gc.collect()
    rss_sessions = rss_kib() - rss0
    # 2. Resumed handshake + GET, closed at once: CPU, and whether OpenSSL resumed.
    cpu0 = time.process_time()
    reused = 0
    for port, sess in zip(ports, sessions, strict=True):
        c = Conn(ctx, port, sess)
        c.get("/readyz")
        reused += c.tls.session_reused
        c.close()
    resumed_cpu = time.process_time() - cpu0
    # 3. Connections kept open (full handshakes): their RSS, then a kept-alive GET's CPU.
    gc.collect()
    rss1 = rss_kib()
    conns = []
    for port in ports:
        c = Conn(ctx, port, None)
        c.get("/readyz")
        conns.append(c)
    gc.collect()
    rss_conns = rss_kib() - rss1
    cpu0 = time.process_time()
    for c in conns:
        c.get("/readyz")
    keepalive_cpu = time.process_time() - cpu0
    for c in conns:
        c.close()
    return {
        "connections": n,
        "full_ms": round(full_cpu / n * 1000, 3),
        "resumed_ms": round(resumed_cpu / n * 1000, 3),
        "keepalive_get_ms": round(keepalive_cpu / n * 1000, 3),
        "reused": reused,
        "kib_per_open_connection": round(rss_conns / n, 1),
        "kib_per_kept_session": round(rss_sessions / n, 1),
        "openssl": ssl.OPENSSL_VERSION,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmp:
        fleet = start_fleet(Path(tmp) / "fleet", args.clusters)
        try:
            info = fleet.shards[0]
            ports = [p for s in fleet.shards for p in s.ports()]
            for _ in range(args.runs):
                with machine_load() as load:
                    result = measure(info, ports)
                result["load"] = load
                runs.append(result)
        finally:
            fleet.stop()
    out = {"runs": runs}
    write_result("tls_resume", out, args.out)
    return out


if __name__ == "__main__":
    main()
