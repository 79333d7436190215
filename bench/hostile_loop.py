"""How late the event loop runs, and how fast the reactor answers, while the management
API fails every watch (issue 31's hostile modes).

The live tests (``tests/discovery/test_discovery_hostile.py``,
``tests/reactor/test_cd_hostile.py``) count what a reflector sends and assert the reactor
answers; the times are measured here, since a wall-clock bound in a test fails on a loaded
machine (they were "the loop's p90 lateness under 0.1 s", "``/metrics`` under 1 s", "CPU
share under 0.25/0.3"). Per mode of ``tests.helpers.discovery_hostile.HOSTILE``, each
armed on an in-process management stand-in for ``--seconds`` (4, the tests' window):

- ``discovery``: an informer of Argo CD's cluster Secrets at client-go's pace;
- ``cd``: the reactor with ``--cd.flux`` served on 127.0.0.1, ``/metrics`` asked every 0.2 s.

Reported per mode and target: a 20 ms ticker's lateness (p90 and max: another task of the
same loop), the process's CPU share over the window (``process_time``: the in-process
stand-in included), the ``/metrics`` times (median, max) for ``cd``, the requests the
stand-in counted, and the machine's load (``bench.common.machine_load``) beside them.

Run: ``.venv/bin/python -m bench.hostile_loop [--seconds 4] [--modes 410-event,...]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.common import machine_load, summary, write_result
from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.procs import free_port
from fleetwatch.standin.management import ManagementCluster, ManagementSettings
from reactor.app import create_app
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from tests.helpers.discovery_hostile import FLUX_KINDS, HOSTILE, KUSTOMIZATION, WINDOW, requests
from tests.helpers.discovery_informer import argocd_secret, running

SECRETS = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")


@dataclass
class Observed:
    """A window: its length, the process's CPU share, the loop's lateness, a probe's times."""

    seconds: float
    cpu_share: float
    lags: list[float] = field(default_factory=list)
    probe_seconds: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seconds": round(self.seconds, 2),
            "cpu_share": round(self.cpu_share, 3),
            "lag_p90_s": round(statistics.quantiles(self.lags, n=10)[-1], 4),
            "lag_max_s": round(max(self.lags), 4),
        }
        if self.probe_seconds:
            out["probe_s"] = summary(self.probe_seconds)
        return out


async def observe(seconds: float, probe: Callable[[], Awaitable[None]] | None = None) -> Observed:
    """Watch the process for ``seconds``: a 20 ms ticker's lateness, its CPU share, and,
    every 0.2 s, how long ``probe`` (an HTTP request to the server under test) took."""
    lags: list[float] = []
    probes: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.02)
            lags.append(time.monotonic() - before - 0.02)

    async def poke() -> None:
        while probe is not None:
            before = time.monotonic()
            await probe()
            probes.append(time.monotonic() - before)
            await asyncio.sleep(0.2)

    cpu, wall = time.process_time(), time.monotonic()
    tasks = [asyncio.create_task(tick(), name="ticker"), asyncio.create_task(poke(), name="probe")]
    try:
        await asyncio.sleep(seconds)  # the window itself: times are taken over it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.monotonic() - wall
    return Observed(wall, (time.process_time() - cpu) / wall, lags, probes)


async def discovery(tmp: Path, mode: str, seconds: float) -> dict[str, Any]:
    async with ManagementCluster(tmp / f"mgmt-discovery-{mode}", ManagementSettings()) as mgmt:
        mgmt.seed([argocd_secret("argo-a"), argocd_secret("argo-b")])
        mgmt.arm_fault(resource="secrets", **HOSTILE[mode])
        async with running(mgmt, [SECRETS], settings=InformerSettings()):
            seen = await observe(seconds)
        return {**seen.figures(), "requests": requests(mgmt.counts(), "secrets")}


async def cd(tmp: Path, mode: str, seconds: float) -> dict[str, Any]:
    async with ManagementCluster(tmp / f"mgmt-cd-{mode}", ManagementSettings()) as mgmt:
        mgmt.seed([KUSTOMIZATION])
        for kind in FLUX_KINDS:
            mgmt.arm_fault(resource=kind, **HOSTILE[mode])
        settings = ReactorSettings(db_path=tmp / f"cd-{mode}.db")
        app = create_app(settings, cd=CdSettings(flux=True, kubeconfig=str(mgmt.kubeconfig)))
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with aiohttp.ClientSession() as session:

                async def metrics() -> None:
                    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                        if response.status != 200:
                            raise RuntimeError(f"/metrics answered {response.status}")
                        await response.read()

                seen = await observe(seconds, probe=metrics)
        finally:
            await runner.cleanup()
        counts = mgmt.counts()
        return {**seen.figures(), "requests": sum(requests(counts, k) for k in FLUX_KINDS)}


async def measure(modes: list[str], seconds: float) -> list[dict[str, Any]]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-hostile-loop-") as tmpdir:
        for mode in modes:
            for target, run in (("discovery", discovery), ("cd", cd)):
                with machine_load() as load:
                    figures = await run(Path(tmpdir), mode, seconds)
                runs.append({"mode": mode, "target": target, **figures, "load": load})
    return runs


def markdown(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| mode | target | loop lag p90 s | lag max s | CPU share | /metrics median s |"
        " /metrics max s | requests | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        probe = r.get("probe_s") or {}
        cells = [
            r["mode"], r["target"], f"{r['lag_p90_s']:.3f}", f"{r['lag_max_s']:.3f}",
            f"{r['cpu_share']:.2f}", f"{probe['median']:.3f}" if probe else "-",
            f"{probe['max']:.3f}" if probe else "-", str(r["requests"]),
            f"{r['load']['loadavg_1m']:.1f}",
        ]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=WINDOW, help="each window (s)")
    parser.add_argument("--modes", default=",".join(HOSTILE), help="comma-separated")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(HOSTILE))
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {list(HOSTILE)}")
    result = {"seconds": args.seconds, "runs": asyncio.run(measure(modes, args.seconds))}
    write_result("hostile_loop", result, args.out)
    print(markdown(result["runs"]))
    return result


if __name__ == "__main__":
    main()
