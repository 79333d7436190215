"""Requests per minute a hostile management API gets from fleetwatch's list+watch (issue 31).

Each mode of a management API that fails every watch (or every request) is armed on the
stand-in (``python -m fleetwatch.standin management``, this checkout's: its faults are the
modes) for ``--seconds`` (60), while fleetwatch's reflectors run against it in worker
processes of their own, one per target:

- ``discovery``: ``fleetwatch.discovery.apisource``'s informer, the three Secret kinds cluster-wide
  (three reflectors), as the exporter and the reactor run it;
- ``cd``: the CD watches of ``--cd.flux`` (Kustomizations and HelmReleases: two reflectors).

Each target has its own stand-in (so neither's hammering slows the other's server) and
both run at once. Per mode and target: LISTs and WATCHes per minute, as the stand-in
counted them, and the worker's CPU seconds over the window. ``/proc/loadavg`` (1-minute)
is read at the start and the end of each window: the machine is shared.

The code measured is a checkout: ``--after`` (default: this one) and ``--before`` (a
commit, default the merge base with ``main``, checked out with ``git worktree add`` into
a temporary folder and removed at the end: the old commit itself, no frozen copy). The
worker is a short program given to ``python -c`` with ``PYTHONPATH`` at that checkout: it
uses only what both versions have (``Informer``, ``KubeApi``, ``from_kubeconfig``,
``watch_specs``, ``cd_watches``).

    python -m bench.hostile_api [--seconds 60] [--modes 410-event,...] [--before REV]
        [--only after]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, code_version, cpu_seconds, write_result
from fleetwatch.standin.management.process import ManagementProcess

#: mode -> the stand-in fault that makes it (tests/helpers/discovery_hostile.py alike)
MODES: dict[str, dict[str, Any]] = {
    "410-event": {"kind": "watch_error"},
    "410-http": {"kind": "error", "status": 410, "verb": "watch"},
    "error-event": {"kind": "watch_error", "status": 500},
    "closed-at-once": {"kind": "watch_close"},
    "garbage": {"kind": "watch_garbage"},
    "500": {"kind": "error", "status": 500},
}

#: target -> the resources its reflectors list and watch
RESOURCES = {
    "discovery": ("secrets",),
    "cd": ("kustomizations.kustomize.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io"),
}

#: The worker: waits for "go" on stdin, then runs the target's informer until SIGTERM.
WORKER = """
import asyncio, logging, sys
from pathlib import Path
from fleetwatch.discovery.secretwatch import watch_specs
from fleetwatch.kube.informer import Informer, InformerSettings
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.discovery.kubecreds import from_kubeconfig

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
target, kubeconfig = sys.argv[1], sys.argv[2]
if target == "cd":
    from reactor.cd.settings import CdSettings
    from reactor.cd.watch import cd_watches, stored
    specs, transform = cd_watches(CdSettings(flux=True)), stored
else:
    from fleetwatch.kube.objects import slim
    specs, transform = watch_specs("fleetwatch.io/kubeconfig"), slim
print("ready", flush=True)
sys.stdin.readline()

async def main():
    async with KubeApi(from_kubeconfig([Path(kubeconfig)], "bench")) as api:
        await Informer(api, specs, InformerSettings(), transform=transform).run()

