"""Probe cycle at fleet scale: wall time, CPU seconds per probe, peak RSS, hung clusters.

The stand-in fleet runs in its own process (``bench.fleet_server``); the exporter side
runs in a worker process of its own (``--worker``), so each side's CPU and memory are
its own. The worker drives the exporter's real ``Monitor`` (discovery, credentials, the
probe cycle and the rendering of ``/metrics`` each cycle does) against the fleet's
kubeconfig: one first cycle (new TLS connections, credentials built) and then steady
cycles (kept-alive connections), each timed in wall and CPU seconds.

Run: ``.venv/bin/python -m bench.probe_cycle --clusters 1000 10000 --runs 3``
and, for hung clusters, ``--hang-fraction 0.1 --timeout 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    busy_processes,
    cpu_seconds,
    machine_load,
    memory_kib,
    summary,
    write_result,
)
from bench.fleet_server import start_fleet
from bench.render import check_memory, held_objects

# --- the worker: the exporter side, alone in its process ------------------------------


async def _cycles(
    kubeconfig: Path,
    is_dir: bool,
    steady: int,
    probe_timeout: float,
    concurrency: int | None,
    fleet_pids: list[int],
    variant: str,
    profile_dir: Path | None = None,
    with_checks: bool = True,
    max_idle: int | None = None,
    every: int = 1,
    interval: float = 0.0,
) -> dict[str, Any]:
    from exporter.controlplane.check import build_checks
    from exporter.cycle import Monitor
    from exporter.expose import render as exposition
    from exporter.expose.snapshot import Snapshot
    from exporter.model import CycleSettings
    from exporter.net.kubeclient import install_patches
    from exporter.settings import DEFAULT_CONCURRENCY
    from fleetwatch.discovery import Discoverer

    install_patches()  # as `fleetwatch exporter` does at start

    rendered_bytes = 0
    render_cpu = 0.0  #: CPU seconds of rendering /metrics (a worker thread), this cycle
    last: Any = None  #: the last rendering (the next one may reuse what did not change)

    def render(snap: Snapshot) -> Any:
        nonlocal render_cpu
        t0 = time.thread_time()
        rendered = _render(exposition, snap, last)
        render_cpu += time.thread_time() - t0
        return rendered

    published_at = 0.0  #: perf_counter when the last publication was in place

    async def publish(snap: Snapshot) -> None:
        nonlocal rendered_bytes, last, published_at
        last = await asyncio.to_thread(render, snap)
        rendered_bytes = _plain_size(last)
        published_at = time.perf_counter()

    extra: dict[str, Any] = {}
    if max_idle is not None:  # the exporter's bound on idle kept-alive connections
        extra["max_idle_connections"] = max_idle
    settings = CycleSettings(
        interval=interval or max(60.0, probe_timeout),
        timeout=probe_timeout,
        concurrency=concurrency or DEFAULT_CONCURRENCY,
        **extra,
    )
    cycles: list[dict[str, Any]] = []
    # A sharded fleet writes one kubeconfig per shard into a folder (KUBECONFIG_DIR).
    discoverer = Discoverer(None, kubeconfig) if is_dir else Discoverer(kubeconfig, None)
    # The checks `fleetwatch exporter` always runs after each probe (kube-system pods and
    # nodes: the control-plane view), unless --no-checks asks for the probe alone.
    checks = build_checks(None, every) if with_checks else []
    # The collector's policy `fleetwatch exporter` installs (fleetwatch.common.gcpolicy, r3 on),
    # unless the variant asks for CPython's defaults.
    policy = _collector_policy() if variant == "keepalive" else None
    async with Monitor(settings, discoverer, publish, checks) as monitor:
        t0 = time.perf_counter()
        for i in range(1 + steady):
            if interval and i > 0:
                # On schedule, as `fleetwatch exporter` runs them: the next cycle starts an
                # interval after the last one started, once the reconnections of its
                # timed-out clusters have ended (Monitor.until_next_cycle).
                await monitor.until_next_cycle(time.perf_counter() - t0)
            before = monitor.probes_started
            render_cpu = 0.0
            fleet0 = _fleet_cpu(fleet_pids) or 0.0
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            if variant == "gcfreeze" and i == 1:
                # Experiment: move everything the first cycle built (connections, TLS
                # objects, parsed kubeconfigs) out of the collector's sight.
                gc.collect()
                gc.freeze()
            profiler = _profiler(profile_dir, i)
            collections = _GcWatch()
            with collections:
                await monitor.run_cycle()
                if policy is not None:  # run_forever calls it after each cycle, timed here
                    policy.cycle_ended()
            _profile_done(profiler, profile_dir, i)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            # The cycle's results are on /metrics from its last publication on; what the
            # cycle does after it (housekeeping, starting reconnections) is in ``wall``.
            published = published_at - t0
            fleet_now = _fleet_cpu(fleet_pids)
            fleet_cpu = fleet_now - fleet0 if fleet_pids and fleet_now is not None else None
            probes = monitor.probes_started - before
            ok = sum(1 for s in monitor.states.values() if s.last is not None and s.last.success)
            reasons: dict[str, int] = {}
            for s in monitor.states.values():
                if s.last is not None and not s.last.success and s.last.reason is not None:
                    reasons[s.last.reason.value] = reasons.get(s.last.reason.value, 0) + 1
            cycles.append(
                {
                    "kind": "first" if i == 0 else "steady",
                    "wall_s": round(wall, 3),
                    "published_s": round(published, 3),
                    "cpu_s": round(cpu, 3),
                    "probes": probes,
                    "ok": ok,
                    "failed": reasons,
                    "cpu_ms_per_probe": round(cpu / probes * 1000, 4) if probes else None,
                    "probes_per_cpu_s": round(probes / cpu, 1) if cpu else None,
                    "metrics_bytes": rendered_bytes,
                    "render_cpu_s": round(render_cpu, 3),
                    "fleet_cpu_s": None if fleet_cpu is None else round(fleet_cpu, 3),
                    "rss_mib": _rss_mib(),
                    "sockets": _sockets(),
                    "errors_emfile": _emfile_seen(),
                    "gc": collections.summary(),
                }
            )
        mem = _memory()  # before the measurements below, which allocate themselves
        render_parts = _render_parts(monitor.snapshot(), last)
        objects = _python_objects()
        held = held_objects(check_memory(monitor.states.values(), monitor.checks))
        held["per_cluster"] = round(held["objects"] / max(1, len(monitor.states)), 2)
        held["tracked_per_cluster"] = round(held["tracked"] / max(1, len(monitor.states)), 2)
    return {
        "cycles": cycles,
        "render_parts_s": render_parts,
        "python_objects": objects,
        "check_results_held": held,
        "rss_peak_mib": round(mem.get("VmHWM", 0) / 1024, 1),
        "rss_end_mib": round(mem.get("VmRSS", 0) / 1024, 1),
        "concurrency": settings.concurrency,
        "timeout_s": probe_timeout,
        "variant": variant,
        "checks": with_checks,
        "max_idle": max_idle,
        "controlplane_every": every,
    }


class _GcWatch:
    """Garbage collections during one cycle: how many of each generation, and their time.

    A full collection walks every tracked object, so at fleet scale its count per cycle
    is a cost of its own (round 2: 2 million tracked objects, a second per collection).
    """

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            generation = info["generation"]
            self.counts[generation] += 1
            self.seconds[generation] += time.perf_counter() - self._t0

    def __enter__(self) -> _GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, Any]:
        return {
            "collections": list(self.counts),
            "seconds": [round(s, 3) for s in self.seconds],
        }


def _python_objects(top: int = 12) -> dict[str, Any]:
    """Live Python objects the collector tracks, by type: count and shallow MiB (getsizeof).

    Shallow sizes undercount containers' contents that are not tracked (str, bytes, int
    are counted through the containers' referents below), so strings and bytes are added
    from the referents of tracked objects, each counted once.
    """
    gc.unfreeze()  # the collector policy's frozen objects are alive too
    gc.collect()
    counts: dict[str, list[float]] = {}
    seen: set[int] = set()
    tracked = gc.get_objects()  # what each full collection walks
    for obj in tracked:
        for item in (obj, *gc.get_referents(obj)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            entry = counts.setdefault(type(item).__name__, [0, 0.0])
            entry[0] += 1
            entry[1] += sys.getsizeof(item)
    total = sum(v[1] for v in counts.values())
    ranked = sorted(counts.items(), key=lambda kv: kv[1][1], reverse=True)[:top]
    return {
        "total_mib": round(total / 2**20, 1),
        "objects": sum(int(v[0]) for v in counts.values()),
        "tracked": len(tracked),
        "top": {k: {"count": int(v[0]), "mib": round(v[1] / 2**20, 1)} for k, v in ranked},
    }


def _collector_policy() -> Any:
    """The exporter's collector policy, where the code measured has one (r3 on)."""
    try:
        from fleetwatch.common.gcpolicy import CollectorPolicy
    except ImportError:
        return None
    policy = CollectorPolicy()
    if hasattr(policy, "install"):
        policy.install()
    try:  # and glibc's mmap threshold, as `fleetwatch exporter` sets it (r3 on)
        from exporter import mallocpolicy
    except ImportError:
        return policy
    mallocpolicy.install()
    return policy


