"""The exposition against the code of an old commit, run again: the same bytes, and speed.

Commit 8a3e263 holds the exposition before it was rebuilt for 10,000 clusters (issue 13).
Rather than a copy of its code, this exports that commit (``git archive``, into a
temporary folder; nothing in the repository changes) and runs its own ``ClusterTable``,
``build_snapshot`` and ``render`` in a process of its own (``bench/exposition_worker.py``
with ``PYTHONPATH`` on the export), and this tree's in another, on the same input:

- the cases of ``tests/helpers/exposition_cases.py`` (``RECORDED``): 8a3e263's bodies
  must be the recording tests/exporter/test_exporter_exposition.py compares with
  (tests/fixtures/exposition-8a3e263.json.gz), and this tree's must be 8a3e263's with
  what was added since (``with_additions``);
- a fleet of N clusters with the control-plane check's results (the check run against a
  stand-in control plane's kube-system answers, as bench/render.py fills its table): the
  same comparison of the bytes, and CPU seconds per phase, fresh (every check result
  new: kept by the table, snapshot, render with gzip level 6) and steady (the next phase:
  new probes, the same results), median of ``--runs`` per process; the processes of the
  two trees alternate (``--rounds``), so both see the same load. ``ratio``: this tree's
  median over the baseline's.

``--record`` writes the recording again from the baseline's bodies (after a case is added
to ``RECORDED``); the test keeps reading the recording, so it needs no git history.

Run: ``.venv/bin/python -m bench.exposition_baseline --clusters 2000 --runs 5``
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, export_tree, machine_load, summary, write_result

WORKER = Path(__file__).resolve().parent / "exposition_worker.py"
RECORDING = REPO / "tests" / "fixtures" / "exposition-8a3e263.json.gz"


def fleet_case(clusters: int) -> Any:
    """``clusters`` probed clusters, each with the control-plane check's result."""
    from bench.render import _KubeSystem
    from exporter.controlplane.check import ControlPlaneCheck
    from exporter.expose.snapshot import declared_families
    from exporter.model import CheckResult, ProbeResult
    from fleetwatch.discovery.clusters import Cluster
    from tests.helpers.exposition_cases import Case, Spec

    check = ControlPlaneCheck()
    specs: list[Spec] = []

    async def run_checks() -> None:
        for i in range(clusters):
            cluster = Cluster(f"fleet-{i:05d}", f"https://127.0.{i // 250}.{i % 250 + 1}:6443",
                              f"/run/fleet/shard-{i // 5000}.yaml", f"fleet-{i:05d}")  # fmt: skip
            probe = ProbeResult(True, None, 0.0008 + i * 1e-7, 200)
            result = await check.run(cluster, _KubeSystem(i), probe)  # type: ignore[arg-type]
            assert isinstance(result, CheckResult)  # a first run: a result, never Unchanged
            specs.append(Spec(cluster, probes=[probe], results=[result]))

    asyncio.run(run_checks())
    return Case(specs, declared_families([check.families]))


