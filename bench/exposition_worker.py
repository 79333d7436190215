"""One side of bench/exposition_baseline.py: render cluster tables with one commit's code.

Run by the baseline as ``python -P bench/exposition_worker.py INPUT OUT --runs N`` with
``PYTHONPATH`` on the commit's tree (a checkout of an old commit, or the repository): it
imports nothing but the standard library and that tree's ``exporter`` (and its discovery
types), so the code measured is that commit's. The places that moved since 8a3e263 are
looked up at start (:func:`_api`); nothing else of the old code is written here.

INPUT (JSON, from ``tests.helpers.exposition_cases.case_doc``): ``recorded``, cases by
key, each rendered once (``/metrics`` and ``/sd/control-plane`` written to
``OUT/recorded.json``); ``fleet``, one case at fleet scale, rendered ``--runs`` times
fresh (every check result new: kept, snapshot, render) and steady (the next phase: new
probes, the same results), CPU seconds of this thread; the bodies of its last fresh
rendering are written to ``OUT/fleet.metrics`` and ``OUT/fleet.sd``, the timings printed
as JSON.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _tree_only() -> Path:
    """Import only from the tree on ``PYTHONPATH``: the virtualenv's editable install of
    the repository would answer for a module the tree lacks (``exporter.expose`` of
    8a3e263), so the probes of :func:`_first` would find this repository's code."""
    sys.meta_path[:] = [
        f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")
    ]
    return Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).resolve()


def _outside(tree: Path) -> list[str]:
    """Product modules loaded from anywhere but ``tree`` (none, or the run is void)."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("exporter", "common", "discovery", "fleetwatch")
        and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(tree)
    )


def _first(*names: str) -> types.ModuleType:
    """The first of ``names`` this tree has (the module moved between commits)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {names} in this tree")


class Api:
    """The exposition's entry points in this tree, whichever layout it has."""

    def __init__(self) -> None:
        self.model = importlib.import_module("exporter.model")
        self.state = importlib.import_module("exporter.state")
        self.clusters = _first("fleetwatch.discovery.clusters", "discovery.clusters",
                               "exporter.discovered")  # fmt: skip
        self.snapshot = _first("exporter.expose.snapshot", "exporter.snapshot")
        self.render_module = _first("exporter.expose.render", "exporter.exposition")
        try:
            encodings = importlib.import_module("exporter.expose.encodings")
        except ImportError:
            encodings = None
        #: results kept encoded by the table (after 8a3e263), or as handed (8a3e263)
        self.encoder: Callable[[Any], Any] | None = getattr(encodings, "Encoder", None)
        #: what a check hands when its result did not change (after 8a3e263); 8a3e263's
        #: check handed the same object again
        self.unchanged = getattr(self.model, "UNCHANGED", None)

    def render(self, snap: Any, previous: Any) -> Any:
        """``render`` of /metrics (gzip level 6) and /sd/control-plane as the server does."""
        fn = self.render_module.render
        if "previous" in fn.__code__.co_varnames:
            return fn(snap, b"", 6, previous)
        return fn(snap, b"")

    @staticmethod
    def bodies(rendered: Any) -> tuple[bytes, bytes]:
        """The plain /metrics and /sd/control-plane of a rendering."""
        metrics, sd = rendered.metrics, rendered.sd_control_plane
        if isinstance(metrics, bytes):
            return metrics, sd
        return metrics.plain(), sd.plain()

    def forget(self) -> None:
        """8a3e263 kept the rendered lines of the last rendering by result identity in the
        module: clear them, so a fresh rendering is fresh there too."""
        for cache in ("_check_lines", "_sd_groups"):
            if isinstance(getattr(self.render_module, cache, None), dict):
                setattr(self.render_module, cache, {})


def _results(api: Api, doc: dict[str, Any]) -> list[Any]:
    m = api.model
    return [
        m.CheckResult(
            tuple(m.Sample(name, value, labels) for name, value, labels in r["samples"]),
            tuple(m.TargetGroup(tuple(t), labels) for t, labels in r["targets"]),
        )
        for r in doc["results"]
    ]