def _render(exposition: Any, snap: Any, previous: Any) -> Any:
    """One rendering as the server does it: reusing from ``previous`` what did not change
    (the exposition of r3); the exposition before r3 took no ``previous``."""
    if "previous" in inspect.signature(exposition.render).parameters:
        return exposition.render(snap, previous=previous)
    return exposition.render(snap)


def _plain_size(rendered: Any) -> int:
    """Bytes of the plain /metrics (before r3 the plain body itself was kept)."""
    size = getattr(rendered.metrics, "size", None)
    return int(size) if size is not None else len(rendered.metrics)


def _render_parts(snap: Any, last: Any) -> dict[str, float]:
    """CPU seconds of one rendering of the last snapshot (``exposition.render``): whole and
    fresh, whole reusing the last rendering as the server does, and its parts."""
    import gzip

    from exporter.expose import render as exposition

    t0 = time.thread_time()
    exposition.render(snap)
    t1 = time.thread_time()
    _render(exposition, snap, last)
    t2 = time.thread_time()
    body = exposition.render_metrics(snap)
    t3 = time.thread_time()
    gzip.compress(body, compresslevel=6, mtime=0)
    t4 = time.thread_time()
    gzip.compress(body, compresslevel=1, mtime=0)
    t5 = time.thread_time()
    exposition.render_sd(snap)
    t6 = time.thread_time()
    return {
        "render": round(t1 - t0, 3),
        "render_reusing_last": round(t2 - t1, 3),
        "text": round(t3 - t2, 3),
        "gzip6": round(t4 - t3, 3),
        "gzip1": round(t5 - t4, 3),
        "sd": round(t6 - t5, 3),
    }