def run_worker(tree: Path, input_path: Path, out: Path, runs: int) -> dict[str, Any]:
    """The worker on ``tree``'s code (``-P``: not bench/ first on sys.path, whose modules
    are named like the product's packages)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-P", str(WORKER), str(input_path), str(out), "--runs", str(runs)]
    with machine_load() as load:
        done = subprocess.run(
            argv, cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"worker on {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    result["load"] = load
    return result


def _differs(name: str, got: bytes, want: bytes) -> dict[str, Any] | None:
    """None when equal; else where the first differing line is."""
    if got == want:
        return None
    lines, expected = got.splitlines(), want.splitlines()
    line = next(
        (i for i, (a, b) in enumerate(zip(lines, expected, strict=False)) if a != b),
        min(len(lines), len(expected)),
    )
    return {
        "what": name,
        "line": line + 1,
        "got": lines[line].decode(errors="replace")[:200] if line < len(lines) else None,
        "want": expected[line].decode(errors="replace")[:200] if line < len(expected) else None,
    }


def compare(cases: dict[str, Any], fleet: Any, before: Path, after: Path) -> dict[str, Any]:
    """The baseline's bodies against the recording, and this tree's against the baseline's
    (with the additions since): the first differing line of each body that differs."""
    from tests.helpers.exposition_cases import tables, with_additions

    recording: dict[str, str] = json.loads(gzip.decompress(RECORDING.read_bytes()))
    old: dict[str, str] = json.loads((before / "recorded.json").read_text())
    new: dict[str, str] = json.loads((after / "recorded.json").read_text())
    vs_recording = [
        _differs(key, old[key].encode(), text.encode()) for key, text in recording.items()
    ]
    vs_before = []
    for key, case in cases.items():
        snap = tables(case)
        want = with_additions(old[f"{key}/metrics"], snap)
        vs_before.append(_differs(f"{key}/metrics", new[f"{key}/metrics"].encode(), want))
        vs_before.append(
            _differs(f"{key}/sd", new[f"{key}/sd"].encode(), old[f"{key}/sd"].encode())
        )
    if fleet is not None:
        snap = tables(fleet)
        old_text = (before / "fleet.metrics").read_text()
        vs_before.append(
            _differs("fleet/metrics", (after / "fleet.metrics").read_bytes(),
                     with_additions(old_text, snap))
        )  # fmt: skip
        vs_before.append(
            _differs(
                "fleet/sd", (after / "fleet.sd").read_bytes(), (before / "fleet.sd").read_bytes()
            )
        )
    return {
        "recording_keys": len(recording),
        "baseline_is_the_recording": [d for d in vs_recording if d is not None],
        "this_tree_is_the_baseline": [d for d in vs_before if d is not None],
    }


def record(before: Path) -> None:
    """The recording rewritten from the baseline's bodies (sorted keys; gzip without a
    timestamp, so the same bodies give the same file)."""
    old: dict[str, str] = json.loads((before / "recorded.json").read_text())
    body = json.dumps(dict(sorted(old.items())), ensure_ascii=False).encode()
    RECORDING.write_bytes(gzip.compress(body, compresslevel=9, mtime=0))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="8a3e263", help="the commit to compare with")
    parser.add_argument("--clusters", type=int, default=2000, help="the fleet; 0: cases only")
    parser.add_argument("--runs", type=int, default=5, help="fresh and steady phases per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per tree, alternating")
    parser.add_argument("--record", action="store_true", help="rewrite the recording")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from tests.helpers.exposition_cases import RECORDED, case_doc

    cases = {key: build() for key, build in RECORDED.items()}
    t0 = time.monotonic()
    fleet = fleet_case(args.clusters) if args.clusters else None
    doc = {
        "recorded": {key: case_doc(case) for key, case in cases.items()},
        "fleet": case_doc(fleet) if fleet is not None else None,
    }
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="fw-bench-exposition-") as tmp:
        base = Path(tmp)
        trees = {"before": export_tree(args.baseline, base / "baseline"), "after": REPO}
        input_path = base / "input.json"
        input_path.write_text(json.dumps(doc))
        prepared = time.monotonic() - t0
        for n in range(args.rounds):
            for side, tree in trees.items():  # alternating: the same load for both
                runs[side].append(run_worker(tree, input_path, base / f"{side}-{n}", args.runs))
        checked = compare(cases, fleet, base / "before-0", base / "after-0")
        if args.record:
            record(base / "before-0")
    out: dict[str, Any] = {
        "baseline_commit": args.baseline,
        "clusters": args.clusters,
        "prepare_s": round(prepared, 1),
        "runs": runs,
        **checked,
    }
    if fleet is not None:
        for phase in ("fresh", "steady"):
            medians = {
                side: summary([t for r in runs[side] for t in r["cpu_s"][phase]]) for side in runs
            }
            out[f"{phase}_cpu_s"] = medians
            out[f"{phase}_ratio"] = round(
                medians["after"]["median"] / max(medians["before"]["median"], 1e-9), 3
            )
    write_result("exposition_baseline", out, args.out)
    return out


if __name__ == "__main__":
    main()
