"""Memory and CPU of the probes' kept-alive TLS connections, one tree of the code vs another.

At 10,000 clusters the exporter keeps 10,000 TLS connections, so what one idle connection
holds is most of its memory. This measures ``exporter.net.pool.HttpPool`` alone against
the stand-in fleet (``bench.fleet_server``, its own process, client certificates), the
client side alone in a worker process (``--worker``), for N connections:

- malloc bytes (glibc ``mallinfo2``: ``uordblks + hblkhd``, where OpenSSL's state and
  big buffers live) and RSS per kept connection, as totals over the worker's baseline:
  after the handshake, after a ``/readyz?verbose`` answer on each, and after a kube-system
  pod-list answer (the control-plane check's, about 18 KB at the stand-in);
- CPU per kept-alive ``GET /readyz?verbose``, bounded as the caller bounds it today
  (``asyncio.timeout`` around each), with the pool's own ``deadline=`` when the tree has
  it, and with no bound (what the client itself costs);
- CPU per new connection (TCP, TLS handshake with a client certificate, one GET);
- microseconds to bound one request with 10,000 timers pending on the loop, as at
  10,000 clusters: ``loop.call_at`` + ``cancel``, ``asyncio.timeout``, the pool's deadline;
- in a second worker of its own, malloc and RSS per connection when each one's
  handshake, ``/readyz?verbose`` and pod list come back to back, as in a first cycle
  (``*_cycle``), rather than N handshakes first: what is freed after them (OpenSSL's
  write buffer, over memory BIOs) then leaves no holes in the heap that RSS keeps.

``--baseline COMMIT`` exports that commit's ``exporter/`` (``git archive``, nothing in the
repository changes) and runs the same worker on it, alternating with this tree in the
same pass against the same fleet, so the two are measured under the same load.

The phases keep their order: each memory figure is a total over the baseline, read after
``gc.collect()``; freed memory is not always returned to the system, so RSS only shows
growth. CPU is the worker's own ``time.process_time()``; GETs run on 64 coroutines that
take the next connection, as the cycle's concurrency does, without a task per GET.

Run: ``.venv/bin/python -m bench.connections --connections 1500 --baseline 8a3e263``
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import importlib
import inspect
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, export_tree, machine_load, memory_kib, summary, write_result
from bench.fleet_server import FleetInfo, raise_fd_limit, start_fleet

READYZ = "/readyz?verbose"
POD_LIST = "/api/v1/namespaces/kube-system/pods?labelSelector=tier%3Dcontrol-plane"
WORKERS = 64  #: GETs at once (the exporter's default --probe.concurrency)
TIMEOUT = 30.0  #: each GET's bound, far beyond any answer here


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_in_use() -> int:
    """Bytes malloc has handed out and not had back (all arenas, mmapped blocks too)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _memory() -> tuple[int, int]:
    gc.collect()
    return malloc_in_use(), memory_kib(os.getpid())["VmRSS"] * 1024


# --- the worker: the client side, alone in its process ------------------------------------


async def _each(urls: list[str], one: Callable[[str], Awaitable[object]]) -> None:
    """``one(url)`` for every URL, ``WORKERS`` at a time."""
    pending = iter(urls)

    async def worker() -> None:
        for url in pending:
            await one(url)

    await asyncio.gather(*(worker() for _ in range(WORKERS)))