def _memory() -> dict[str, int]:
    """VmRSS/VmHWM of this process; empty while it is out of descriptors."""
    try:
        return memory_kib(os.getpid())
    except OSError:
        return {}


def _rss_mib() -> float | None:
    mem = _memory()
    return round(mem["VmRSS"] / 1024, 1) if mem else None


def _emfile_seen() -> bool:
    """Whether this process is (still) out of descriptors right now."""
    try:
        with open("/proc/self/stat"):
            return False
    except OSError:
        return True


def _fleet_cpu(pids: list[int]) -> float | None:
    """CPU seconds of the fleet processes; None when this process is out of descriptors."""
    try:
        return sum(cpu_seconds(p) for p in pids)
    except OSError:
        return None


def _sockets() -> int | None:
    """Open sockets of this process (kept-alive connections, mostly)."""
    try:
        return sum(1 for fd in os.listdir("/proc/self/fd") if _is_socket(fd))
    except OSError:
        return None


def _is_socket(fd: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    except OSError:
        return False


def _profiler(profile_dir: Path | None, cycle: int) -> Any:
    """pyinstrument on the second cycle (the first steady one): main thread, where it runs."""
    if profile_dir is None or cycle != 1:
        return None
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    return profiler


def _profile_done(profiler: Any, profile_dir: Path | None, cycle: int) -> None:
    if profiler is None or profile_dir is None:
        return
    profiler.stop()
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    (profile_dir / f"steady-cycle-{cycle}.txt").write_text(text)


def worker_main(args: argparse.Namespace) -> None:
    result = asyncio.run(
        _cycles(
            args.kubeconfig,
            args.kubeconfig.is_dir(),
            args.steady,
            args.timeout,
            args.concurrency,
            [int(p) for p in args.fleet_pid.split(",")] if args.fleet_pid else [],
            args.variant,
            args.profile_dir,
            not args.no_checks,
            args.max_idle,
            args.controlplane_every,
            args.interval,
        )
    )
    print(json.dumps(result))


# --- the driver: fleet process + worker process, several runs -------------------------


def run_worker(
    kubeconfig: Path,
    steady: int,
    timeout: float,
    concurrency: int | None,
    limit_s: float,
    fleet_pids: list[int] | None = None,
    variant: str = "keepalive",
    with_checks: bool = True,
    max_idle: int | None = None,
    profile_dir: Path | None = None,
    every: int = 1,
    interval: float = 0.0,
    load: int = 0,
) -> dict[str, Any]:
    """One worker process (a fresh exporter side: new connections, no cached credentials).

    ``load``: that many busy processes run on the machine meanwhile ("at load").
    """
    argv = [
        sys.executable, "-m", "bench.probe_cycle", "--worker",
        "--kubeconfig", str(kubeconfig), "--steady", str(steady),
        "--timeout", str(timeout), "--variant", variant,
    ]  # fmt: skip
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if fleet_pids:
        argv += ["--fleet-pid", ",".join(map(str, fleet_pids))]
    if not with_checks:
        argv.append("--no-checks")
    if max_idle is not None:
        argv += ["--max-idle", str(max_idle)]
    if profile_dir is not None:
        argv += ["--profile-dir", str(profile_dir)]
    if every != 1:
        argv += ["--controlplane-every", str(every)]
    if interval:
        argv += ["--interval", str(interval)]
    with busy_processes(load), machine_load() as measured:
        out = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=limit_s, check=False
        )
    if out.returncode != 0:
        raise RuntimeError(f"probe-cycle worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = measured
    result["busy_processes"] = load
    return result


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs of the first cycle and of the steady cycles."""
    first = [r["cycles"][0] for r in runs]
    steady = [c for r in runs for c in r["cycles"][1:]]
    out: dict[str, Any] = {
        "first_wall_s": summary(_numbers(c["wall_s"] for c in first)),
        "first_cpu_ms_per_probe": summary(_numbers(c["cpu_ms_per_probe"] for c in first)),
        "first_probes_per_cpu_s": summary(_numbers(c["probes_per_cpu_s"] for c in first)),
        "rss_peak_mib": summary(_numbers(r["rss_peak_mib"] for r in runs)),
    }
    if steady:
        out["steady_wall_s"] = summary(_numbers(c["wall_s"] for c in steady))
        out["steady_cpu_ms_per_probe"] = summary(_numbers(c["cpu_ms_per_probe"] for c in steady))
        out["steady_probes_per_cpu_s"] = summary(_numbers(c["probes_per_cpu_s"] for c in steady))
    return out


def _numbers(values: Iterable[float | None]) -> list[float]:
    """The measured values (a cycle that probed nothing has no CPU per probe)."""
    return [v for v in values if v is not None]


def bench_size(
    tmp: Path,
    clusters: int,
    hang: int,
    runs: int,
    steady: int,
    timeout: float,
    concurrency: int | None,
    variant: str = "keepalive",
    with_checks: bool = True,
    max_idle: int | None = None,
    profile_dir: Path | None = None,
    every: int = 1,
    interval: float = 0.0,
    load: int = 0,
    credential: str = "client_cert_data",
    hang_mode: str = "hang",
) -> dict[str, Any]:
    fleet = start_fleet(
        tmp / f"fleet-{clusters}-{hang}", clusters, hang, credential, hang_mode=hang_mode
    )
    try:
        limit = 300 + clusters / 10 + (1 + steady) * timeout * (2 + hang / 64)
        each = [
            run_worker(
                fleet.kubeconfig_dir,
                steady,
                timeout,
                concurrency,
                limit,
                fleet.pids,
                variant,
                with_checks,
                max_idle,
                profile_dir,
                every,
                interval,
                load,
            )
            for _ in range(runs)
        ]
    finally:
        fleet.stop()
    return {
        "clusters": clusters,
        "hanging": hang,
        "hang_mode": hang_mode,
        "variant": variant,
        "checks": with_checks,
        "interval_s": interval,
        "busy_processes": load,
        "credential": credential,
        "runs": each,
        "summary": summarise(each),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--hang-fraction", type=float, default=0.0)
    parser.add_argument(
        "--hang-mode", choices=("hang", "frozen"), default="hang",
        help="how they hang: TLS done and no answer, or TCP accepted and no TLS (frozen)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="fresh worker processes per size")
    parser.add_argument("--steady", type=int, default=2, help="steady cycles after the first")
    parser.add_argument("--timeout", type=float, default=10.0, help="probe timeout, seconds")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument(
        "--variant",
        choices=("keepalive", "gcfreeze", "defaultgc"),
        default="keepalive",
        help="keepalive: the exporter as built (its collector policy included); defaultgc: "
        "the same with CPython's collector defaults; gcfreeze: round 2's experiment "
        "(freeze once after the first cycle). No keep-alive at all is --max-idle 0",
    )
    parser.add_argument(
        "--no-checks",
        action="store_true",
        help="probe only: without the control-plane checks the exporter runs after each probe",
    )
    parser.add_argument(
        "--max-idle",
        type=int,
        default=None,
        help="the exporter's bound on idle kept-alive connections (default: one per cluster)",
    )
    parser.add_argument(
        "--controlplane-every",
        type=int,
        default=1,
        help="kube-system read on every K-th probe: --controlplane.interval / --probe.interval "
        "(default 1: every probe, the exporter's default)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="start a cycle every INTERVAL seconds, as the exporter does (default 0: one "
        "after the other, the worst case for what a cycle leaves running)",
    )
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        help="run that many busy processes on the machine meanwhile (the 'at load' case)",
    )
    parser.add_argument(
        "--credential",
        default="client_cert_data",
        help="the fleet's kubeconfig credential kind: client_cert_data (one certificate "
        "for every cluster, one TLS context in the exporter) or client_cert_data_each (a "
        "certificate per cluster, a context per cluster, as in a real fleet)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--profile-dir",
        type=Path,
        default=None,
        help="pyinstrument profile (main thread) of the first steady cycle written here",
    )
    parser.add_argument("--fleet-pid", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args)
        return {}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        for n in args.clusters:
            hang = round(n * args.hang_fraction)
            results[str(n)] = bench_size(
                Path(tmpdir),
                n,
                hang,
                args.runs,
                args.steady,
                args.timeout,
                args.concurrency,
                args.variant,
                not args.no_checks,
                args.max_idle,
                args.profile_dir,
                args.controlplane_every,
                args.interval,
                args.load,
                args.credential,
                args.hang_mode,
            )
    name = "probe_cycle_hang" if args.hang_fraction else "probe_cycle"
    if args.hang_fraction and args.hang_mode != "hang":
        name += f"_{args.hang_mode}"
    if args.variant != "keepalive":
        name += f"_{args.variant}"
    if args.no_checks:
        name += "_nochecks"
    if args.max_idle is not None:
        name += f"_maxidle{args.max_idle}"
    if args.controlplane_every != 1:
        name += f"_cpevery{args.controlplane_every}"
    if args.load:
        name += f"_load{args.load}"
    if args.credential != "client_cert_data":
        name += f"_{args.credential}"
    write_result(name, {"sizes": results, "timeout_s": args.timeout}, args.out)
    return results


if __name__ == "__main__":
    main()
