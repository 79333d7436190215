"""What the stand-in fleet itself costs while the exporter probes it: CPU per cluster, RSS.

The benchmark's fleet shares the machine's cores with the exporter it measures, so every
CPU-second the stand-in spends is a CPU-second the exporter's cycle cannot have. This
runs one fleet process (``bench.fleet_server``), then one exporter worker of
``bench.probe_cycle`` (a first cycle and ``--steady`` kept-alive cycles, with the
control-plane check: three requests per cluster and cycle), and reports the fleet's CPU
seconds per cycle and per cluster (user and system, from ``/proc``), its resident memory
idle (clusters listening) and at its peak, and its open descriptors with every client
connected.

``--baseline DIR`` compares code versions in one pass: DIR is another tree of the
repository (say ``git archive <commit> | tar -x -C /tmp/old``) whose fleet serves every
other run, the exporter worker being this checkout's in both; the summary has the
medians of each and their ratios. The machine is shared: compare the two within one
run, never across runs.

Run: ``.venv/bin/python -m bench.standin_cost --clusters 2000 --steady 3 --runs 3
--baseline /tmp/old``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench.common import REPO, machine_load, memory_kib, write_result
from bench.fleet_server import start_fleet
from bench.probe_cycle import run_worker


class _Descriptors(threading.Thread):
    """The most descriptors ``pid`` held while the worker ran (sampled every 0.2 s)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                self.peak = max(self.peak, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                return

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def measure(tmp: Path, clusters: int, steady: int, timeout: float, repo: Path) -> dict[str, Any]:
    """One fleet process from ``repo``, one exporter worker against it."""
    fleet = start_fleet(tmp / "fleet", clusters, repo=repo)
    try:
        (pid,) = fleet.pids
        idle = memory_kib(pid)
        idle_fds = len(os.listdir(f"/proc/{pid}/fd"))
        sampler = _Descriptors(pid)
        sampler.start()
        with machine_load() as load:
            result = run_worker(
                fleet.kubeconfig_dir, steady, timeout, None, 300 + clusters / 10, fleet.pids
            )
        peak_fds = sampler.stop()
        peak = memory_kib(pid)
    finally:
        fleet.stop()
    cycles = [
        {
            "kind": c["kind"],
            "wall_s": c["wall_s"],
            "ok": c["ok"],
            "exporter_cpu_s": c["cpu_s"],
            "fleet_cpu_s": c["fleet_cpu_s"],
            "fleet_cpu_ms_per_cluster": round(c["fleet_cpu_s"] / clusters * 1000, 3),
        }
        for c in result["cycles"]
    ]
    return {
        "repo": str(repo),
        "clusters": clusters,
        "cycles": cycles,
        "fleet_rss_idle_mib": round(idle["VmRSS"] / 1024, 1),
        "fleet_rss_peak_mib": round(peak["VmHWM"] / 1024, 1),
        "fleet_descriptors_idle": idle_fds,
        "fleet_descriptors_connected_peak": peak_fds,
        "load": load,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs: fleet CPU ms per cluster (first, steady cycles), peak RSS."""
    first = [r["cycles"][0]["fleet_cpu_ms_per_cluster"] for r in runs]
    steady = [c["fleet_cpu_ms_per_cluster"] for r in runs for c in r["cycles"][1:]]
    return {
        "first_fleet_cpu_ms_per_cluster": statistics.median(first),
        "steady_fleet_cpu_ms_per_cluster": statistics.median(steady) if steady else None,
        "fleet_rss_peak_mib": statistics.median(r["fleet_rss_peak_mib"] for r in runs),
        "loadavg_1m": [round(r["load"]["loadavg_1m"], 2) for r in runs],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--steady", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1, help="runs per code version")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout to compare")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    sides = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(args.runs):
        for name, repo in reversed(sides.items()):  # the baseline first, then this one
            with tempfile.TemporaryDirectory(prefix="fw-standin-cost-") as tmpdir:
                runs[name].append(
                    measure(Path(tmpdir), args.clusters, args.steady, args.timeout, repo)
                )
    result: dict[str, Any] = {
        "clusters": args.clusters,
        "runs": runs,
        "summary": {name: summarise(each) for name, each in runs.items()},
    }
    if args.baseline:
        this, base = result["summary"]["this"], result["summary"]["baseline"]
        result["summary"]["ratio_baseline_over_this"] = {
            key: round(base[key] / this[key], 2)
            for key in ("first_fleet_cpu_ms_per_cluster", "steady_fleet_cpu_ms_per_cluster",
                        "fleet_rss_peak_mib")
            if base[key] and this[key]
        }  # fmt: skip
    write_result("standin_cost", result, args.out)
    return result


if __name__ == "__main__":
    main()
