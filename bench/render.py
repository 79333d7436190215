"""One rendering of ``/metrics`` and ``/sd/control-plane`` at fleet scale, without a fleet.

The cluster table is filled as the cycle fills it: N clusters discovered and probed, and
the control-plane check run for each against kube-system answers of a stand-in control
plane (``fleetwatch.standin.workload.controlplane``'s pod lists, handed at the check's own seam,
``get(path, timeout)``; no network, so only the exporter's side is measured). Then, per
gzip level, ``exporter.expose.render.render`` with the process collectors appended, as the
server renders after each cycle phase: afresh, and reusing the rendering of the phase
before (new probe results, the same check results: the usual steady cycle), CPU seconds
(thread time) and body sizes; a plain scrape (the body decompressed as it is sent); and
what the check results hold: objects reachable from the table and the check, per
cluster, and how many the garbage collector tracks.

Run: ``.venv/bin/python -m bench.render --clusters 1000 2000 --levels 1 6 --runs 5``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.common import machine_load, summary, write_result


class _KubeSystem:
    """A stand-in cluster's kube-system answers to the check's two GETs."""

    def __init__(self, index: int) -> None:
        self.index = index

    async def get(self, path: str, timeout: float) -> tuple[int, bytes]:  # noqa: ASYNC109
        from fleetwatch.standin.workload.controlplane import ControlPlane, pod_list

        selector = unquote(path.partition("labelSelector=")[2])
        return 200, json.dumps(pod_list(ControlPlane(), self.index, selector)).encode()


def filled_table(clusters: int) -> tuple[Any, Any, tuple[Any, ...]]:
    """(table, check, families): ``clusters`` probed clusters and their checks' results."""
    from exporter.controlplane.check import ControlPlaneCheck
    from exporter.expose.snapshot import declared_families
    from exporter.model import ProbeResult
    from exporter.state import ClusterTable
    from fleetwatch.discovery.clusters import Cluster, Discovery

    check = ControlPlaneCheck()
    families = declared_families([check.families])
    table = ClusterTable()
    keep = _keeper(families)
    fleet = tuple(
        Cluster(f"fleet-{i:05d}", f"https://127.0.{i // 250}.{i % 250 + 1}:6443",
                f"/run/fleet/shard-{i // 5000}.yaml", f"fleet-{i:05d}")
        for i in range(clusters)
    )  # fmt: skip
    table.apply_discovery(Discovery(fleet, ()), {c.kubeconfig_secret_ref: True for c in fleet})

    async def run_checks() -> None:
        now = time.time()
        for i, cluster in enumerate(fleet):
            probe = ProbeResult(True, None, 0.0008 + i * 1e-7, 200)
            table.record(cluster.name, probe, now)
            result = await check.run(cluster, _KubeSystem(i), probe)  # type: ignore[arg-type]
            _set_checks(table, cluster.name, result, keep)

    asyncio.run(run_checks())
    return table, check, families


def _keeper(families: Any) -> Any:
    """What the table keeps check results with, where the code measured takes one."""
    try:
        from exporter.expose.encodings import Encoder
    except ImportError:
        return None
    return Encoder(families) if hasattr(Encoder, "keep") else None


def _set_checks(table: Any, name: str, result: Any, keep: Any) -> None:
    if keep is not None:  # one outcome per check, None included
        table.set_checks(name, [result], keep)
    else:
        table.set_checks(name, [result] if result is not None else [])


def held_objects(roots: Iterable[object]) -> dict[str, Any]:
    """Distinct objects reachable from ``roots`` (not through types, modules, functions).

    What keeping ``roots`` costs: count, how many the collector tracks (each full
    collection walks those), shallow MiB, and the most numerous types.
    """
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    by_type: dict[str, int] = {}
    tracked = 0
    size = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        by_type[type(obj).__name__] = by_type.get(type(obj).__name__, 0) + 1
        tracked += gc.is_tracked(obj)
        size += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    top = dict(sorted(by_type.items(), key=lambda kv: kv[1], reverse=True)[:8])
    return {"objects": len(seen), "tracked": tracked, "mib": round(size / 2**20, 2), "top": top}


