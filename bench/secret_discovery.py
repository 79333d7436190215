"""Clusters from Argo CD cluster Secrets against the same clusters from kubeconfig files.

One run, side by side, every part a process of its own: the stand-in workload fleet
(``bench.fleet_server``, bearer tokens, the fleet's CA embedded), the management stand-in
(``python -m fleetwatch.standin management``) holding one Argo CD cluster Secret per
workload cluster (``server``, ``config`` with ``bearerToken`` and ``tlsClientConfig.caData``:
the credentials the kubeconfig has), and ``fleetwatch exporter`` started once per source:

- **files**: ``--kubeconfig-dir`` holding the fleet's kubeconfig (one context per cluster);
- **secrets**: ``--discovery.kubernetes`` against the management stand-in.

Each exporter is started and measured alone, one after the other, at two fleet sizes: one
cluster (the baseline: every code path loaded, no fleet) and N. Measured from outside, as
an operator would (``/-/ready``, ``/metrics`` gzipped, ``/proc``):

(a) seconds from the exporter's start to its first complete list of Secrets (``/-/ready``
    stops saying so) and to ``/-/ready`` 200, as seen by polls every 0.1 s; to the end
    of its first cycle (and how many clusters it held) and of the cycle that had every
    cluster probed (``fleetwatch_cluster_probe_success`` 1 for all N), by the exporter's
    own ``fleetwatch_exporter_last_cycle_timestamp_seconds``;
(b) RSS after all were probed and one more cycle completed; per cluster,
    ``(RSS at N - RSS at 1) / (N - 1)`` for each source, and Secrets against files;
(c) secrets only: every token rotated at once — the workload clusters accept only the new
    ones (``Fleet.rotate_tokens``), then every Secret is rewritten in one call — and each
    cycle's duration (``fleetwatch_exporter_cycle_duration_seconds``, read after every
    cycle) against the interval, until a cycle that started after the rewrite probed all N
    with the new tokens, and one more; the watches still open on the stand-in, relists;
(d) exporter CPU seconds over ``--rest`` seconds with nothing changing and no probe cycle
    in the window (it starts just after a cycle; ``--interval`` leaves room for it).

Run: ``.venv/bin/python -m bench.secret_discovery`` (5,000 clusters, about 20 minutes)
or ``--quick`` (200 clusters, a 6 s interval, about a minute; the smoke test's mode).
Results: ``bench/out/secret_discovery.json``; ``python -m bench.report`` prints the tables.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import re
import secrets
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, cpu_seconds, cpu_seconds_fine, memory_kib, write_result
from bench.fleet_server import Fleet, start_fleet
from fleetwatch.common.metricnames import (
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_SUCCESS,
    DISCOVERY_KUBERNETES_ERRORS,
    DISCOVERY_KUBERNETES_OBJECTS,
    DISCOVERY_KUBERNETES_WATCH_RESTARTS,
    EXPORTER_CLUSTERS_DISCOVERED,
    EXPORTER_CYCLE_DURATION,
    EXPORTER_CYCLES,
    EXPORTER_LAST_CYCLE,
)
from fleetwatch.procs import ManagedProcess, free_port
from fleetwatch.standin.management import ManagementProcess

ARGOCD_NAMESPACE = "argocd"
ARGOCD_LABEL = {"argocd.argoproj.io/secret-type": "cluster"}
#: What /-/ready says until the first list of Secrets completed (exporter/server.py).
NOT_LISTED = "first list of the management cluster's Secrets"
POLL = 0.1  #: seconds between two looks at /-/ready while an exporter starts
SCRAPE_EVERY = 0.5  #: seconds between two reads of /metrics while waiting on cycles


# --- the fleet as both sources see it ---------------------------------------------------


@dataclass(frozen=True)
class FleetCluster:
    """One workload cluster as its kubeconfig context has it (token and CA inline)."""

    name: str
    server: str
    token: str
    ca_data: str  #: base64 PEM, as ``certificate-authority-data`` and Argo CD's ``caData``


def read_fleet(kubeconfigs: Iterable[Path]) -> list[FleetCluster]:
    found: list[FleetCluster] = []
    for path in kubeconfigs:
        doc = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        clusters = {c["name"]: c["cluster"] for c in doc["clusters"]}
        users = {u["name"]: u["user"] for u in doc["users"]}
        for ctx in doc["contexts"]:
            cluster = clusters[ctx["context"]["cluster"]]
            found.append(
                FleetCluster(
                    name=ctx["name"],
                    server=cluster["server"],
                    token=users[ctx["context"]["user"]]["token"],
                    ca_data=cluster["certificate-authority-data"],
                )
            )
    return found


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def argocd_secret(cluster: FleetCluster, token: str) -> dict[str, Any]:
    """Argo CD's cluster Secret for ``cluster`` (declarative setup's shape)."""
    config = {"bearerToken": token, "tlsClientConfig": {"caData": cluster.ca_data}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": f"cluster-{cluster.name}",
            "namespace": ARGOCD_NAMESPACE,
            "labels": dict(ARGOCD_LABEL),
        },
        "data": {
            "name": _b64(cluster.name),
            "server": _b64(cluster.server),
            "config": _b64(json.dumps(config)),
        },
    }


def one_context_kubeconfig(source: Path, name: str, out: Path) -> Path:
    """The fleet's kubeconfig cut down to context ``name`` (the files baseline)."""
    doc = yaml.load(source.read_text(), Loader=yaml.CSafeLoader)
    ctx = next(c for c in doc["contexts"] if c["name"] == name)
    doc["contexts"] = [ctx]
    doc["clusters"] = [c for c in doc["clusters"] if c["name"] == ctx["context"]["cluster"]]
    doc["users"] = [u for u in doc["users"] if u["name"] == ctx["context"]["user"]]
    doc["current-context"] = name
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.dump(doc, f, Dumper=yaml.CSafeDumper)
    return out