class Table:
    """A case in this tree's cluster table: discovery and probes applied; checks apart."""

    def __init__(self, api: Api, case: dict[str, Any]) -> None:
        m = api.model
        self.api, self.case = api, case
        self.families = tuple(m.MetricFamily(*f) for f in case["families"])
        self.keeper = api.encoder(self.families) if api.encoder is not None else None
        self.table = api.state.ClusterTable()
        clusters = tuple(
            api.clusters.Cluster(c["name"], c["endpoint"], c["source"], c["context"])
            for c in case["clusters"]
        )
        readable = {c["source"]: c["probeable"] for c in case["clusters"]}
        discovery = api.clusters.Discovery(clusters, (), fleet_size=len(clusters))
        self.table.apply_discovery(discovery, readable)
        for c in case["clusters"]:
            for success, reason, duration, status, detail in c["probes"]:
                why = m.Reason(reason) if reason is not None else None
                probe = m.ProbeResult(success, why, duration, status, detail)
                self.table.record(c["name"], probe, c["probed_at"])
        self.results = {c["name"]: _results(api, c) for c in case["clusters"]}

    def set_checks(self, unchanged: bool = False) -> None:
        """Each cluster's check results as the cycle hands them: new, or (``unchanged``)
        the next phase's answer of a check whose result did not change."""
        for name, results in self.results.items():
            if not results:
                continue
            if self.keeper is None:
                self.table.set_checks(name, results)
            elif unchanged and self.api.unchanged is not None:
                self.table.set_checks(name, [self.api.unchanged] * len(results), self.keeper)
            else:
                self.table.set_checks(name, results, self.keeper)

    def snapshot(self) -> Any:
        stats = self.api.snapshot.CycleStats(*self.case["stats"])
        stats.check_errors = dict(self.case["check_errors"])
        settings = self.api.model.CycleSettings(*self.case["settings"])
        return self.api.snapshot.build_snapshot(self.table, self.families, stats, settings)

    def next_probes(self, now: float) -> None:
        """The next phase: every probeable cluster probed again, a success."""
        probe = self.api.model.ProbeResult(True, None, 0.0009, 200)
        for c in self.case["clusters"]:
            if c["probeable"]:
                self.table.record(c["name"], probe, now)


def recorded(api: Api, cases: dict[str, Any]) -> dict[str, str]:
    """Each case rendered once, as the recording keys it."""
    out: dict[str, str] = {}
    for key, case in cases.items():
        table = Table(api, case)
        table.set_checks()
        api.forget()
        metrics, sd = api.bodies(api.render(table.snapshot(), None))
        out[f"{key}/metrics"] = metrics.decode()
        out[f"{key}/sd"] = sd.decode()
    return out


def timed(api: Api, case: dict[str, Any], runs: int) -> tuple[dict[str, list[float]], Any]:
    """CPU seconds of a fresh phase and of the steady phase after it, ``runs`` times; the
    last fresh rendering (the case's state, nothing of this run's clock)."""
    times: dict[str, list[float]] = {"fresh": [], "steady": []}
    fresh = None
    for _ in range(runs):
        table = Table(api, case)
        api.forget()
        gc.collect()
        t0 = time.thread_time()
        table.set_checks()
        fresh = api.render(table.snapshot(), None)
        times["fresh"].append(time.thread_time() - t0)
        table.next_probes(time.time())
        gc.collect()
        t0 = time.thread_time()
        table.set_checks(unchanged=True)
        api.render(table.snapshot(), fresh)
        times["steady"].append(time.thread_time() - t0)
    return times, fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    doc = json.loads(args.input.read_text())
    tree = _tree_only()
    api = Api()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"exporter": str(Path(api.state.__file__).parent)}
    if doc.get("recorded"):
        (args.out / "recorded.json").write_text(json.dumps(recorded(api, doc["recorded"])))
    if doc.get("fleet"):
        times, last = timed(api, doc["fleet"], args.runs)
        metrics, sd = api.bodies(last)
        (args.out / "fleet.metrics").write_bytes(metrics)
        (args.out / "fleet.sd").write_bytes(sd)
        result["cpu_s"] = times
    outside = _outside(tree)
    if outside:
        raise SystemExit(f"modules from outside {tree}: {outside}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
