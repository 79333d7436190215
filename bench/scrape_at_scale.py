"""Every /metrics scrape answered while discovery works: scrape latency and event-loop lag
from the exporter's start through its first list, first cycle, a forced relist and a
rotation of every Secret (issue 34).

One run, every part a process of its own: the stand-in workload fleet
(``bench.fleet_server``: ``--tls`` clusters answering over TLS, ``--hang`` of them
accepting and never answering), the management stand-in holding one Argo CD cluster
Secret per cluster — the TLS fleet's, plus ``--secrets - --tls`` whose ``server`` is a
127.x address where nothing listens (refused at once) — and ``fleetwatch exporter
--discovery.kubernetes``. A scraper thread reads ``/metrics`` (gzip, as Prometheus)
once a second from the exporter's start, sequentially as Prometheus does (the next
scrape one second after the last one started, or at once when it took longer), and
times each; ``/-/ready`` is polled between scrapes.

Phases, each named on the scrapes that started in it:

- ``start``: until ``/-/ready`` stops saying the first list is missing (the list done);
- ``first cycle``: until ``/-/ready`` is 200 (the first complete cycle served);
- ``steady``: one more cycle;
- ``relist``: every watch closed, and the next one of each reflector answered 410 (the
  stand-in's ``watch_error`` fault): each lists again; ``--after`` seconds;
- ``rotation``: every cluster's token rotated (the fleet accepts only the new ones) and
  every Secret rewritten in one call (the watch delivers ``--secrets`` events at once);
  until the first cycle that started after the rewrite has ended, and ``--after`` s more.

Per phase: scrapes, p50/p99/max latency (s), scrapes over 1 s and 2 s, the exporter's own
``fleetwatch_exporter_event_loop_lag_seconds`` (its 0.99 quantile and worst over the
summary's window, as published at the phase's last scrape; absent before the code that
publishes it), and the load average. The old commit runs the same harness: the lag is
then "-" and only the scrape latency compares.

Run: ``.venv/bin/python -m bench.scrape_at_scale --secrets 20000 --tls 2000 --hang 500``
(``--quick``: 400 Secrets, 100 over TLS, 20 hanging; ``--busy``: another process keeps
one core busy throughout, as the issue's loaded machine). Each cycle's duration is read
from the scrapes (``cycles (s)``: the first one is the first contact with every cluster).
Results:
``bench/out/scrape_at_scale.json``; the table is printed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import write_result
from bench.fleet_server import start_fleet
from bench.secret_discovery import (
    NOT_LISTED,
    Exporter,
    FleetCluster,
    argocd_secret,
    read_fleet,
)
from fleetwatch.common.metricnames import (
    EXPORTER_CYCLE_DURATION,
    EXPORTER_CYCLES,
    EXPORTER_LAST_CYCLE,
)
from fleetwatch.standin.management import ManagementProcess

#: ``fleetwatch_exporter_event_loop_lag_seconds`` (spelled here: the old commit has no
#: such name in its ``fleetwatch.common.metricnames``, and this harness runs against it too)
LAG = "fleetwatch_exporter_event_loop_lag_seconds"
SCRAPE_EVERY = 1.0
SCRAPE_TIMEOUT = 60.0  #: the scraper's own patience (Prometheus gives up after 10 s)


@dataclass
class Sample:
    started: float  #: perf_counter
    seconds: float
    phase: str
    ok: bool


@dataclass(eq=False)  # a thread: hashed by identity
class Scraper(threading.Thread):
    """``/metrics`` once a second, timed; the last body kept for the main thread."""

    base: str
    phase: str = "start"
    samples: list[Sample] = field(default_factory=list)
    last_body: bytes = b""
    #: each cycle's duration as served (cycles_total -> seconds)
    cycles: dict[int, float] = field(default_factory=dict)
    ready: tuple[int, str] | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(name="scraper", daemon=True)

    def run(self) -> None:
        while not self.stop_event.is_set():
            t0 = time.perf_counter()
            phase = self.phase
            ok = False
            try:
                request = urllib.request.Request(
                    self.base + "/metrics", headers={"Accept-Encoding": "gzip"}
                )
                with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT) as resp:
                    body = resp.read()
                ok = True
            except (urllib.error.URLError, OSError):
                body = b""
            seconds = time.perf_counter() - t0
            if ok or self.samples:  # before the first answer the server is not up yet
                self.samples.append(Sample(t0, seconds, phase, ok))
            if ok:
                self.last_body = body
                text = _text(body)
                done = int(_value(text, EXPORTER_CYCLES) or 0)
                if done and done not in self.cycles:
                    self.cycles[done] = _value(text, EXPORTER_CYCLE_DURATION) or 0.0
            self.ready = _ready(self.base)
            self.stop_event.wait(max(0.0, t0 + SCRAPE_EVERY - time.perf_counter()))


def _ready(base: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(base + "/-/ready", timeout=SCRAPE_TIMEOUT) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except (urllib.error.URLError, OSError):
        return None


def _text(body: bytes) -> str:
    return gzip.decompress(body).decode() if body[:2] == b"\x1f\x8b" else body.decode()


def _value(text: str, name: str, labels: str = "") -> float | None:
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def _until(what: str, seconds: float, check: Any, step: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds:g} s")
        time.sleep(step)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


@dataclass(frozen=True)
class Plan:
    secrets: int
    tls: int
    hang: int
    interval: float
    timeout: float
    after: float
    busy: bool = False  #: another process keeps one core busy throughout
    turns: str = ""  #: the probe loop's turns timed into this file (``bench.loop_turns``)
    profile: str = ""  #: with ``turns``: the callbacks profiled (a regex of their names)


def refused_secret(i: int, template: FleetCluster) -> dict[str, Any]:
    """A Secret whose server is a loopback address where nothing listens (port 1)."""
    host = f"127.{1 + i // 65000}.{(i // 250) % 250 + 1}.{i % 250 + 1}"
    cluster = FleetCluster(f"refused-{i:05d}", f"https://{host}:1", template.token,
                           template.ca_data)  # fmt: skip
    return argocd_secret(cluster, template.token)


def _busy_core() -> subprocess.Popen[bytes]:
    """A process that keeps one core busy (stopped by its pid at the end of the run)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run(plan: Plan, tmp: Path) -> dict[str, Any]:
    fleet = start_fleet(tmp / "fleet", plan.tls, hang=plan.hang, credential="token")
    mgmt = ManagementProcess(tmp / "mgmt").start()
    try:
        clusters = read_fleet(sorted(fleet.kubeconfig_dir.glob("*.yaml")))
        refused = [refused_secret(i, clusters[0]) for i in range(plan.secrets - plan.tls)]
        t0 = time.perf_counter()
        for i in range(0, len(refused), 5000):
            mgmt.seed(refused[i : i + 5000], timeout=600)
        mgmt.seed([argocd_secret(c, c.token) for c in clusters], timeout=600)
        seed_s = time.perf_counter() - t0
        result = measure(plan, tmp, fleet, mgmt, clusters)
        result["seed_s"] = round(seed_s, 1)
        return result
    finally:
        mgmt.stop()
        fleet.stop()


