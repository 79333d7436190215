"""The peer for the probe benchmark: Debian's blackbox_exporter probing the same fleet.

blackbox_exporter gets an ``https`` module with the fleet's CA and client certificate and
is driven through ``/probe?target=https://127.0.0.1:PORT/readyz&module=https_standin``
as fast as it goes (a bounded number of probes, bounded in time). Its cost is the CPU
seconds of the blackbox process alone (``/proc/<pid>/stat``), so the driver and the
stand-in fleet, which run in other processes, are not charged to it.

Run alone: ``.venv/bin/python -m bench.blackbox --clusters 1000 --probes 5000``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import ProcWatch, machine_load, summary, write_result
from bench.fleet_server import FleetInfo, start_fleet
from fleetwatch.procs import ManagedProcess, free_port

BINARY = "prometheus-blackbox-exporter"
MODULE = "https_standin"


def write_config(path: Path, fleet: FleetInfo, timeout_s: float = 5.0) -> Path:
    """A blackbox config whose https module uses the fleet's CA and client certificate."""
    path.write_text(
        f"""modules:
  {MODULE}:
    prober: http
    timeout: {timeout_s}s
    http:
      method: GET
      valid_status_codes: [200]
      preferred_ip_protocol: ip4
      ip_protocol_fallback: false
      tls_config:
        ca_file: {fleet.ca}
        cert_file: {fleet.client_cert}
        key_file: {fleet.client_key}
"""
    )
    return path


def start_blackbox(tmp: Path, fleet: FleetInfo) -> tuple[ManagedProcess, str]:
    port = free_port()
    config = write_config(tmp / "blackbox.yml", fleet)
    proc = ManagedProcess(
        [BINARY, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}"],
        tmp / "blackbox.log",
        ready_url=f"http://127.0.0.1:{port}/metrics",
    ).start()
    return proc, f"http://127.0.0.1:{port}"


@dataclass
class DriveResult:
    probes: int
    ok: int
    wall_s: float
    blackbox_cpu_s: float
    blackbox_rss_peak_mib: float

    @property
    def probes_per_cpu_s(self) -> float:
        return self.probes / self.blackbox_cpu_s if self.blackbox_cpu_s else float("nan")


async def drive(
    base: str, ports: list[int], probes: int, concurrency: int, max_seconds: float
) -> tuple[int, int]:
    """Send up to ``probes`` probe requests (``concurrency`` at a time) within the time."""
    targets = itertools.cycle(ports)
    deadline = time.monotonic() + max_seconds
    sent = ok = 0
    timeout = aiohttp.ClientTimeout(total=10)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def worker() -> None:
            nonlocal sent, ok
            while sent < probes and time.monotonic() < deadline:
                sent += 1
                url = f"{base}/probe"
                params = {"target": f"https://127.0.0.1:{next(targets)}/readyz", "module": MODULE}
                async with session.get(url, params=params) as resp:
                    body = await resp.text()
                if resp.status == 200 and "\nprobe_success 1" in body:
                    ok += 1

        async with asyncio.TaskGroup() as tg:
            for i in range(concurrency):
                tg.create_task(worker(), name=f"blackbox-driver-{i}")
    return sent, ok


def measure(
    base: str, pid: int, ports: list[int], probes: int, concurrency: int, max_seconds: float
) -> DriveResult:
    watch = ProcWatch(pid).start()
    sent, ok = asyncio.run(drive(base, ports, probes, concurrency, max_seconds))
    s = watch.stop()
    return DriveResult(sent, ok, s.wall_s, s.cpu_s, s.rss_peak_mib)


def run_blackbox(
    tmp: Path, fleet: FleetInfo, probes: int, runs: int, concurrency: int, max_seconds: float
) -> dict[str, Any]:
    """Start blackbox, warm it up, then ``runs`` measured bursts of ``probes`` probes."""
    proc, base = start_blackbox(tmp, fleet)
    try:
        ports = fleet.ports("ok")
        measure(base, proc.pid, ports, min(200, probes), concurrency, max_seconds)  # warm-up
        each = []
        for _ in range(runs):
            with machine_load() as load:
                r = measure(base, proc.pid, ports, probes, concurrency, max_seconds)
            each.append(
                {
                    "probes": r.probes,
                    "ok": r.ok,
                    "wall_s": round(r.wall_s, 3),
                    "probes_per_s": round(r.probes / r.wall_s, 1),
                    "cpu_s": round(r.blackbox_cpu_s, 3),
                    "probes_per_cpu_s": round(r.probes_per_cpu_s, 1),
                    "rss_peak_mib": round(r.blackbox_rss_peak_mib, 1),
                    "load": load,
                }
            )
    finally:
        proc.stop()
    return {
        "runs": each,
        "probes_per_cpu_s": summary([e["probes_per_cpu_s"] for e in each]),
        "probes_per_s": summary([e["probes_per_s"] for e in each]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=5000, help="probes per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        fleet = start_fleet(tmp / "fleet", args.clusters, shard_max=args.clusters)
        try:
            result = run_blackbox(
                tmp, fleet.shards[0], args.probes, args.runs, args.concurrency, args.max_seconds
            )
        finally:
            fleet.stop()
    write_result("blackbox", {"clusters": args.clusters, "blackbox": result}, args.out)
    return result


if __name__ == "__main__":
    main()