def check_memory(states: Iterable[Any], checks: Iterable[Any]) -> list[object]:
    """The roots of what is kept for the check results: each cluster's results in the
    table, the values of each check's per-cluster memories, and (as built before r3) the
    exposition's caches of rendered lines."""
    from exporter.expose import render as exposition

    roots: list[object] = [s.checks for s in states]
    roots += [s.kept for s in states if hasattr(s, "kept")]
    for check in checks:
        for memory in vars(check).values():
            if isinstance(memory, dict):
                roots.extend(memory.values())
    for cache in ("_check_lines", "_sd_groups"):  # the exposition before r3
        kept = getattr(exposition, cache, None)
        if isinstance(kept, dict):
            roots.extend(kept.items())
    return roots


def bench_size(clusters: int, levels: list[int], runs: int) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.expose import render as exposition
    from exporter.expose.snapshot import CycleStats, build_snapshot
    from exporter.model import CycleSettings, ProbeResult
    from fleetwatch.common.version import register_process_metrics

    table, check, families = filled_table(clusters)
    held = held_objects(check_memory(table.states.values(), [check]))
    held["per_cluster"] = round(held["objects"] / clusters, 2)
    held["tracked_per_cluster"] = round(held["tracked"] / clusters, 2)
    process = register_process_metrics(CollectorRegistry())
    settings = CycleSettings(interval=60, timeout=10, concurrency=64)
    stats = CycleStats(cycles_total=3, cycle_duration=4.2, last_cycle_end=time.time())
    out: dict[str, Any] = {"clusters": clusters, "check_results_held": held, "levels": {}}
    with machine_load() as load:
        # The phase before: what a rendering may reuse from (the same check results).
        earlier = build_snapshot(table, families, stats, settings)
        now = time.time()
        for i, name in enumerate(table.states):  # the next probes: new durations and times
            table.record(name, ProbeResult(True, None, 0.0009 + i * 1e-7, 200), now)
        snap_cpu = []
        for _ in range(runs):
            t0 = time.thread_time()
            snap = build_snapshot(table, families, stats, settings)
            snap_cpu.append(time.thread_time() - t0)
        out["snapshot_cpu_s"] = summary(snap_cpu)
        for level in levels:
            previous = exposition.render(earlier, generate_latest(process), level)
            fresh: list[float] = []
            reusing: list[float] = []
            for _ in range(runs):
                for times, last in ((fresh, None), (reusing, previous)):
                    gc.collect()  # each run starts alike: no collection debt of the one before
                    t0 = time.thread_time()
                    rendered = exposition.render(snap, generate_latest(process), level, last)
                    times.append(time.thread_time() - t0)
            t0 = time.thread_time()
            plain = sum(len(c) for c in rendered.metrics.chunks())
            inflate = time.thread_time() - t0
            assert plain == rendered.metrics.size
            out["levels"][str(level)] = {
                "render_fresh_cpu_s": summary(fresh),
                "render_reusing_cpu_s": summary(reusing),
                "metrics_plain_bytes": rendered.metrics.size,
                "metrics_gzip_bytes": len(rendered.metrics.gzip),
                "sd_plain_bytes": rendered.sd_control_plane.size,
                "sd_gzip_bytes": len(rendered.sd_control_plane.gzip),
                "plain_scrape_cpu_s": round(inflate, 4),
            }
        for part, fn in (("text", exposition.render_metrics), ("sd", exposition.render_sd)):
            t0 = time.thread_time()
            fn(snap)
            out[f"{part}_only_cpu_s"] = round(time.thread_time() - t0, 4)
    out["load"] = load
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 6])
    parser.add_argument("--runs", type=int, default=5, help="renderings per level")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    results = {str(n): bench_size(n, args.levels, args.runs) for n in args.clusters}
    write_result("render", {"sizes": results}, args.out)
    return results


if __name__ == "__main__":
    main()