def measure(
    plan: Plan, tmp: Path, fleet: Any, mgmt: ManagementProcess, clusters: list[FleetCluster]
) -> dict[str, Any]:
    busy = _busy_core() if plan.busy else None
    exporter = Exporter(tmp, "scale", plan.interval, plan.timeout)
    if plan.turns:  # every turn of the probe loop timed (costs a little: not for figures)
        turns = [sys.executable, "-m", "bench.loop_turns", f"--out={plan.turns}"]
        turns += [f"--profile={plan.profile}", "--"] if plan.profile else ["--"]
        exporter.argv[:1] = turns
    exporter.start("--discovery.kubernetes", f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}")
    scraper = Scraper(exporter.base)
    marks: dict[str, float] = {}
    loads: dict[str, list[float]] = {}
    lag: dict[str, dict[str, float | None]] = {}

    def enter(phase: str) -> None:
        text = _text(scraper.last_body) if scraper.last_body else ""
        lag[scraper.phase] = {
            "p99": _value(text, LAG, '{quantile="0.99"}'),
            "max": _value(text, LAG, '{quantile="1"}'),
        }
        loads.setdefault(scraper.phase, []).append(os.getloadavg()[0])
        marks[phase] = round(exporter.since_start(), 1)
        print(f"{marks[phase]:7.1f} s: {phase}", file=sys.stderr, flush=True)
        scraper.phase = phase
        loads.setdefault(phase, []).append(os.getloadavg()[0])

    def cycles() -> tuple[int, float, float]:
        text = _text(scraper.last_body) if scraper.last_body else ""
        return (
            int(_value(text, EXPORTER_CYCLES) or 0),
            _value(text, EXPORTER_LAST_CYCLE) or 0.0,
            _value(text, EXPORTER_CYCLE_DURATION) or 0.0,
        )

    scraper.start()
    budget = 600 + plan.secrets / 20
    try:
        loads["start"] = [os.getloadavg()[0]]

        def listed() -> bool:
            exporter.alive()
            return scraper.ready is not None and NOT_LISTED not in scraper.ready[1]

        _until("first list", budget, listed)
        enter("first cycle")
        _until("ready", budget, lambda: scraper.ready is not None and scraper.ready[0] == 200)
        enter("steady")
        seen = cycles()[0]
        _until("one more cycle", budget, lambda: cycles()[0] > seen)
        time.sleep(2)  # the next scrapes carry the cycle's publication
        lists_before = mgmt.counts().get("list secrets", 0)
        enter("relist")
        # The next watch of each of the 3 reflectors gets 410 (an ERROR event, as the
        # watch cache answers a compacted revision): each lists again after its backoff.
        mgmt.arm_fault(kind="watch_error", count=3)
        mgmt.close_watches()
        _until("relisted", budget, lambda: mgmt.counts().get("list secrets", 0) > lists_before)
        time.sleep(plan.after)
        relists = mgmt.counts().get("list secrets", 0) - lists_before
        enter("rotation")
        fresh = {c.name: secrets.token_urlsafe(24) for c in clusters}
        fleet.rotate_tokens(fresh)
        rewritten_unix = time.time()
        t0 = time.perf_counter()
        refused = [refused_secret(i, clusters[0]) for i in range(plan.secrets - plan.tls)]
        for obj in refused:  # a new value: every Secret is rewritten, these too
            obj["metadata"].setdefault("annotations", {})["rotated"] = str(rewritten_unix)
        for i in range(0, len(refused), 5000):
            mgmt.seed(refused[i : i + 5000], timeout=600)
        mgmt.seed([argocd_secret(c, fresh[c.name]) for c in clusters], timeout=600)
        rewrite_s = time.perf_counter() - t0

        def cycle_after_rewrite() -> bool:
            _, end, duration = cycles()
            return end - duration > rewritten_unix

        _until("a cycle after the rewrite", budget, cycle_after_rewrite)
        time.sleep(plan.after)
        enter("end")
    finally:
        scraper.stop_event.set()
        scraper.join(SCRAPE_TIMEOUT + 5)
        exporter.stop()
        if busy is not None:
            busy.kill()
            busy.wait(10)
    phases: dict[str, Any] = {}
    for phase in ("start", "first cycle", "steady", "relist", "rotation"):
        got = [s.seconds for s in scraper.samples if s.phase == phase and s.ok]
        failed = sum(1 for s in scraper.samples if s.phase == phase and not s.ok)
        if not got:
            phases[phase] = {"scrapes": 0, "failed": failed}
            continue
        phases[phase] = {
            "scrapes": len(got),
            "failed": failed,
            "p50_s": round(_quantile(got, 0.5), 4),
            "p99_s": round(_quantile(got, 0.99), 4),
            "max_s": round(max(got), 4),
            "over_1s": sum(1 for v in got if v > 1.0),
            "over_2s": sum(1 for v in got if v > 2.0),
            "lag_p99_s": lag.get(phase, {}).get("p99"),
            "lag_max_s": lag.get(phase, {}).get("max"),
            "load1": [round(v, 2) for v in loads.get(phase, [])],
        }
    every = [s.seconds for s in scraper.samples if s.ok]
    return {
        "plan": plan.__dict__,
        "marks_s": marks,
        "ready_s": marks.get("steady"),
        "cycles_s": {n: round(s, 2) for n, s in sorted(scraper.cycles.items())},
        "relists": relists,
        "rewrite_s": round(rewrite_s, 1),
        "phases": phases,
        "all": {
            "scrapes": len(every),
            "p50_s": round(_quantile(every, 0.5), 4),
            "p99_s": round(_quantile(every, 0.99), 4),
            "max_s": round(max(every), 4),
        },
        "loadavg_end": os.getloadavg(),
    }