asyncio.run(main())
"""


def fleet() -> list[dict[str, Any]]:
    """Two Argo CD cluster Secrets and two Flux objects: something to list."""

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    config = json.dumps({"bearerToken": "not-a-secret", "tlsClientConfig": {"insecure": True}})
    objects: list[dict[str, Any]] = []
    for name in ("c1", "c2"):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"cluster-{name}",
                    "namespace": "argocd",
                    "labels": {"argocd.argoproj.io/secret-type": "cluster"},
                },
                "data": {"name": b64(name), "server": b64(f"https://{name}.test:6443")},
            }
        )
        objects[-1]["data"]["config"] = b64(config)
        objects.append(
            {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": f"apps-{name}", "namespace": "flux-system"},
                "spec": {
                    "interval": "10m",
                    "prune": True,
                    "sourceRef": {"kind": "GitRepository", "name": "fleet"},
                    "kubeConfig": {"secretRef": {"name": f"{name}-kubeconfig"}},
                },
            }
        )
    return objects


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_mode(
    checkout: Path, mode: str, seconds: float, servers: dict[str, ManagementProcess], logs: Path
) -> dict[str, Any]:
    """One window: every target's worker on ``checkout`` against its own stand-in."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    workers: dict[str, subprocess.Popen[str]] = {}
    for target, mgmt in servers.items():
        mgmt.clear_faults()
        for resource in RESOURCES[target]:
            mgmt.arm_fault(resource=resource, **MODES[mode])
        argv = [sys.executable, "-c", WORKER, target, str(mgmt.kubeconfig)]
        with (logs / f"{checkout.name}-{mode}-{target}.log").open("w") as err:
            workers[target] = subprocess.Popen(
                argv, cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True,
            )  # fmt: skip
    try:
        for worker in workers.values():
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for mgmt in servers.values():
            mgmt.control("DELETE", "/requests")
        load_start = loadavg()
        cpu0 = {t: cpu_seconds(w.pid) for t, w in workers.items()}
        t0 = time.monotonic()
        for worker in workers.values():
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        time.sleep(seconds)  # the window: a rate is counted over it
        wall = time.monotonic() - t0
        cpu = {t: cpu_seconds(w.pid) - cpu0[t] for t, w in workers.items()}
        counts = {t: m.counts() for t, m in servers.items()}
        load_end = loadavg()
    finally:
        for worker in workers.values():
            worker.send_signal(signal.SIGTERM)
        for worker in workers.values():
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
    out: dict[str, Any] = {"mode": mode, "wall_s": round(wall, 1), "load": [load_start, load_end]}
    for target, resources in RESOURCES.items():
        if target not in servers:
            continue
        per_minute = 60.0 / wall
        lists = sum(counts[target].get(f"list {r}", 0) for r in resources)
        watches = sum(counts[target].get(f"watch {r}", 0) for r in resources)
        out[target] = {
            "reflectors": 3 if target == "discovery" else len(resources),
            "lists_per_min": round(lists * per_minute, 1),
            "watches_per_min": round(watches * per_minute, 1),
            "cpu_s": round(cpu[target], 2),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| mode | target (reflectors) | before LIST/min | before WATCH/min | before CPU s |"
        " before load | after LIST/min | after WATCH/min | after CPU s | after load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = {(r["version"], r["mode"]): r for r in result["runs"]}
    for mode in result["modes"]:
        for target in RESOURCES:
            cells = [mode, f"{target} ({3 if target == 'discovery' else 2})"]
            for version in ("before", "after"):
                run = runs.get((version, mode))
                if run is None or target not in run:
                    cells += ["-"] * 4
                    continue
                t = run[target]
                load = "-".join(f"{x:.1f}" for x in run["load"])
                cells += [
                    f"{t['lists_per_min']:,.0f}",
                    f"{t['watches_per_min']:,.0f}",
                    f"{t['cpu_s']:.2f}",
                    load,
                ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each window (s)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated")
    parser.add_argument("--before", default=None, help="commit (default: merge base with main)")
    parser.add_argument("--after", type=Path, default=REPO, help="checkout (default: this one)")
    parser.add_argument("--only", choices=("before", "after"), default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {list(MODES)}")
    before = args.before or _git("merge-base", "HEAD", "main")
    result: dict[str, Any] = {
        "seconds": args.seconds,
        "modes": modes,
        "before": _git("log", "-1", "--format=%h %s", before)[:100],
        "code": code_version(),
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="fw-bench-hostile-") as tmpdir:
        tmp = Path(tmpdir)
        checkouts: dict[str, Path] = {}
        if args.only != "after":
            checkouts["before"] = tmp / "before"
            _git("worktree", "add", "--detach", str(checkouts["before"]), before)
        if args.only != "before":
            checkouts["after"] = args.after.resolve()
        servers = {t: ManagementProcess(tmp / f"mgmt-{t}").start() for t in RESOURCES}
        try:
            for mgmt in servers.values():
                mgmt.seed(fleet())
            for mode in modes:
                for version, checkout in checkouts.items():
                    run = run_mode(checkout, mode, args.seconds, servers, tmp)
                    run["version"] = version
                    result["runs"].append(run)
                    print(json.dumps(run), flush=True)
        finally:
            for mgmt in servers.values():
                mgmt.stop()
            if "before" in checkouts:
                _git("worktree", "remove", "--force", str(checkouts["before"]))
    write_result("hostile_api", result, args.out)
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
