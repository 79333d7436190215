"""Soak: the exporter and the reactor under churn for a set time; does anything grow?

A stand-in fleet (one ``python -m fleetwatch.standin serve`` process, N clusters) writes a
kubeconfig per cluster into a pool folder. M of them at a time sit in the exporter's
``--kubeconfig-dir``; every 30-60 s a churn round removes some, adds others from the
pool, and rewrites others atomically: a plain file as a temporary file renamed over it, a
mounted Secret (a sub-folder) as the kubelet does it, a new hidden timestamped folder
behind a ``..data`` link swapped by rename. A rewrite points the context's server at
another stand-in cluster, or back, so "the server changed" happens too. Every 3 s a few
clusters of the folder change mode in the stand-in (``ok`` to a failing mode, or back)
and the reactor gets the matching status webhooks, so outages open and close. Beside
that the reactor takes about six requests a second over 2,000 apps (``POST
/deployments``, ``GET /apps/{name}``, ``GET /clusters/{name}``, the webhooks).

Every few seconds a sample: RSS, open descriptors (and sockets) and threads of both
processes, the exporter's last cycle time (its own metric) and clusters discovered, the
time and size of both ``/metrics``, the database size (SQLite file + WAL, or PostgreSQL's
``pg_database_size``), the rows of the reactor's ``outages`` table, request latency p50
and p99 over the window, 5xx and failed requests, and the machine's load average. The
samples go to a CSV and a JSON; each series is fitted against time by least squares
after a warm-up, and a table says, per metric, its start and end, the slope per 10
minutes with its 95 % interval, and whether it is flat (see :func:`fit`).

Everything listens on 127.0.0.1; the run is bounded by ``--duration`` and every process
it started is stopped by its pid at the end, on failure too.

Run: ``.venv/bin/python -m bench.soak --duration 1800`` (``--retention 5m`` passes
``--db.retention`` to the reactor; ``--postgres`` runs the reactor on a PostgreSQL server
of its own)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import math
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg

from bench.common import OUT_DIR, machine_info, memory_kib
from bench.reactor import TOKEN, db_bytes, start_reactor, webhook
from fleetwatch.procs import ManagedProcess, free_port

FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
OUTAGE_COUNTS = "SELECT count(closed_at), count(*) - count(closed_at) FROM outages"  # closed, open
FAILING_MODES = ("down", "hang", "error", "not_ready", "unauthorized")
_SERVER = re.compile(r"^(\s*server:\s*)(\S+)$", re.M)
#: Columns of the fit table, in order; the other sample columns are context.
FITTED = (
    "exporter_rss_mib",
    "exporter_fds",
    "exporter_sockets",
    "exporter_threads",
    "exporter_cycle_s",
    "exporter_metrics_ms",
    "exporter_metrics_kib",
    "reactor_rss_mib",
    "reactor_fds",
    "reactor_threads",
    "reactor_metrics_ms",
    "reactor_metrics_kib",
    "db_kib",
    "db_main_kib",
    "outages_closed",
    "outages_open",
    "req_p50_ms",
    "req_p99_ms",
)


# --- processes: /proc readings ----------------------------------------------------------


def proc_reading(pid: int) -> dict[str, float]:
    """RSS (MiB), open descriptors, of which sockets, and threads of ``pid``."""
    fds = sockets = 0
    for entry in os.scandir(f"/proc/{pid}/fd"):
        fds += 1
        with contextlib.suppress(OSError):  # closed between the listing and the link
            if os.readlink(entry.path).startswith("socket:"):
                sockets += 1
    threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
    rss = memory_kib(pid).get("VmRSS", 0) / 1024
    return {"rss_mib": round(rss, 2), "fds": fds, "sockets": sockets, "threads": threads}


# --- the fit ------------------------------------------------------------------------------

# Two-sided 95 % quantiles of Student's t by degrees of freedom (a lower df is used
# between two entries, which widens the interval: the conservative side).
_T95 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447),
        (7, 2.365), (8, 2.306), (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131),
        (20, 2.086), (25, 2.060), (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980))  # fmt: skip


def t95(df: int) -> float:
    value = math.inf
    for d, t in _T95:
        if df >= d:
            value = t
    return 1.960 if df > 240 else value


@dataclass(frozen=True)
class Fit:
    """A least-squares line through one series (after the warm-up) and its verdict.

    ``verdict``: ``flat`` when the 95 % interval of the slope contains 0, or the line's
    change over 30 minutes is under ``tolerance`` of the series' median (with a floor for
    series near 0); else ``falls`` or ``GROWS``. Samples a few seconds apart are not
    independent, so the interval is narrower than the truth: the 30-minute change is
    what decides for a drifting series.
    """

    metric: str
    n: int
    start: float  #: median of the first tenth of the fitted samples
    end: float  #: median of the last tenth
    slope_per_10min: float
    ci95_per_10min: float  #: half-width of the 95 % interval of the slope
    growth_30min_pct: float  #: slope x 30 min, in % of the median
    slope_2nd_half_per_10min: float  #: the same fit on the second half only
    verdict: str  #: flat, falls or GROWS
    why: str

    @property
    def grows(self) -> bool:
        return self.verdict not in ("flat", "falls")


def _ols(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and its standard error."""
    n = len(ts)
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    sxx = sum((t - mt) ** 2 for t in ts)
    if n < 3 or sxx == 0:
        return 0.0, math.inf
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (t - mt)) ** 2 for t, y in zip(ts, ys, strict=True))
    return slope, math.sqrt(resid / (n - 2) / sxx)


