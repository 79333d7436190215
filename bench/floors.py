"""The exporter against OpenSSL's floors, and what each way down costs: one sitting.

Issue 34 asks for the exporter's CPU per first-contact cluster within 1.5x OpenSSL's client
handshake and its memory per kept cluster within 1.5x OpenSSL's state of one connection,
or a measured table of the options. Ratios only hold within one run on this shared
machine, so this runs everything back to back and records the load beside each step:

1. **OpenSSL's floors.** ``openssl s_time`` against ``openssl s_server``
   (``bench.handshake_floor``, the stand-in's certificates and one ticket): client CPU per
   full handshake and per resumed one. Then a bare client in a process of its own
   (``--bare-worker``: Python's ``ssl.SSLSocket`` on blocking sockets, no exporter code)
   against a stand-in fleet: malloc (glibc ``mallinfo2``, where OpenSSL's state lives) and
   RSS per kept connection after ``/readyz?verbose``, after an empty write (which frees the
   write buffer the ticket's processing left, as the exporter does) and after a pod list;
   per kept TLS session instead (the connection closed); per connection with ``ssl.OP_NO_TICKET``;
   CPU of a full and of a resumed handshake with one GET each; the client context's
   session cache (``session_stats``).
2. **The exporter's cost per request** on the same fleet (``bench.connections``' worker:
   ``exporter.net.pool`` alone): a new connection, a kept-alive probe, a kept-alive pod list.
3. **The exporter as built at 10,000 TLS clusters** (``bench.probe_cycle``: a first
   cycle, two steady ones): CPU per first-contact cluster, peak RSS; probe only too (one
   request per first contact instead of three, no control-plane check).
4. **The options** at ``--option-clusters`` (2,000) in the same sitting, each a fresh
   exporter side and fleet: as built; probe only (one request per first contact instead of
   three); ``--probe.max-idle-connections 0`` (no kept connection); a client certificate
   per cluster (an ``SSLContext`` per credential, as a real fleet has); glibc's arenas
   bounded (``MALLOC_ARENA_MAX``). Then the as-built and arena rows again at 10,000
   unless ``--no-arena-10k``.

Run: ``.venv/bin/python -m bench.floors`` (``--clusters 5000`` when 10,000 does not fit);
the tables: ``bench/RESULTS.md`` round 17.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import handshake_floor, probe_cycle
from bench.common import REPO, machine_load, memory_kib, write_result
from bench.connections import POD_LIST, READYZ, _run_worker, malloc_in_use
from bench.fleet_server import FleetInfo, raise_fd_limit, start_fleet

# --- the bare client: OpenSSL's state per connection, no exporter code ---------------------


class _Bare:
    """One blocking TLS connection, as thin as Python's ``ssl`` allows."""

    def __init__(self, ctx: ssl.SSLContext, port: int, session: ssl.SSLSession | None) -> None:
        raw = socket.create_connection(("127.0.0.1", port))
        self.tls = ctx.wrap_socket(raw, server_hostname="localhost", session=session)

    def get(self, path: str) -> int:
        self.tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self._recv()
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += self._recv()
        return len(body)

    def _recv(self) -> bytes:
        data = self.tls.recv(65536)
        if not data:
            raise ConnectionError("closed")
        return data

    def close(self) -> None:
        self.tls.close()


def _memory() -> tuple[int, int]:
    gc.collect()
    return malloc_in_use(), memory_kib(os.getpid())["VmRSS"] * 1024