async def _measure(
    ports: list[int], ca: str, cert: str, key: str, rounds: int, cycle_order: bool
) -> dict[str, Any]:
    # The tree under test comes first on sys.path (see _run_worker): import it only now.
    HttpPool = _pool_module().HttpPool

    loop = asyncio.get_running_loop()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # as exporter.net.credentials builds one
    context.load_verify_locations(cafile=ca)
    context.load_cert_chain(cert, key)
    has_deadline = "deadline" in inspect.signature(HttpPool.get).parameters
    urls = [f"https://127.0.0.1:{port}" for port in ports]
    n = len(urls)
    sizes: dict[str, int] = {}

    def get(pool: HttpPool, path: str, bound: str = "timeout") -> Callable[[str], Awaitable[None]]:
        async def one(url: str) -> None:
            kwargs: dict[str, Any] = {
                "headers": {}, "context": context, "server_hostname": None, "max_bytes": 1 << 22
            }  # fmt: skip
            if bound == "deadline":
                kwargs["deadline"] = loop.time() + TIMEOUT
            if bound == "timeout":
                async with asyncio.timeout(TIMEOUT):
                    status, body = await pool.get(url, path, **kwargs)
            else:
                status, body = await pool.get(url, path, **kwargs)
            if status != 200:
                raise RuntimeError(f"HTTP {status} on {path} of {url}")
            sizes[path] = len(body)

        return one

    async def settle() -> None:
        # Idle connections read what came after the last answer or the handshake (TLS 1.3
        # session tickets) when the loop runs: let it run before reading memory.
        for _ in range(5):
            await asyncio.sleep(0.05)

    # Warm up (code paths, OpenSSL's lazy tables) on connections of their own, then close.
    warm = HttpPool()
    await _each(urls[:20], get(warm, POD_LIST))
    warm.close()
    await settle()
    malloc0, rss0 = _memory()
    out: dict[str, Any] = {
        "connections": n, "has_deadline": has_deadline, "openssl": ssl.OPENSSL_VERSION
    }  # fmt: skip

    def memory(phase: str) -> None:
        malloc, rss = _memory()
        out[f"malloc_kib_per_conn_{phase}"] = round((malloc - malloc0) / n / 1024, 2)
        out[f"rss_kib_per_conn_{phase}"] = round((rss - rss0) / n / 1024, 2)

    pool = HttpPool()
    if cycle_order:  # as a first cycle: each connection's handshake, probe and check at once
        readyz, pods = get(pool, READYZ), get(pool, POD_LIST)

        async def first_cycle(url: str) -> None:
            await readyz(url)
            await pods(url)

        await _each(urls, first_cycle)
        await settle()
        memory("cycle")
        out["opened_while_kept"] = pool.opened
        pool.close()
        return out

    async def connect(url: str) -> None:
        async with asyncio.timeout(TIMEOUT):
            await pool.preconnect(url, context=context, server_hostname=None)

    cpu = time.process_time()
    await _each(urls, connect)
    out["handshake_cpu_ms"] = round((time.process_time() - cpu) / n * 1000, 4)
    await settle()
    memory("handshake")
    await _each(urls, get(pool, READYZ))
    await settle()
    memory("readyz")
    await _each(urls, get(pool, POD_LIST))
    await settle()
    memory("podlist")
    # CPU per kept-alive GET, each way of bounding it, rounds interleaved.
    bounds = ["timeout", "none"] + (["deadline"] if has_deadline else [])
    spent = dict.fromkeys(bounds, 0.0)
    for _ in range(rounds):
        for bound in bounds:
            cpu = time.process_time()
            await _each(urls, get(pool, READYZ, bound))
            spent[bound] += time.process_time() - cpu
    for bound in bounds:
        out[f"keepalive_get_cpu_ms_{bound}"] = round(spent[bound] / (n * rounds) * 1000, 4)
    cpu = time.process_time()
    await _each(urls, get(pool, POD_LIST))
    out["keepalive_podlist_cpu_ms_timeout"] = round((time.process_time() - cpu) / n * 1000, 4)
    out["opened_while_kept"] = pool.opened  # n: every GET above reused its connection
    pool.close()
    # CPU per new connection: TCP, the handshake, one GET, as a first cycle pays it.
    fresh = HttpPool()
    cpu = time.process_time()
    await _each(urls, get(fresh, READYZ))
    out["new_connection_cpu_ms"] = round((time.process_time() - cpu) / n * 1000, 4)
    fresh.close()
    out["readyz_bytes"] = sizes.get(READYZ)
    out["podlist_bytes"] = sizes.get(POD_LIST)
    return out


async def _timer_costs(pending: int = 10_000, n: int = 30_000) -> dict[str, float]:
    """Microseconds to bound one request, with ``pending`` timers on the loop (a cycle's).

    ``loop.call_at`` + ``cancel``, ``asyncio.timeout`` entered and left, and the pool's
    own deadline (``Deadlines.start``/``end``, when the tree has it); each on the loop
    with ``pending`` far timers and yielding to it every tenth time, as requests do.
    """
    httppool = _pool_module()

    loop = asyncio.get_running_loop()
    far = [loop.call_at(loop.time() + 3600 + i * 1e-3, lambda: None) for i in range(pending)]
    costs: dict[str, float] = {}

    async def timed(name: str, one: Callable[[], Awaitable[None]]) -> None:
        cpu = time.process_time()
        for i in range(n):
            await one()
            if i % 10 == 0:
                await asyncio.sleep(0)
        costs[name] = round((time.process_time() - cpu) / n * 1e6, 3)

    async def nothing() -> None:
        return None

    async def bare() -> None:
        await nothing()

    async def call_at() -> None:
        handle = loop.call_at(loop.time() + 10, lambda: None)
        await nothing()
        handle.cancel()

    async def with_timeout() -> None:
        async with asyncio.timeout(10):
            await nothing()  # entered and left, as around a request answered in time

    await timed("none", bare)
    await timed("call_at", call_at)
    await timed("asyncio_timeout", with_timeout)
    try:
        from exporter.net.deadlines import Deadlines as deadlines
    except ImportError:  # a tree whose pool keeps them itself
        deadlines = getattr(httppool, "_Deadlines", None)
    if deadlines is not None:
        heap = deadlines()

        async def pool_deadline() -> None:
            request = heap.start(loop.time() + 10)
            await nothing()
            heap.end(request)

        await timed("pool_deadline", pool_deadline)
    for handle in far:
        handle.cancel()
    base = costs.pop("none")
    return {f"timer_us_{k}": round(v - base, 3) for k, v in costs.items()}