def fit(
    metric: str, ts: Sequence[float], ys: Sequence[float], tolerance: float = 0.05, floor: float = 0
) -> Fit:
    """Fit ``ys`` against ``ts`` (seconds); see :class:`Fit` for "flat"."""
    pairs = [(t, y) for t, y in zip(ts, ys, strict=True) if math.isfinite(y)]
    if len(pairs) < 3:
        return Fit(metric, len(pairs), math.nan, math.nan, math.nan, math.nan, math.nan,
                   math.nan, "unknown", "too few samples")  # fmt: skip
    t_, y_ = [p[0] for p in pairs], [p[1] for p in pairs]
    slope, se = _ols(t_, y_)
    half = len(pairs) // 2
    slope2, _ = _ols(t_[half:], y_[half:])
    tenth = max(1, len(pairs) // 10)
    level = max(abs(statistics.median(y_)), floor)
    ci = t95(len(pairs) - 2) * se
    growth = slope * 1800 / level * 100 if level > 0 else (0.0 if slope == 0 else math.inf)
    if abs(slope) <= ci:
        verdict, why = "flat", "95 % interval contains 0"
    elif abs(growth) < tolerance * 100:
        verdict, why = "flat", f"under {tolerance:.0%} per 30 min"
    else:
        verdict, why = ("GROWS" if growth > 0 else "falls"), f"{growth:+.1f} % per 30 min"
    return Fit(
        metric=metric,
        n=len(pairs),
        start=statistics.median(y_[:tenth]),
        end=statistics.median(y_[-tenth:]),
        slope_per_10min=slope * 600,
        ci95_per_10min=ci * 600,
        growth_30min_pct=growth,
        slope_2nd_half_per_10min=slope2 * 600,
        verdict=verdict,
        why=why,
    )


#: Below these a change is noise whatever the relative growth (a p50 of 3 ms, 0 rows).
FLOORS = {
    "req_p50_ms": 5.0,
    "req_p99_ms": 20.0,
    "exporter_metrics_ms": 5.0,
    "reactor_metrics_ms": 5.0,
    "outages_closed": 50.0,
    "outages_open": 50.0,
    "exporter_threads": 10.0,
    "reactor_threads": 10.0,
}


def fit_table(samples: list[dict[str, Any]], warmup_s: float, tolerance: float) -> list[Fit]:
    kept = [s for s in samples if s["t_s"] >= warmup_s]
    ts = [float(s["t_s"]) for s in kept]
    return [
        fit(m, ts, [float(s[m]) for s in kept], tolerance, FLOORS.get(m, 0.0))
        for m in FITTED
        if kept and m in kept[0]
    ]


def _num(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if x != 0 and abs(x) < 0.01:
        return f"{x:.2g}"
    return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"


def markdown_table(fits: list[Fit]) -> str:
    head = (
        "| metric | start | end | slope / 10 min (95 % CI) | 2nd half / 10 min "
        "| 30 min change | verdict |\n|---|---:|---:|---:|---:|---:|---|\n"
    )
    rows = [
        f"| {f.metric} | {_num(f.start)} | {_num(f.end)} | {_num(f.slope_per_10min)} "
        f"± {_num(f.ci95_per_10min)} | {_num(f.slope_2nd_half_per_10min)} "
        f"| {f.growth_30min_pct:+.1f} % | {f.verdict} ({f.why}) |"
        for f in fits
    ]
    return head + "\n".join(rows) + "\n"


# --- the kubeconfig folder ----------------------------------------------------------------


@dataclass
class Slot:
    """One cluster in the folder: a plain file, or a mounted Secret (a sub-folder)."""

    name: str
    secret: bool
    server: str  #: the server its kubeconfig names now


class KubeconfigFolder:
    """The exporter's ``--kubeconfig-dir`` and the churn done to it (blocking file work)."""

    def __init__(self, folder: Path, pool: dict[str, Path], urls: dict[str, str]) -> None:
        self.folder = folder
        self.pool = pool
        self.urls = urls
        self.slots: dict[str, Slot] = {}
        self.counts = {"added": 0, "removed": 0, "rewritten": 0, "data_swaps": 0}
        folder.mkdir(parents=True, exist_ok=True)

    def _text(self, name: str, server: str) -> str:
        text = self.pool[name].read_text()
        return _SERVER.sub(lambda m: m.group(1) + server, text, count=1)

    def add(self, name: str, secret: bool) -> None:
        slot = Slot(name, secret, self.urls[name])
        if secret:
            self._swap_data(slot, self._text(name, slot.server), first=True)
        else:
            _atomic_write(self.folder / f"{name}.yaml", self._text(name, slot.server))
        self.slots[name] = slot
        self.counts["added"] += 1

    def remove(self, name: str) -> None:
        slot = self.slots.pop(name)
        if slot.secret:
            shutil.rmtree(self.folder / f"secret-{name}")
        else:
            (self.folder / f"{name}.yaml").unlink()
        self.counts["removed"] += 1

    def rewrite(self, name: str, other: str) -> None:
        """Point the context at ``other``'s server, or back at its own when it is not."""
        slot = self.slots[name]
        own = self.urls[name]
        slot.server = self.urls[other] if slot.server == own else own
        text = self._text(name, slot.server)
        if slot.secret:
            self._swap_data(slot, text, first=False)
            self.counts["data_swaps"] += 1
        else:
            _atomic_write(self.folder / f"{name}.yaml", text)
        self.counts["rewritten"] += 1

    def _swap_data(self, slot: Slot, text: str, first: bool) -> None:
        """The kubelet's atomic writer: new hidden folder, ``..data`` swapped by rename."""
        volume = self.folder / f"secret-{slot.name}"
        volume.mkdir(exist_ok=True)
        stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{random.randrange(10**9)}"
        (volume / stamp).mkdir()
        (volume / stamp / "value").write_text(text)
        old = os.readlink(volume / "..data") if not first else None
        tmp_link = volume / "..data_tmp"
        tmp_link.symlink_to(stamp)
        os.rename(tmp_link, volume / "..data")
        if first:
            (volume / "value").symlink_to("..data/value")
        if old is not None:
            shutil.rmtree(volume / old)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Requests:
    """Latencies and outcomes of the reactor requests since the last sample."""

    latencies_ms: list[float] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)
    refused_409: int = 0
    status_5xx: int = 0
    other_4xx: int = 0
    failed: int = 0


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class Soak:
    args: argparse.Namespace
    tmp: Path
    standin: ManagedProcess | None = None
    exporter: ManagedProcess | None = None
    reactor: ManagedProcess | None = None
    exporter_url: str = ""
    reactor_url: str = ""
    control_url: str = ""
    db: Path | None = None
    db_url: str | None = None
    names: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)
    folder: KubeconfigFolder | None = None
    requests: Requests = field(default_factory=Requests)
    totals: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    t0: float = 0.0
    in_flight: int = 0
    flap_errors: list[str] = field(default_factory=list)

    # -- start-up ------------------------------------------------------------------------

    def start_standin(self) -> None:
        pool = self.tmp / "pool"
        port = free_port()
        self.control_url = f"http://127.0.0.1:{port}"
        self.standin = ManagedProcess(
            [sys.executable, "-m", "fleetwatch.standin", "serve", "--dir", str(pool),
             "--clusters", str(self.args.clusters), "--prefix", "soak",
             "--control-port", str(port)],
            self.tmp / "standin.log",
            ready_url=self.control_url + "/healthz",
        ).start(ready_timeout=60 + self.args.clusters / 20)  # fmt: skip

    def start_exporter(self) -> None:
        port = free_port()
        self.exporter_url = f"http://127.0.0.1:{port}"
        a = self.args
        self.exporter = ManagedProcess(
            [FLEETWATCH, "exporter", f"--web.listen-address=127.0.0.1:{port}", "--kubeconfig=",
             f"--kubeconfig-dir={self.tmp / 'kubeconfigs'}", f"--probe.interval={a.probe_interval}",
             f"--probe.timeout={a.probe_timeout}", "--log.level=warning"],
            self.tmp / "exporter.log",
            ready_url=self.exporter_url + "/healthz",
        ).start(ready_timeout=60)  # fmt: skip

    def start_reactor(self) -> None:
        extra = [f"--db.retention={self.args.retention}"] if self.args.retention else []
        self.db = self.tmp / "reactor" / "soak.db"
        self.db.parent.mkdir(parents=True, exist_ok=True)
        self.reactor, self.reactor_url = start_reactor(
            self.tmp, self.db, db_url=self.db_url, name="soak", extra=extra
        )

    def stop(self) -> dict[str, int | None]:
        """Stop every process started, by pid; their exit codes."""
        codes: dict[str, int | None] = {}
        for label, proc in (("exporter", self.exporter), ("reactor", self.reactor),
                            ("standin", self.standin)):  # fmt: skip
            if proc is not None:
                codes[label] = proc.stop()
        return codes

    async def setup(self, session: aiohttp.ClientSession) -> None:
        """Names of the fleet, the first M files, all ONLINE, 2,000 apps DEPLOYED."""
        async with session.get(self.control_url + "/clusters") as resp:
            clusters = await resp.json()
        self.names = [c["name"] for c in clusters]
        urls = {c["name"]: c["url"] for c in clusters}
        pool = {n: self.tmp / "pool" / f"{n}.yaml" for n in self.names}
        self.modes = {n: "ok" for n in self.names}
        self.folder = KubeconfigFolder(self.tmp / "kubeconfigs", pool, urls)
        for name in self.rng.sample(self.names, self.args.in_folder):
            self.folder.add(name, secret=self.rng.random() < self.args.secret_share)
        await self.post(session, "/alerts", webhook(self.names, "FleetClusterOnline", time.time()))
        self.apps = [f"app-{i:05d}" for i in range(self.args.apps)]
        sem = asyncio.Semaphore(8)

        async def one(app: str) -> None:
            async with sem:
                cluster = self.rng.choice(self.names)
                await self.post(session, "/apps", {"name": app, "cluster": cluster})
                await self.post(session, "/deployments", {"app": app, "cluster": cluster})

        async with asyncio.TaskGroup() as group:
            for app in self.apps:
                group.create_task(one(app))

    async def post(self, session: aiohttp.ClientSession, path: str, doc: Any) -> int:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with session.post(self.reactor_url + path, json=doc, headers=headers) as resp:
            await resp.read()
            if resp.status >= 500 or resp.status in (400, 401):
                raise RuntimeError(f"POST {path} answered {resp.status}")
            return resp.status

    # -- the load --------------------------------------------------------------------------

    async def request(self, session: aiohttp.ClientSession, kind: str) -> None:
        """One reactor request of ``kind``, timed, its outcome counted."""
        if kind == "deploy":
            method, path = "POST", "/deployments"
            body: Any = {"app": self.rng.choice(self.apps), "cluster": self.rng.choice(self.names)}
        elif kind == "get_app":
            method, path, body = "GET", f"/apps/{self.rng.choice(self.apps)}", None
        else:
            method, path, body = "GET", f"/clusters/{self.rng.choice(self.names)}", None
        await self.timed(session, kind, method, path, body)

    async def timed(
        self, session: aiohttp.ClientSession, kind: str, method: str, path: str, body: Any
    ) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        t = time.perf_counter()
        self.in_flight += 1
        try:
            async with session.request(
                method, self.reactor_url + path, json=body, headers=headers
            ) as resp:
                await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError):
            self.requests.failed += 1
            return
        finally:
            self.in_flight -= 1
        r = self.requests  # the window the answer arrived in
        r.by_kind[kind] = r.by_kind.get(kind, 0) + 1
        r.latencies_ms.append((time.perf_counter() - t) * 1000)
        if status >= 500:
            r.status_5xx += 1
        elif status == 409:
            r.refused_409 += 1
        elif status >= 400:
            r.other_4xx += 1

    async def load(self, session: aiohttp.ClientSession, until: float) -> None:
        """Open loop at the rate left once the flap webhooks are counted (Poisson arrivals)."""
        rate = max(0.1, self.args.rps - 2 / self.args.flap_interval)
        kinds, weights = ("deploy", "get_app", "get_cluster"), (0.5, 0.3, 0.2)
        async with asyncio.TaskGroup() as group:
            while time.monotonic() < until:
                await asyncio.sleep(self.rng.expovariate(rate))
                if self.in_flight < 64:  # a stalled reactor does not pile up requests
                    kind = self.rng.choices(kinds, weights)[0]
                    group.create_task(self.request(session, kind))

    async def flap(self, session: aiohttp.ClientSession, until: float) -> None:
        """Every interval: some clusters of the folder fail or recover; the reactor is told."""
        while time.monotonic() < until:
            await asyncio.sleep(self.args.flap_interval)
            assert self.folder is not None
            inside = list(self.folder.slots)
            down: list[str] = []
            up: list[str] = []
            for name in self.rng.sample(inside, min(self.args.flap, len(inside))):
                mode = "ok" if self.modes[name] != "ok" else self.rng.choice(FAILING_MODES)
                async with session.put(
                    f"{self.control_url}/clusters/{name}/mode", json={"mode": mode}
                ) as resp:
                    answer = await resp.read()
                if resp.status != 200:  # a stand-in fault: counted and shown, not fatal
                    self.totals["flap_errors"] = self.totals.get("flap_errors", 0) + 1
                    self.flap_errors.append(f"{name} -> {mode}: {resp.status} {answer[:200]!r}")
                    continue
                self.modes[name] = mode
                (up if mode == "ok" else down).append(name)
            now = time.time()
            for names, alert in ((down, "FleetClusterOffline"), (up, "FleetClusterOnline")):
                if names:
                    await self.timed(session, "webhook", "POST", "/alerts",
                                     webhook(names, alert, now))  # fmt: skip

    async def churn(self, until: float) -> None:
        """Every 30-60 s (``--churn-every``): files removed, added and rewritten."""
        lo, hi = self.args.churn_every
        while True:
            wait = self.rng.uniform(lo, hi)
            if time.monotonic() + wait >= until:
                return
            await asyncio.sleep(wait)
            self.churn_round()  # tens of small files: milliseconds, on the loop on purpose

    def churn_round(self) -> None:
        assert self.folder is not None
        f, k = self.folder, max(1, round(self.args.churn * self.args.in_folder))
        outside = [n for n in self.names if n not in f.slots]
        for name in self.rng.sample(list(f.slots), min(k, len(f.slots))):
            f.remove(name)
        for name in self.rng.sample(outside, min(k, len(outside))):
            f.add(name, secret=self.rng.random() < self.args.secret_share)
        outside = [n for n in self.names if n not in f.slots]
        for name in self.rng.sample(list(f.slots), min(k, len(f.slots))):
            f.rewrite(name, self.rng.choice(outside or self.names))

    # -- the samples ----------------------------------------------------------------------

    async def scrape(self, session: aiohttp.ClientSession, url: str) -> tuple[float, bytes]:
        t = time.perf_counter()
        async with session.get(url + "/metrics", headers={"Accept-Encoding": "identity"}) as r:
            body = await r.read()
            if r.status != 200:
                raise RuntimeError(f"{url}/metrics answered {r.status}")
        return (time.perf_counter() - t) * 1000, body

    async def sample(self, session: aiohttp.ClientSession) -> dict[str, Any]:
        assert self.exporter and self.reactor and self.folder
        for label, proc in (("exporter", self.exporter), ("reactor", self.reactor),
                            ("stand-in", self.standin)):  # fmt: skip
            if proc is None or not proc.alive():
                raise RuntimeError(f"the {label} exited during the soak")
        exp = proc_reading(self.exporter.pid)
        rea = proc_reading(self.reactor.pid)
        exp_ms, exp_body = await self.scrape(session, self.exporter_url)
        rea_ms, rea_body = await self.scrape(session, self.reactor_url)
        metrics = _gauges(exp_body.decode(), ("fleetwatch_exporter_cycle_duration_seconds",
                                              "fleetwatch_exporter_clusters_discovered",
                                              "fleetwatch_exporter_cycles_total"))  # fmt: skip
        size, main_size, closed, open_ = await asyncio.to_thread(self.database)
        window, self.requests = self.requests, Requests()
        for key, value in (("requests", len(window.latencies_ms) + window.failed),
                           ("status_5xx", window.status_5xx), ("failed", window.failed),
                           ("refused_409", window.refused_409),
                           ("other_4xx", window.other_4xx)):  # fmt: skip
            self.totals[key] = self.totals.get(key, 0) + value
        load = os.getloadavg()
        return {
            "t_s": round(time.monotonic() - self.t0, 1),
            "utc": time.strftime("%H:%M:%S", time.gmtime()),
            "load_1m": load[0],
            "load_5m": load[1],
            "exporter_rss_mib": exp["rss_mib"],
            "exporter_fds": exp["fds"],
            "exporter_sockets": exp["sockets"],
            "exporter_threads": exp["threads"],
            "exporter_cycle_s": metrics.get("fleetwatch_exporter_cycle_duration_seconds", math.nan),
            "exporter_clusters": metrics.get("fleetwatch_exporter_clusters_discovered", math.nan),
            "exporter_cycles": metrics.get("fleetwatch_exporter_cycles_total", math.nan),
            "exporter_metrics_ms": round(exp_ms, 2),
            "exporter_metrics_kib": round(len(exp_body) / 1024, 1),
            "reactor_rss_mib": rea["rss_mib"],
            "reactor_fds": rea["fds"],
            "reactor_threads": rea["threads"],
            "reactor_metrics_ms": round(rea_ms, 2),
            "reactor_metrics_kib": round(len(rea_body) / 1024, 1),
            "db_kib": round(size / 1024, 1),
            "db_main_kib": round(main_size / 1024, 1),
            "outages_closed": closed,
            "outages_open": open_,
            "req_p50_ms": round(percentile(window.latencies_ms, 0.50), 2),
            "req_p99_ms": round(percentile(window.latencies_ms, 0.99), 2),
            "requests": len(window.latencies_ms) + window.failed,
            "status_5xx": window.status_5xx,
            "failed": window.failed,
            "files_in_folder": len(self.folder.slots),
        }

    def database(self) -> tuple[int, int, int, int]:
        """Bytes of the database and of its main file; closed and open outages (read-only).

        SQLite's main file is apart from its write-ahead log, which the reactor rewinds
        but does not shrink (up to its size limit): the file shows what the data takes.
        Closed outages are what ``--db.retention`` bounds; open ones are never deleted
        (a cluster removed from the folder while OFFLINE keeps its outage open).
        """
        if self.db_url:
            with psycopg.connect(self.db_url, autocommit=True) as pg:
                size = pg.execute("SELECT pg_database_size(current_database())").fetchone()
                counts = pg.execute(OUTAGE_COUNTS).fetchone()
            pg_bytes = int(size[0]) if size else 0
            closed, open_ = (int(counts[0]), int(counts[1])) if counts else (0, 0)
            return pg_bytes, pg_bytes, closed, open_
        assert self.db is not None
        lite = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            closed, open_ = lite.execute(OUTAGE_COUNTS).fetchone()
        finally:
            lite.close()
        return db_bytes(self.db), self.db.stat().st_size, int(closed or 0), int(open_ or 0)

    async def sampler(self, session: aiohttp.ClientSession, until: float) -> None:
        while time.monotonic() < until:
            row = await self.sample(session)
            self.samples.append(row)
            if self.args.verbose:
                print(json.dumps(row), flush=True)
            await asyncio.sleep(max(0.0, min(self.args.sample_every, until - time.monotonic())))

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await self.setup(session)
            self.t0 = time.monotonic()
            until = self.t0 + self.args.duration
            async with asyncio.TaskGroup() as group:
                group.create_task(self.sampler(session, until), name="sampler")
                group.create_task(self.load(session, until), name="load")
                group.create_task(self.flap(session, until), name="flap")
                group.create_task(self.churn(until), name="churn")
            self.samples.append(await self.sample(session))