def _context(ca: str, cert: str, key: str, no_ticket: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # as exporter.net.credentials builds one
    ctx.load_verify_locations(cafile=ca)
    ctx.load_cert_chain(cert, key)
    if no_ticket:
        ctx.options |= ssl.OP_NO_TICKET
    return ctx


def bare_measure(ports: list[int], ca: str, cert: str, key: str) -> dict[str, Any]:
    """Phases in an order that keeps each figure clean (RSS is only clean for the first)."""
    ctx = _context(ca, cert, key)
    for port in ports[:20]:  # warm up: OpenSSL's lazy tables, code paths
        c = _Bare(ctx, port, None)
        c.get(READYZ)
        c.close()
    n = len(ports)
    out: dict[str, Any] = {"connections": n, "openssl": ssl.OPENSSL_VERSION}
    malloc0, rss0 = _memory()
    cpu = time.process_time()
    conns = []
    for port in ports:
        c = _Bare(ctx, port, None)
        c.get(READYZ)
        conns.append(c)
    out["full_handshake_get_cpu_ms"] = round((time.process_time() - cpu) / n * 1000, 4)
    malloc, rss = _memory()
    out["conn_malloc_kib"] = round((malloc - malloc0) / n / 1024, 2)
    out["conn_rss_kib"] = round((rss - rss0) / n / 1024, 2)
    out["ctx_sessions_cached"] = ctx.session_stats()["number"]
    for c in conns:  # the exporter's empty write (Connection._release_buffers), any client can
        c.tls.write(b"")
    malloc, rss = _memory()
    out["conn_malloc_kib_released"] = round((malloc - malloc0) / n / 1024, 2)
    for c in conns:
        c.get(POD_LIST)
    malloc, _ = _memory()
    out["conn_malloc_kib_podlist"] = round((malloc - malloc0) / n / 1024, 2)
    cpu = time.process_time()
    for c in conns:
        c.get(READYZ)
    out["keepalive_get_cpu_ms"] = round((time.process_time() - cpu) / n * 1000, 4)
    for c in conns:
        c.close()
    del conns
    # Sessions kept instead of connections: what resumption would hold per cluster.
    malloc0, _ = _memory()
    sessions = []
    for port in ports:
        c = _Bare(ctx, port, None)
        c.get(READYZ)  # a TLS 1.3 ticket comes after the handshake, read with the answer
        sessions.append(c.tls.session)
        c.close()
    malloc, _ = _memory()
    out["session_malloc_kib"] = round((malloc - malloc0) / n / 1024, 2)
    cpu = time.process_time()
    reused = 0
    for port, session in zip(ports, sessions, strict=True):
        c = _Bare(ctx, port, session)
        c.get(READYZ)
        reused += bool(c.tls.session_reused)
        c.close()
    out["resumed_handshake_get_cpu_ms"] = round((time.process_time() - cpu) / n * 1000, 4)
    out["resumed"] = reused
    del sessions
    # ssl.OP_NO_TICKET on the client's context.
    quiet = _context(ca, cert, key, no_ticket=True)
    malloc0, _ = _memory()
    conns = []
    for port in ports:
        c = _Bare(quiet, port, None)
        c.get(READYZ)
        conns.append(c)
    malloc, _ = _memory()
    out["no_ticket_conn_malloc_kib"] = round((malloc - malloc0) / n / 1024, 2)
    out["no_ticket_ctx_sessions_cached"] = quiet.session_stats()["number"]
    for c in conns:
        c.close()
    return out


def _bare_worker(info: FleetInfo, ports_file: Path) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "bench.floors", "--bare-worker", "--ports-file", str(ports_file),
        "--ca", str(info.ca), "--cert", str(info.client_cert), "--key", str(info.client_key),
    ]  # fmt: skip
    with machine_load() as load:
        out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"bare worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = load
    return result


# --- the driver -------------------------------------------------------------------------------


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in the environment the workers inherit, for the block's length."""
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _step(steps: list[dict[str, Any]], name: str, run: Any) -> dict[str, Any]:
    """Run one step, with the load (1/5/15 min) at its start and the clock around it."""
    start = os.getloadavg()
    t0 = time.time()
    print(f"[floors] {time.strftime('%H:%M:%S')} {name} (load {start[0]:.2f})", flush=True)
    result = run()
    steps.append(
        {
            "step": name,
            "load_start": [round(x, 2) for x in start],
            "load_end_1m": round(os.getloadavg()[0], 2),
            "started": time.strftime("%H:%M:%S", time.gmtime(t0)),
            "seconds": round(time.time() - t0, 1),
            "result": result,
        }
    )
    return result