def worker_main(args: argparse.Namespace) -> None:
    raise_fd_limit()  # one socket per connection
    ports = [int(p) for p in Path(args.ports_file).read_text().split()]
    result = asyncio.run(
        _measure(ports, args.ca, args.cert, args.key, args.rounds, args.cycle_order)
    )
    if not args.cycle_order:
        result.update(asyncio.run(_timer_costs()))
    import exporter

    result["exporter"] = str(Path(exporter.__file__).parent)  # which tree was measured
    print(json.dumps(result))


# --- the driver -----------------------------------------------------------------------------


def _pool_module() -> Any:
    """The connection pool's module of the tree under test, wherever that tree keeps it."""
    try:
        return importlib.import_module("exporter.net.pool")
    except ModuleNotFoundError:  # a tree from before the exporter's sub-packages
        return importlib.import_module("exporter.httppool")


def _run_worker(
    tree: Path, ports_file: Path, info: FleetInfo, rounds: int, limit_s: float, cycle_order: bool
) -> dict[str, Any]:
    # The tree's exporter/ first on sys.path, then this repository for bench/.
    code = (
        f"import sys; sys.path[:0] = [{str(tree)!r}, {str(REPO)!r}]; "
        "from bench.connections import main; main()"
    )
    argv = [
        sys.executable, "-c", code, "--worker", "--ports-file", str(ports_file),
        "--ca", str(info.ca), "--cert", str(info.client_cert), "--key", str(info.client_key),
        "--rounds", str(rounds), *(["--cycle-order"] if cycle_order else []),
    ]  # fmt: skip
    with machine_load() as load:
        out = subprocess.run(
            argv, cwd=tree, capture_output=True, text=True, timeout=limit_s, check=False
        )
    if out.returncode != 0:
        raise RuntimeError(f"connections worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = load
    return result


def _summaries(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return {k: summary([r[k] for r in runs if r.get(k) is not None]) for k in keys}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=2, help="workers per tree, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="kept-alive GETs per connection")
    parser.add_argument("--baseline", default=None, help="a commit to compare with")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ports-file", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--cycle-order", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args)
        return {}
    trees: dict[str, list[dict[str, Any]]] = {"this": []}
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmp:
        paths = {"this": REPO}
        if args.baseline:
            paths["baseline"] = export_tree(args.baseline, Path(tmp) / "baseline")
            trees["baseline"] = []
        fleet = start_fleet(Path(tmp) / "fleet", args.connections)
        try:
            info = fleet.shards[0]
            ports_file = Path(tmp) / "ports.txt"
            ports_file.write_text(" ".join(str(p) for s in fleet.shards for p in s.ports()))
            limit = 120 + args.connections * (0.05 + 0.01 * args.rounds)
            for _ in range(args.runs):
                for name in trees:  # alternating: the same load for both
                    run = _run_worker(paths[name], ports_file, info, args.rounds, limit, False)
                    cycle = _run_worker(paths[name], ports_file, info, 0, limit, True)
                    for key in ("malloc_kib_per_conn_cycle", "rss_kib_per_conn_cycle"):
                        run[key] = cycle[key]
                    run["load_cycle_order"] = cycle["load"]
                    trees[name].append(run)
        finally:
            fleet.stop()
    out: dict[str, Any] = {
        "connections": args.connections,
        "baseline_commit": args.baseline,
        "trees": {
            name: {"runs": runs, "summary": _summaries(runs)} for name, runs in trees.items()
        },
    }
    write_result("connections", out, args.out)
    return out


if __name__ == "__main__":
    main()
