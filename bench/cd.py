"""The CD integration at fleet size: 10,000 Flux and Argo CD objects over 1,000 clusters.

Every part a process of its own: the stand-in management cluster (``python -m
fleetwatch.standin management``) holding a Cluster API kubeconfig Secret per cluster and
Argo CD's cluster Secret of each cluster with Applications (Argo CD resolves their
``destination.name`` against its own Secrets only; discovery keeps Argo CD's and makes
Cluster API's its alias; their servers are never probed: the reactor does not probe) and
the objects, and
``fleetwatch reactor`` on SQLite with ``--discovery.kubernetes --cd.flux --cd.argocd``,
driven by webhooks as Alertmanager would send them. One cluster (``big``) carries
``--big`` objects, the others share the rest; of each ten objects, eight are
Kustomizations, one a HelmRelease and one an Application. Measured from outside (the
reactor's ``/metrics``, the stand-in's request counts and objects, ``/proc``):

(a) **mirror**: the objects created in one call once the reactor knows the clusters;
    seconds from the call's start and from its return until the reactor's pass has them
    all (``fleetwatch_reactor_cd_objects`` sums to N, none unresolved);
(b) **relist**: the reactor restarted (its database keeps clusters and apps); seconds
    until its first list of the N objects (pages of 500) and the pass after it are done;
(c) **outage**: FleetClusterOffline for ``big``; seconds from the notification (the POST's
    start) until every one of its objects is paused (``..._cd_actions_total{action="pause",
    result="applied"}``), then checked in the stand-in: exactly those paused with the
    mark, one patch each, nothing else written;
(d) **recovery**: FleetClusterOnline; the same until all resumed;
(e) **resync at rest**: the reactor's CPU over ``--rest`` seconds with nothing changing,
    with ``--cd.resync-interval`` set to ``--resync``: per minute, and per pass.

Run: ``.venv/bin/python -m bench.cd`` (10,000 objects, 1,000 clusters, big 1,000: a few
minutes) or ``--quick`` (400 objects, 20 clusters, big 100; the smoke test's mode).
Results: ``bench/out/cd.json`` (``cd_quick.json``); the table is printed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.common import cpu_seconds_fine, machine_load, write_result
from fleetwatch.cli import wiring
from fleetwatch.cli.demo_cd import (
    ObjectReader,
    application,
    argocd_cluster_secret,
    cluster_secret,
    flux_object,
)
from fleetwatch.common import metricnames
from fleetwatch.procs import ManagedProcess
from fleetwatch.standin.management import ManagementProcess
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

ACTIONS = metricnames.total(metricnames.REACTOR_CD_ACTIONS)


@dataclass(frozen=True)
class Plan:
    objects: int
    clusters: int
    big: int
    resync: float
    rest: float


def cluster_name(index: int) -> str:
    return f"c{index:04d}"


def kubeconfig(cluster: str) -> str:
    """A kubeconfig of one context; its server is never reached (the reactor does not probe)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": f"https://{cluster}.invalid"}}],
            "users": [{"name": cluster, "user": {"token": "bench-not-a-secret"}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
            "current-context": cluster,
        }
    )


def secrets_of(plan: Plan) -> list[dict[str, Any]]:
    """Cluster API's Secret of every cluster, Argo CD's of each its Applications name."""
    names = [cluster_name(i) for i in range(plan.clusters)]
    argocd = {
        o["spec"]["destination"]["name"] for o in objects_of(plan) if o["kind"] == "Application"
    }
    return [cluster_secret(n, kubeconfig(n)) for n in names] + [
        argocd_cluster_secret(n, kubeconfig(n)) for n in names if n in argocd
    ]


def objects_of(plan: Plan) -> list[dict[str, Any]]:
    """``big`` objects of cluster 0, the rest round-robin over the others."""
    out: list[dict[str, Any]] = []
    for i in range(plan.objects):
        index = 0 if i < plan.big else 1 + (i - plan.big) % (plan.clusters - 1)
        cluster, name = cluster_name(index), f"o{i:05d}"
        if i % 10 == 9:
            out.append(application(cluster, f"{cluster}-{name}"))
        elif i % 10 == 8:
            out.append(flux_object("HelmRelease", cluster, name))
        else:
            out.append(flux_object("Kustomization", cluster, name))
    return out


# --- the reactor, from outside ----------------------------------------------------------