def _cycle(tmp: Path, clusters: int, steady: int, **kw: Any) -> dict[str, Any]:
    """One fresh exporter side (a first cycle, ``steady`` more) against a fresh fleet, in a
    folder of its own: a fleet's files in a folder an earlier fleet used are not its own."""
    arena = kw.pop("arena", None)
    here = Path(tempfile.mkdtemp(dir=tmp))
    with _env("MALLOC_ARENA_MAX", arena):
        return probe_cycle.bench_size(here, clusters, 0, 1, steady, 10.0, None, **kw)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--option-clusters", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=8.0, help="each s_time run")
    parser.add_argument("--steady", type=int, default=2)
    parser.add_argument("--arena", default="2", help="MALLOC_ARENA_MAX of the arena rows")
    parser.add_argument("--no-arena-10k", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ports-file", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_worker:
        raise_fd_limit()
        ports = [int(p) for p in Path(args.ports_file).read_text().split()]
        print(json.dumps(bare_measure(ports, args.ca, args.cert, args.key)))
        return {}
    steps: list[dict[str, Any]] = []
    n, m = args.clusters, args.option_clusters
    _step(steps, "openssl full handshake", lambda: handshake_floor.measure(args.seconds))
    _step(
        steps,
        "openssl full handshake + GET",
        lambda: handshake_floor.measure(args.seconds, page="/"),
    )
    _step(
        steps,
        "openssl resumed handshake + GET",
        lambda: handshake_floor.measure(args.seconds, reuse=True, page="/"),
    )
    with tempfile.TemporaryDirectory(prefix="fw-floors-") as tmpdir:
        tmp = Path(tmpdir)
        fleet = start_fleet(tmp / "bare", m)
        try:
            info = fleet.shards[0]
            ports_file = tmp / "ports.txt"
            ports_file.write_text(" ".join(str(p) for s in fleet.shards for p in s.ports()))
            _step(steps, "bare ssl client", lambda: _bare_worker(info, ports_file))
            _step(
                steps,
                "exporter pool per request",
                lambda: _run_worker(REPO, ports_file, info, 2, 900, False),
            )
        finally:
            fleet.stop()
        _step(steps, f"as built {n}", lambda: _cycle(tmp, n, args.steady))
        _step(steps, f"probe only {n}", lambda: _cycle(tmp, n, args.steady, with_checks=False))
        _step(steps, f"as built {m}", lambda: _cycle(tmp, m, args.steady))
        _step(steps, f"probe only {m}", lambda: _cycle(tmp, m, args.steady, with_checks=False))
        _step(steps, f"max idle 0 {m}", lambda: _cycle(tmp, m, args.steady, max_idle=0))
        _step(
            steps,
            f"a certificate per cluster {m}",
            lambda: _cycle(tmp, m, args.steady, credential="client_cert_data_each"),
        )
        _step(
            steps, f"arena {args.arena} {m}", lambda: _cycle(tmp, m, args.steady, arena=args.arena)
        )
        if not args.no_arena_10k:
            _step(
                steps,
                f"arena {args.arena} {n}",
                lambda: _cycle(tmp, n, args.steady, arena=args.arena),
            )
            _step(steps, f"as built {n} again", lambda: _cycle(tmp, n, args.steady))
    out = {"clusters": n, "option_clusters": m, "steps": steps}
    write_result("floors", out, args.out)
    return out


# --- the tables of bench/RESULTS.md, from the result file ------------------------------------


def _load(step: dict[str, Any]) -> str:
    a, b, c = step["load_start"]
    return f"{a:.1f}/{b:.1f}/{c:.1f} -> {step['load_end_1m']:.1f}"


def tables(path: Path) -> str:
    """Markdown: the floors, the exporter's cycles, the ratios (round 17 of RESULTS.md)."""
    doc = json.loads(path.read_text())
    lines = ["| step | started | load 1/5/15 -> 1 at end | figures |", "|---|---|---|---|"]
    for s in doc["steps"]:
        r = s["result"]
        if "runs" in r and r["runs"] and "cycles" in r["runs"][0]:
            run = r["runs"][0]
            first, steady = run["cycles"][0], run["cycles"][1:]
            st = ", ".join(f"{c['cpu_ms_per_probe']:.3f}" for c in steady)
            fig = (
                f"{r['clusters']} clusters: first cycle {first['wall_s']:.1f} s, "
                f"{first['cpu_ms_per_probe']:.3f} ms CPU per cluster ({first['ok']} ok); "
                f"steady {st} ms per probe; peak RSS {run['rss_peak_mib']:.0f} MiB; "
                f"fleet CPU first cycle {first['fleet_cpu_s']} s"
            )
        else:
            fig = ", ".join(
                f"{k} {v}" for k, v in r.items() if k not in ("load", "openssl", "exporter")
            )
        lines.append(f"| {s['step']} | {s['started']} | {_load(s)} | {fig} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--tables"]:
        print(tables(Path(sys.argv[2])))
    else:
        main()