def _gauges(text: str, names: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            out[name] = float(value)
    return out


def retention_flag_exists() -> bool:
    help_text = subprocess.run(
        [FLEETWATCH, "reactor", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    return "--db.retention" in help_text


def write_csv(path: Path, samples: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(samples[0]))
        writer.writeheader()
        writer.writerows(samples)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=1800, help="seconds of churn (default 1800)")
    p.add_argument("--clusters", type=int, default=800, help="stand-in clusters (default 800)")
    p.add_argument("--in-folder", type=int, default=300, help="kubeconfigs in the folder at once")
    p.add_argument("--apps", type=int, default=2000, help="apps in the reactor (default 2000)")
    p.add_argument("--rps", type=float, default=6.0, help="reactor requests a second, webhooks in")
    p.add_argument(
        "--churn",
        type=float,
        default=0.1,
        help="share of the folder removed, added and rewritten each round (0.1)",
    )
    p.add_argument(
        "--churn-every",
        type=float,
        nargs=2,
        default=(30.0, 60.0),
        metavar=("LO", "HI"),
        help="seconds between churn rounds, uniform in [LO, HI] (30 60)",
    )
    p.add_argument(
        "--secret-share",
        type=float,
        default=0.2,
        help="share of the files laid out as mounted Secrets (..data link)",
    )
    p.add_argument("--flap", type=int, default=5, help="clusters changing mode each flap (5)")
    p.add_argument("--flap-interval", type=float, default=3.0, help="seconds between flaps (3)")
    p.add_argument("--probe-interval", type=float, default=10.0, help="exporter --probe.interval")
    p.add_argument("--probe-timeout", type=float, default=5.0, help="exporter --probe.timeout")
    p.add_argument(
        "--retention",
        default="",
        help="reactor --db.retention (e.g. 5m), when the reactor has the flag",
    )
    p.add_argument(
        "--postgres",
        action="store_true",
        help="the reactor on a PostgreSQL 15 server of its own (default: SQLite)",
    )
    p.add_argument("--db-url", default=None, help="the reactor on this PostgreSQL database")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples (5)")
    p.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds left out of the fits (default: 10 %% of the run, at most 300)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="flat: growth over 30 min under this share of the median (0.05)",
    )
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--out", type=Path, default=OUT_DIR / "soak.json")
    p.add_argument("--verbose", action="store_true", help="print each sample as it is taken")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    warmup = args.warmup if args.warmup is not None else min(300.0, args.duration / 10)
    if args.retention and not retention_flag_exists():
        print(f"the reactor has no --db.retention: running without {args.retention}", flush=True)
        args.retention = ""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="fw-soak-") as tmpdir:
        soak = Soak(args, Path(tmpdir), rng=random.Random(args.seed), db_url=args.db_url)
        cleanups: list[Callable[[], object]] = []
        error: str | None = None
        codes: dict[str, int | None] = {}
        try:
            if args.postgres:
                soak.db_url = _start_postgres(cleanups)
            soak.start_standin()
            soak.start_reactor()
            soak.start_exporter()
            asyncio.run(soak.run())
        except BaseException as exc:  # the samples so far are still written
            error = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, Exception):
                raise
        finally:
            codes = soak.stop()
            for cleanup in reversed(cleanups):
                cleanup()
            logs = {p.name: _tail(p) for p in Path(tmpdir).glob("*.log")} if error else {}
    fits = fit_table(soak.samples, warmup, args.tolerance) if soak.samples else []
    result = {
        "started_utc": started,
        "machine": machine,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "warmup_s": warmup,
        "store": "postgresql" if soak.db_url else "sqlite",
        "error": error,
        "exit_codes": codes,
        "totals": soak.totals,
        "churn": soak.folder.counts if soak.folder else {},
        "flap_errors": soak.flap_errors[:20],
        "load_1m": _spread([s["load_1m"] for s in soak.samples]),
        "fits": [asdict(f) for f in fits],
        "growing": [f.metric for f in fits if f.grows],
        "samples": soak.samples,
        "logs": logs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if soak.samples:
        write_csv(out.with_suffix(".csv"), soak.samples)
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "fits")}, indent=1))
    print(markdown_table(fits))
    print(f"samples: {out.with_suffix('.csv')}  result: {out}")
    if error:
        print(f"soak failed: {error}", file=sys.stderr)
    return result


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _start_postgres(cleanups: list[Callable[[], object]]) -> str:
    from tests.helpers.reactor_postgres import PostgresServer

    server = PostgresServer(Path(tempfile.mkdtemp(prefix="fw-soak-pg-")))
    cleanups.append(server.remove)
    cleanups.append(server.stop)
    server.init().start()
    return server.create_database("soak")


if __name__ == "__main__":
    sys.exit(1 if main()["error"] else 0)