class Reactor:
    """``fleetwatch reactor`` with the CD integration; its metrics and its webhook."""

    def __init__(self, root: Path, mgmt: ManagementProcess, resync: float) -> None:
        self.root = root
        self.token = secrets.token_urlsafe(24)
        self.token_file = root / "token"
        self.empty = root / "empty-kubeconfig.yaml"
        root.mkdir(parents=True, exist_ok=True)
        self.token_file.write_text(self.token + "\n")
        self.empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
        flags = f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}"
        self.extra = ["--discovery.kubernetes", flags, "--cd.flux", "--cd.argocd"]
        self.extra += [f"--cd.kubeconfig={mgmt.kubeconfig}", f"--cd.resync-interval={resync:g}"]
        self.proc: ManagedProcess | None = None
        self.url = ""

    def start(self) -> float:
        """Start; the monotonic time it was started at."""
        started = time.monotonic()
        self.proc, port = wiring.start_reactor(
            self.root,
            db_path=self.root / "fleetwatch.db",
            token_file=self.token_file,
            kubeconfig=self.empty,
            extra=self.extra,
        )
        self.url = f"http://127.0.0.1:{port}"
        return started

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return resp.read()

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = self.get("/metrics").decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def notify(self, *alerts: dict[str, Any]) -> None:
        body = json.dumps(webhook(*alerts)).encode()
        request = urllib.request.Request(
            self.url + "/alerts",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert resp.status == 200


def mirrored(got: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return sum(v for (name, _), v in got.items() if name == metricnames.REACTOR_CD_OBJECTS)


def applied(got: dict[tuple[str, tuple[tuple[str, str], ...]], float], action: str) -> float:
    return got.get((ACTIONS, (("action", action), ("result", "applied"))), 0.0)


def until(what: str, seconds: float, check: Callable[[], bool], step: float = 0.05) -> float:
    """Poll ``check`` until true; the monotonic time it first was."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds:g} s")
        time.sleep(step)
    return time.monotonic()


# --- the phases ---------------------------------------------------------------------------


def measure(tmp: Path, plan: Plan, mgmt: ManagementProcess) -> dict[str, Any]:
    big = cluster_name(0)
    t0 = time.perf_counter()
    mgmt.seed(secrets_of(plan), timeout=600)
    result: dict[str, Any] = {"secrets_seed_s": round(time.perf_counter() - t0, 2)}
    reactor = Reactor(tmp / "reactor", mgmt, plan.resync)
    reactor.start()
    try:
        until(
            "clusters discovered",
            300,
            lambda: len(json.loads(reactor.get("/clusters"))) >= plan.clusters,
            step=0.5,
        )
        # (a) the mirror
        objects = objects_of(plan)
        start = time.monotonic()
        mgmt.seed(objects, timeout=600)
        returned = time.monotonic()
        done = until(
            "all mirrored",
            600,
            lambda: mirrored(reactor.metrics()) >= plan.objects,
            step=0.1,
        )
        got = reactor.metrics()
        assert got[(metricnames.REACTOR_CD_UNRESOLVED, ())] == 0, "objects left unresolved"
        result["mirror"] = {
            "seed_call_s": round(returned - start, 2),
            "mirrored_after_start_s": round(done - start, 2),
            "mirrored_after_return_s": round(done - returned, 2),
        }
        # (b) a restart lists them all again
        reactor.stop()
        started = reactor.start()

        def relisted() -> bool:
            got = reactor.metrics()
            last = got.get((metricnames.REACTOR_CD_LAST_RESYNC, ()), 0.0)
            return last > 0 and mirrored(got) >= plan.objects

        result["relist_s"] = round(until("relisted", 600, relisted, step=0.1) - started, 2)
        reactor.notify(alert(ONLINE, big, 0))
        mgmt.control("DELETE", "/requests")
        # (c) the outage, (d) the recovery
        reader = ObjectReader(mgmt.kubeconfig, timeout=60)
        result["outage"] = _one_way(reactor, alert(OFFLINE, big, 5), "pause", plan.big)
        paused = [o for o in reader.objects() if o.paused]
        result["outage"]["exactly_those_paused"] = len(paused) == plan.big and all(
            o.cluster == big and o.mark is not None for o in paused
        )
        result["recovery"] = _one_way(reactor, alert(ONLINE, big, 10), "resume", plan.big)
        patches = {k: n for k, n in mgmt.counts().items() if k.startswith("patch ")}
        result["patches"] = patches
        result["patches_total"] = sum(patches.values())
        states = {(o.paused, o.mark) for o in reader.objects()}
        result["recovery"]["all_resumed"] = states == {(False, None)}
        # (e) resync at rest
        result["rest"] = _rest(reactor, plan)
    finally:
        reactor.stop()
    return result


def _one_way(reactor: Reactor, sent: dict[str, Any], action: str, count: int) -> dict[str, Any]:
    before = applied(reactor.metrics(), action)
    start = time.monotonic()
    reactor.notify(sent)
    returned = time.monotonic()
    done = until(
        f"{count} {action}d",
        120,
        lambda: applied(reactor.metrics(), action) - before >= count,
    )
    failed = {}
    for (name, labels), value in reactor.metrics().items():
        found = dict(labels)
        if name == ACTIONS and found["action"] == action and found["result"] != "applied":
            failed[found["result"]] = value
    return {
        "objects": count,
        "notification_s": round(returned - start, 3),
        "done_after_notification_s": round(done - start, 2),
        "not_applied": failed,
    }


def _rest(reactor: Reactor, plan: Plan) -> dict[str, Any]:
    time.sleep(1.0)  # let the recovery's last pass end before the window opens
    cpu0 = cpu_seconds_fine(reactor.pid)
    time.sleep(plan.rest)  # the window: nothing changes, the resyncs run
    cpu = cpu_seconds_fine(reactor.pid) - cpu0
    passes = plan.rest / plan.resync
    return {
        "window_s": plan.rest,
        "resync_interval_s": plan.resync,
        "cpu_s": round(cpu, 3),
        "cpu_s_per_pass": round(cpu / passes, 3),
        "cpu_ms_per_minute": round(cpu / plan.rest * 60_000),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 objects, 20 clusters, big 100")
    parser.add_argument("--objects", type=int, default=None, help="default 10000 (quick: 400)")
    parser.add_argument("--clusters", type=int, default=None, help="default 1000 (quick: 20)")
    parser.add_argument("--big", type=int, default=None, help="default 1000 (quick: 100)")
    parser.add_argument("--resync", type=float, default=None, help="default 10 s (quick: 2)")
    parser.add_argument("--rest", type=float, default=None, help="default 60 s (quick: 4)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    quick = args.quick
    plan = Plan(
        objects=args.objects or (400 if quick else 10_000),
        clusters=args.clusters or (20 if quick else 1_000),
        big=args.big or (100 if quick else 1_000),
        resync=args.resync or (2.0 if quick else 10.0),
        rest=args.rest or (4.0 if quick else 60.0),
    )
    if plan.clusters < 2 or plan.big >= plan.objects:
        parser.error("--clusters must be at least 2 and --big fewer than --objects")
    with tempfile.TemporaryDirectory(prefix="fw-bench-cd-") as tmpdir, machine_load() as load:
        tmp = Path(tmpdir)
        mgmt = ManagementProcess(tmp / "mgmt").start()
        try:
            result = measure(tmp, plan, mgmt)
        finally:
            mgmt.stop()
    result = {"plan": asdict(plan), **result, "machine": load}
    write_result("cd_quick" if quick else "cd", result, args.out)
    print(markdown(result))
    return result


def markdown(result: dict[str, Any]) -> str:
    """The table for bench/RESULTS.md."""
    plan = result["plan"]
    out, back, rest = result["outage"], result["recovery"], result["rest"]
    mirror = result["mirror"]
    return "\n".join(
        [
            f"{plan['objects']:,} objects over {plan['clusters']:,} clusters; the big one "
            f"carries {plan['big']:,}. The reactor on SQLite, the stand-in management cluster "
            "in its own process.",
            "",
            "| what | seconds |",
            "|---|---|",
            f"| the objects created (one call) | {mirror['seed_call_s']} |",
            f"| all mirrored, from the call's start | {mirror['mirrored_after_start_s']} |",
            f"| restart: first list (pages of 500) and pass | {result['relist_s']} |",
            f"| outage: {out['objects']:,} paused, from the notification | "
            f"{out['done_after_notification_s']} |",
            f"| recovery: {back['objects']:,} resumed, from the notification | "
            f"{back['done_after_notification_s']} |",
            f"| resync at rest, CPU per pass (every {rest['resync_interval_s']:g} s over "
            f"{rest['window_s']:g} s) | {rest['cpu_s_per_pass']} |",
            "",
            f"Patches: {result['patches_total']:,} ({result['patches']}); exactly the big "
            f"cluster's paused: {out['exactly_those_paused']}; all resumed: "
            f"{back['all_resumed']}; not applied: pause {out['not_applied']}, resume "
            f"{back['not_applied']}.",
        ]
    )


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
