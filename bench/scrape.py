"""Scrape cost: ``/metrics`` of a real ``fleetwatch exporter`` watching N stand-in clusters.

The exporter renders its answer once per cycle and serves bytes (plain or gzipped), so a
scrape should cost little whatever the fleet size. The peer, in the same run: the same
series (parsed back from the scraped text) rendered by ``prometheus_client``'s
``generate_latest()``, both from prebuilt metric families (the cheapest way) and from
labelled Gauge/Counter objects (the usual way).

The exporter's peak RSS (VmHWM of the real process) after its first full cycle is
reported too.

Run: ``.venv/bin/python -m bench.scrape --clusters 10000 --scrapes 50``
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import (
    REPO,
    ProcWatch,
    machine_load,
    memory_kib,
    summary,
    write_result,
)
from bench.fleet_server import start_fleet
from bench.genlatest import (
    families_from_text,
    registry_of,
    registry_of_metrics,
    time_generate_latest,
)
from fleetwatch.procs import ManagedProcess, free_port, wait_until


def start_exporter(tmp: Path, kubeconfig_dir: Path, interval: float) -> tuple[ManagedProcess, str]:
    """The real ``fleetwatch exporter``, as users run it (control-plane check included)."""
    port = free_port()
    kubeconfig = tmp / "empty-kubeconfig.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    args = [
        "exporter", f"--web.listen-address=127.0.0.1:{port}", f"--kubeconfig={kubeconfig}",
        f"--kubeconfig-dir={kubeconfig_dir}", f"--probe.interval={interval:g}",
        "--probe.timeout=10", "--log.level=error",
    ]  # fmt: skip
    argv = [str(Path(sys.executable).parent / "fleetwatch"), *args]
    proc = ManagedProcess(
        argv, tmp / "exporter.log", ready_url=f"http://127.0.0.1:{port}/healthz", cwd=REPO
    ).start(ready_timeout=60)
    return proc, f"http://127.0.0.1:{port}"


def cycles_done(base: str) -> int:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    m = re.search(r"^fleetwatch_exporter_cycle_duration_seconds ([0-9.e+-]+)$", text, re.M)
    return 1 if m and float(m.group(1)) > 0 else 0


async def scrape_loop(base: str, n: int, gzip: bool, max_seconds: float) -> tuple[list[float], int]:
    """``n`` sequential scrapes (as Prometheus does): seconds each, and the body size."""
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    times: list[float] = []
    size = 0
    deadline = time.monotonic() + max_seconds
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        for _ in range(n):
            if time.monotonic() > deadline:
                break
            t0 = time.perf_counter()
            async with session.get(base + "/metrics", headers=headers) as resp:
                body = await resp.read()
            times.append(time.perf_counter() - t0)
            size = len(body)
            assert resp.status == 200
            assert (resp.headers.get("Content-Encoding") == "gzip") == gzip
    return times, size


def measure(base: str, pid: int, n: int, gzip: bool) -> dict[str, Any]:
    watch = ProcWatch(pid).start()
    with machine_load() as load:
        times, size = asyncio.run(scrape_loop(base, n, gzip, 120.0))
    s = watch.stop()
    return {
        "seconds": summary(times),
        "p99_s": round(sorted(times)[max(0, int(len(times) * 0.99) - 1)], 6),
        "bytes": size,
        "exporter_cpu_ms_per_scrape": round(s.cpu_s / len(times) * 1000, 3),
        "scrapes": len(times),
        "load": load,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=50, help="sequential scrapes per kind")
    parser.add_argument("--runs", type=int, default=5, help="generate_latest() calls per kind")
    parser.add_argument(
        "--as-built",
        action="store_true",
        help="accepted for the commands of earlier rounds: the exporter always runs as built",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        fleet = start_fleet(tmp / "fleet", args.clusters)
        try:
            exporter, base = start_exporter(tmp, fleet.kubeconfig_dir, interval=3600)
            try:
                t0 = time.monotonic()
                wait_until(
                    lambda: cycles_done(base), timeout=120 + args.clusters / 20, interval=0.5,
                    what="first probe cycle",
                )  # fmt: skip
                first_cycle_wait = time.monotonic() - t0
                mem = memory_kib(exporter.pid)
                plain = measure(base, exporter.pid, args.scrapes, gzip=False)
                gz = measure(base, exporter.pid, args.scrapes, gzip=True)
                with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
                    text = resp.read().decode()
            finally:
                exporter.stop()
        finally:
            fleet.stop()
    families = families_from_text(text)
    series = sum(len(f.samples) for f in families)
    peers: dict[str, Any] = {}
    for kind, reg in (
        ("collector", registry_of(families)),
        ("gauges", registry_of_metrics(families)),
    ):
        times, size = time_generate_latest(reg, args.runs)
        peers[kind] = {"seconds": summary(times), "bytes": size}
    fw = plain["seconds"]["median"]
    result = {
        "clusters": args.clusters,
        "series": series,
        "exporter": "as built",
        "exporter_rss_mib_after_first_cycle": round(mem["VmRSS"] / 1024, 1),
        "exporter_rss_peak_mib_after_first_cycle": round(mem["VmHWM"] / 1024, 1),
        "first_cycle_wait_s": round(first_cycle_wait, 1),
        "scrape_plain": plain,
        "scrape_gzip": gz,
        "generate_latest": peers,
        "speedup_vs_generate_latest_collector": round(
            peers["collector"]["seconds"]["median"] / fw, 1
        ),
        "speedup_vs_generate_latest_gauges": round(peers["gauges"]["seconds"]["median"] / fw, 1),
    }
    write_result("scrape", result, args.out)
    return result


if __name__ == "__main__":
    main()