# --- the exporter, seen from outside ----------------------------------------------------


@dataclass
class Scrape:
    """What one ``/metrics`` says about cycles, probes and the list+watch."""

    at: float  #: perf_counter of the read
    cycles: int = 0
    cycle_duration: float = 0.0
    last_cycle_end: float = 0.0  #: unix time
    discovered: int = 0
    probed: int = 0
    ok: int = 0
    failures: dict[str, float] = field(default_factory=dict)  #: by reason, cumulative
    objects: int = 0
    restarts: dict[str, float] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)


def _value(text: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _by_label(text: str, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in re.finditer(rf'^{name}\{{[^}}]*{label}="([^"]*)"[^}}]*\}} (\S+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def parse_metrics(text: str, at: float) -> Scrape:
    success = re.findall(rf"^{CLUSTER_PROBE_SUCCESS}\{{[^}}]*\}} (\S+)$", text, re.M)
    return Scrape(
        at=at,
        cycles=int(_value(text, EXPORTER_CYCLES)),
        cycle_duration=_value(text, EXPORTER_CYCLE_DURATION),
        last_cycle_end=_value(text, EXPORTER_LAST_CYCLE),
        discovered=int(_value(text, EXPORTER_CLUSTERS_DISCOVERED)),
        probed=len(success),
        ok=sum(1 for v in success if float(v) == 1.0),
        failures=_by_label(text, CLUSTER_PROBE_FAILURES, "reason"),
        objects=int(_by_label(text, DISCOVERY_KUBERNETES_OBJECTS, "kind").get("argocd", 0)),
        restarts=_by_label(text, DISCOVERY_KUBERNETES_WATCH_RESTARTS, "reason"),
        errors=_by_label(text, DISCOVERY_KUBERNETES_ERRORS, "reason"),
    )


class Exporter:
    """``fleetwatch exporter`` as a child process; reads of its endpoints."""

    def __init__(self, tmp: Path, label: str, interval: float, timeout: float) -> None:
        self.tmp = tmp
        self.label = label
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        empty = tmp / "empty-kubeconfig.yaml"
        empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
        self.argv = [
            str(Path(sys.executable).parent / "fleetwatch"), "exporter",
            f"--web.listen-address=127.0.0.1:{self.port}", f"--kubeconfig={empty}",
            f"--probe.interval={interval:g}", f"--probe.timeout={timeout:g}",
            "--log.level=warning",
        ]  # fmt: skip
        self.proc: ManagedProcess | None = None
        self.started = 0.0  #: perf_counter at the start
        self.started_unix = 0.0  #: the same moment in the exporter's clock (its timestamps)

    def start(self, *source_flags: str) -> Exporter:
        self.proc = ManagedProcess(
            [*self.argv, *source_flags], self.tmp / f"exporter-{self.label}.log", cwd=REPO
        )
        self.started, self.started_unix = time.perf_counter(), time.time()
        self.proc.start()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def since_start(self) -> float:
        return round(time.perf_counter() - self.started, 3)

    def alive(self) -> None:
        assert self.proc is not None
        if not self.proc.alive():
            raise RuntimeError(f"exporter {self.label} exited:\n{self.proc.log_tail()}")

    def ready(self) -> tuple[int, str] | None:
        """``/-/ready``'s status and text, None while nothing listens."""
        try:
            with urllib.request.urlopen(self.base + "/-/ready", timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except (urllib.error.URLError, OSError):
            return None

    def scrape(self) -> Scrape:
        request = urllib.request.Request(
            self.base + "/metrics", headers={"Accept-Encoding": "gzip"}
        )
        with urllib.request.urlopen(request, timeout=60) as resp:
            body = resp.read()
            if resp.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
        return parse_metrics(body.decode(), time.perf_counter())

    def log_lines(self, needle: str) -> int:
        path = self.tmp / f"exporter-{self.label}.log"
        return sum(1 for line in path.read_text(errors="replace").splitlines() if needle in line)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def _until(what: str, seconds: float, step: float, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something truthy; TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds:.0f} s")
        time.sleep(step)


def start_and_probe(
    exporter: Exporter, clusters: int, listed: bool, deadline: float
) -> dict[str, Any]:
    """(a): the exporter's milestones, seconds from its start (and its CPU at each)."""
    out: dict[str, Any] = {"listed_s": None, "first_cycle_s": None, "all_probed_s": None}
    cycles: list[dict[str, Any]] = []
    last_scrape = 0.0
    seen = 0

    def look() -> bool:
        nonlocal last_scrape, seen
        exporter.alive()
        answer = exporter.ready()
        if answer is None:
            return False
        if listed and out["listed_s"] is None and NOT_LISTED not in answer[1]:
            out["listed_s"] = exporter.since_start()
            out["listed_cpu_s"] = cpu_seconds(exporter.pid)
        if answer[0] == 200 and out.get("ready_s") is None:
            out["ready_s"] = exporter.since_start()
        if time.perf_counter() - last_scrape < SCRAPE_EVERY:
            return False
        last_scrape = time.perf_counter()
        got = exporter.scrape()
        if got.cycles > seen:
            seen = got.cycles
            cycles.append(_cycle(got, exporter))
            if out["first_cycle_s"] is None:
                out["first_cycle_s"] = cycles[-1]["ended_s"]
                out["first_cycle_clusters"] = got.discovered
                out["first_cycle_ok"] = got.ok
        if got.ok >= clusters and out["all_probed_s"] is None:
            out["all_probed_s"] = cycles[-1]["ended_s"]
            out["all_probed_seen_s"] = exporter.since_start()
            out["all_probed_cpu_s"] = cpu_seconds(exporter.pid)
            out["all_probed_cycle"] = got.cycles
            return True
        return False

    _until(f"{exporter.label}: all {clusters} probed", deadline, POLL, look)
    out["cycles"] = cycles
    return out


def _cycle(got: Scrape, exporter: Exporter) -> dict[str, Any]:
    """The last cycle as ``/metrics`` reports it; times from the exporter's start."""
    return {
        "cycle": got.cycles,
        "duration_s": round(got.cycle_duration, 3),
        "ended_s": round(got.last_cycle_end - exporter.started_unix, 3),
        "clusters": got.discovered,
        "ok": got.ok,
    }


def next_cycle(exporter: Exporter, after: int, seconds: float) -> Scrape:
    """The first scrape showing a cycle past ``after``."""

    def look() -> Scrape | None:
        exporter.alive()
        got = exporter.scrape()
        return got if got.cycles > after else None

    found: Scrape = _until(f"{exporter.label}: cycle {after + 1}", seconds, SCRAPE_EVERY, look)
    return found


def steady_memory_and_rest(
    exporter: Exporter, cycle: int, rest: float, interval: float, mgmt_pid: int | None
) -> dict[str, Any]:
    """(b) and (d): the next cycle, then RSS, then CPU over ``rest`` s with no cycle."""
    got = next_cycle(exporter, cycle, interval * 2 + 120)
    mem = memory_kib(exporter.pid)
    out: dict[str, Any] = {
        "steady_cycle": _cycle(got, exporter),
        "rss_mib": round(mem["VmRSS"] / 1024, 1),
        "rss_peak_mib": round(mem["VmHWM"] / 1024, 1),
    }
    cpu0 = cpu_seconds_fine(exporter.pid)
    mgmt0 = cpu_seconds_fine(mgmt_pid) if mgmt_pid else None
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    time.sleep(rest)  # the measured window itself: nothing is asked of the exporter in it
    wall = time.perf_counter() - t0
    cpu = cpu_seconds_fine(exporter.pid) - cpu0
    after = exporter.scrape()
    out["rest"] = {
        "seconds": round(wall, 2),
        "cpu_s": round(cpu, 6),
        "cpu_ms_per_min": round(cpu / wall * 60_000, 3),
        "clean": after.cycles == got.cycles,  # no probe cycle fell in the window
        "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }
    if mgmt_pid and mgmt0 is not None:
        out["rest"]["management_cpu_s"] = round(cpu_seconds_fine(mgmt_pid) - mgmt0, 4)
    out["last_cycle"] = after.cycles
    return out


def rotate_all(
    exporter: Exporter,
    fleet: Fleet,
    mgmt: ManagementProcess,
    clusters: list[FleetCluster],
    interval: float,
) -> dict[str, Any]:
    """(c): every token rotated at once, then the cycles until all N probe with them."""
    before = exporter.scrape()
    lists_before = mgmt.counts().get("list secrets", 0)
    fresh = {c.name: secrets.token_urlsafe(24) for c in clusters}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    fleet.rotate_tokens(fresh)  # from now on the old tokens are refused
    fleet_s = time.perf_counter() - t0
    mgmt.seed([argocd_secret(c, fresh[c.name]) for c in clusters], timeout=300)
    seeded = time.perf_counter()
    seeded_unix = time.time()
    cycles: list[dict[str, Any]] = []
    min_ok = before.ok
    seen = before.cycles
    done: dict[str, Any] = {}

    def look() -> bool:
        nonlocal seen, min_ok
        exporter.alive()
        got = exporter.scrape()
        min_ok = min(min_ok, got.ok)
        if got.cycles <= seen:
            return False
        seen = got.cycles
        started_unix = got.last_cycle_end - got.cycle_duration
        entry = _cycle(got, exporter)
        entry["started_after_rewrite"] = started_unix > seeded_unix
        entry["since_rewrite_s"] = round(got.at - seeded, 2)
        cycles.append(entry)
        if "all_ok_s" not in done and entry["started_after_rewrite"] and got.ok == len(clusters):
            done["all_ok_s"] = round(got.at - t0, 2)
            done["cycle"] = got.cycles
        return "cycle" in done and got.cycles > done["cycle"]  # and one more after it

    _until("all probed with the new tokens", interval * 4 + 300, SCRAPE_EVERY, look)
    after = exporter.scrape()
    mem = memory_kib(exporter.pid)
    failures = {k: round(v - before.failures.get(k, 0.0)) for k, v in after.failures.items()}
    return {
        "fleet_rotate_s": round(fleet_s, 3),
        "rewrite_s": round(seeded - t0 - fleet_s, 3),
        "cycles": cycles,
        "max_cycle_s": max(c["duration_s"] for c in cycles),
        "over_interval": [c["cycle"] for c in cycles if c["duration_s"] > interval],
        "all_ok_after_s": done["all_ok_s"],
        "min_ok_seen": min_ok,
        "failures": {k: v for k, v in failures.items() if v},
        "watch_restarts": _delta(after.restarts, before.restarts),
        "api_errors": _delta(after.errors, before.errors),
        "relists": mgmt.counts().get("list secrets", 0) - lists_before,
        "watches_open": mgmt.open_watches(),
        "objects": after.objects,
        "rss_mib": round(mem["VmRSS"] / 1024, 1),
        "rss_peak_mib": round(mem["VmHWM"] / 1024, 1),
        "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {k: round(v - before.get(k, 0.0)) for k, v in after.items() if v - before.get(k, 0.0)}


# --- one exporter run, and the whole benchmark ------------------------------------------


@dataclass(frozen=True)
class Plan:
    clusters: int
    interval: float
    timeout: float
    rest: float


def run_one(
    tmp: Path,
    source: str,
    size: int,
    plan: Plan,
    flags: list[str],
    mgmt: ManagementProcess,
    rotate: Callable[[Exporter], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    label = f"{source}-{size}"
    exporter = Exporter(tmp, label, plan.interval, plan.timeout).start(*flags)
    try:
        load0 = os.getloadavg()[0]
        deadline = plan.interval * 3 + 120 + size / 20
        result = start_and_probe(exporter, size, source == "secrets", deadline)
        mgmt_pid = mgmt.pid if source == "secrets" else None
        cycle = result["all_probed_cycle"]
        result.update(steady_memory_and_rest(exporter, cycle, plan.rest, plan.interval, mgmt_pid))
        if rotate is not None:
            result["rotation"] = rotate(exporter)
        result["slow_cycle_warnings"] = exporter.log_lines("longer than the interval")
        result["loadavg_1m_at_start"] = round(load0, 2)
        result["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
        return {"source": source, "clusters": size, **result}
    finally:
        exporter.stop()


def per_cluster(runs: dict[str, dict[str, Any]], plan: Plan) -> dict[str, Any]:
    """(b): KiB of RSS per cluster, from one cluster to N, per source; and the ratio."""
    out: dict[str, Any] = {}
    for source in ("files", "secrets"):
        small, big = runs[f"{source}-1"], runs[f"{source}-{plan.clusters}"]
        slope = (big["rss_mib"] - small["rss_mib"]) * 1024 / max(1, plan.clusters - 1)
        out[f"{source}_kib_per_cluster"] = round(slope, 2)
    files = out["files_kib_per_cluster"]
    out["secrets_vs_files"] = round(out["secrets_kib_per_cluster"] / files, 3) if files else None
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 clusters, 6 s interval, 3 s rest")
    parser.add_argument("--clusters", type=int, default=None, help="default 5000 (quick: 200)")
    parser.add_argument("--interval", type=float, default=None, help="default 90 (quick: 6)")
    parser.add_argument("--rest", type=float, default=None, help="default 60 s (quick: 3)")
    parser.add_argument("--timeout", type=float, default=10.0, help="probe timeout (s)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    quick = args.quick
    plan = Plan(
        clusters=args.clusters or (200 if quick else 5000),
        interval=args.interval or (6.0 if quick else 90.0),
        timeout=min(args.timeout, args.interval or (6.0 if quick else 90.0)),
        rest=args.rest or (3.0 if quick else 60.0),
    )
    if plan.rest >= plan.interval:
        parser.error("--rest must be shorter than --interval (the window holds no cycle)")
    with tempfile.TemporaryDirectory(prefix="fw-bench-secrets-") as tmpdir:
        tmp = Path(tmpdir)
        t0 = time.perf_counter()
        fleet = start_fleet(tmp / "fleet", plan.clusters, credential="token")
        fleet_start_s = time.perf_counter() - t0
        mgmt = ManagementProcess(tmp / "mgmt").start()
        try:
            result = _measure(tmp, plan, fleet, mgmt)
        finally:
            mgmt.stop()
            fleet.stop()
    result["fleet_start_s"] = round(fleet_start_s, 1)
    name = "secret_discovery_quick" if quick else "secret_discovery"
    write_result(name, result, args.out)
    print(markdown(result))
    return result


def _measure(tmp: Path, plan: Plan, fleet: Fleet, mgmt: ManagementProcess) -> dict[str, Any]:
    kubeconfigs = sorted(fleet.kubeconfig_dir.glob("*.yaml"))
    clusters = read_fleet(kubeconfigs)
    assert len(clusters) == plan.clusters, (len(clusters), plan.clusters)
    first = clusters[0]
    one_dir = tmp / "one-cluster"
    one_context_kubeconfig(
        next(k for k in kubeconfigs if first.name in k.read_text()), first.name,
        one_dir / "kubeconfig.yaml",
    )  # fmt: skip
    files_flags = [f"--kubeconfig-dir={fleet.kubeconfig_dir}"]
    secrets_flags = [
        "--discovery.kubernetes",
        f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}",
    ]
    runs: dict[str, dict[str, Any]] = {}

    # The baselines: one cluster each (the Secrets' one alone in the management cluster).
    runs["files-1"] = run_one(tmp, "files", 1, plan, [f"--kubeconfig-dir={one_dir}"], mgmt)
    mgmt.seed([argocd_secret(first, first.token)])
    runs["secrets-1"] = run_one(tmp, "secrets", 1, plan, secrets_flags, mgmt)

    t0 = time.perf_counter()
    mgmt.seed([argocd_secret(c, c.token) for c in clusters[1:]], timeout=300)
    seed_s = time.perf_counter() - t0
    n = plan.clusters
    runs[f"files-{n}"] = run_one(tmp, "files", n, plan, files_flags, mgmt)

    def rotate(exporter: Exporter) -> dict[str, Any]:
        return rotate_all(exporter, fleet, mgmt, clusters, plan.interval)

    runs[f"secrets-{n}"] = run_one(tmp, "secrets", n, plan, secrets_flags, mgmt, rotate)
    return {
        "clusters": n,
        "interval_s": plan.interval,
        "timeout_s": plan.timeout,
        "rest_s": plan.rest,
        "seed_s": round(seed_s, 2),
        "runs": runs,
        "memory": per_cluster(runs, plan),
    }


# --- the tables of bench/RESULTS.md -----------------------------------------------------


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def markdown(result: dict[str, Any]) -> str:
    """The tables for bench/RESULTS.md (``python -m bench.report`` prints them too)."""
    n = result["clusters"]
    runs = result["runs"]
    rows = [
        f"{n:,} clusters, probe interval {result['interval_s']:g} s, timeout "
        f"{result['timeout_s']:g} s; each exporter alone, files then Secrets.",
        "",
        "| source | first list | first cycle (clusters in it) | `/-/ready` 200 | all probed | "
        "RSS at 1 / at N (peak) | CPU at rest, per minute | load at start / end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for source in ("files", "secrets"):
        one, big = runs[f"{source}-1"], runs[f"{source}-{n}"]
        fell_in = "" if big["rest"]["clean"] else " (a cycle fell in)"
        rows.append(
            f"| {source} | {_s(big.get('listed_s'))} | {_s(big['first_cycle_s'])} "
            f"({big['first_cycle_clusters']:,}) | {_s(big.get('ready_s'))} | "
            f"{_s(big['all_probed_s'])} | "
            f"{one['rss_mib']} / {big['rss_mib']} MiB ({big['rss_peak_mib']}) | "
            f"{big['rest']['cpu_ms_per_min']} ms{fell_in} | "
            f"{big['loadavg_1m_at_start']} / {big['loadavg_1m_at_end']} |"
        )
    mem = result["memory"]
    rows += [
        "",
        f"Memory per cluster (RSS at N minus RSS at 1, over N - 1): files "
        f"{mem['files_kib_per_cluster']} KiB, Secrets {mem['secrets_kib_per_cluster']} KiB: "
        f"**{mem['secrets_vs_files']}x** (goal: within 1.10x).",
    ]
    rot = runs[f"secrets-{n}"].get("rotation")
    if rot:
        durations = ", ".join(
            f"{c['duration_s']:.1f} s{'' if c['started_after_rewrite'] else ' (started before)'}"
            for c in rot["cycles"]
        )
        rows += [
            "",
            f"Rotation of all {n:,} tokens at once (fleet {rot['fleet_rotate_s']} s, every Secret "
            f"rewritten in {rot['rewrite_s']} s; load {rot['loadavg_1m'][0]} -> "
            f"{rot['loadavg_1m'][1]}): cycles {durations}; longest {rot['max_cycle_s']:.1f} s "
            f"of a {result['interval_s']:g} s interval"
            f"{' (OVER: ' + str(rot['over_interval']) + ')' if rot['over_interval'] else ''}; "
            f"all {n:,} probing with the new tokens {rot['all_ok_after_s']:.1f} s after the "
            f"rotation; fewest ok meanwhile {rot['min_ok_seen']:,}; failures {rot['failures']}; "
            f"watch restarts {rot['watch_restarts']}, relists {rot['relists']}, watches open "
            f"{rot['watches_open']}; RSS after {rot['rss_mib']} MiB.",
        ]
    return "\n".join(rows)


if __name__ == "__main__":
    main()