def markdown(result: dict[str, Any], label: str = "") -> str:
    plan = result["plan"]
    title = f"{label}: " if label else ""
    rows = [
        f"{title}{plan['secrets']:,} Secrets ({plan['tls']:,} over TLS, {plan['hang']:,} of "
        f"them hanging, the rest refused), interval {plan['interval']:g} s, timeout "
        f"{plan['timeout']:g} s{'; one core kept busy' if plan.get('busy') else ''}; "
        f"`/-/ready` 200 at {result['ready_s']} s; phases from {result['marks_s']}; "
        f"cycles (s): {result.get('cycles_s')}",
        "",
        "| phase | scrapes | p50 | p99 | max | > 1 s | > 2 s | failed | loop lag p99 / max "
        "(window) | load1 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase, p in result["phases"].items():
        if not p["scrapes"]:
            rows.append(f"| {phase} | 0 | | | | | | {p['failed']} | | |")
            continue
        lag = (
            "-"
            if p["lag_p99_s"] is None
            else f"{p['lag_p99_s'] * 1000:.0f} / {p['lag_max_s'] * 1000:.0f} ms"
        )
        rows.append(
            f"| {phase} | {p['scrapes']} | {p['p50_s'] * 1000:.0f} ms | "
            f"{p['p99_s'] * 1000:.0f} ms | {p['max_s']:.2f} s | {p['over_1s']} | "
            f"{p['over_2s']} | {p['failed']} | {lag} | {p['load1']} |"
        )
    a = result["all"]
    rows.append(
        f"| all | {a['scrapes']} | {a['p50_s'] * 1000:.0f} ms | {a['p99_s'] * 1000:.0f} ms | "
        f"{a['max_s']:.2f} s | | | | | |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--secrets", type=int, default=20000)
    parser.add_argument("--tls", type=int, default=2000)
    parser.add_argument("--hang", type=int, default=500)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=30.0, help="s kept after relist/rotation")
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--label", default="")
    parser.add_argument("--turns", default="", help="time every probe loop turn into FILE")
    parser.add_argument("--profile", default="", help="with --turns: callbacks to profile")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.secrets, args.tls, args.hang, args.after = 400, 100, 20, 5.0
    plan = Plan(
        args.secrets,
        args.tls,
        args.hang,
        args.interval,
        args.timeout,
        args.after,
        args.busy,
        str(Path(args.turns).resolve()) if args.turns else "",
        args.profile,
    )
    with tempfile.TemporaryDirectory(prefix="fw-bench-scale-") as tmpdir:
        result = run(plan, Path(tmpdir))
    write_result("scrape_at_scale_quick" if args.quick else "scrape_at_scale", result, args.out)
    print(markdown(result, args.label))
    return result


if __name__ == "__main__":
    main()
