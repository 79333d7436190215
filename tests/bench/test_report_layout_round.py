"""bench.report.layout_round: the before/after tables of bench/run_layout_round.sh's files.

Two passes of made-up probe-cycle results: each run's row carries the load ``uptime``
gave at its start, and the summary compares the sides run by run and pass by pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report


def _cycle(cpu_ms: float, load: float) -> dict[str, object]:
    def cycle(kind: str, ms: float) -> dict[str, object]:
        return {"kind": kind, "wall_s": 5.0, "cpu_ms_per_probe": ms, "render_cpu_s": 0.08}

    run = {
        "cycles": [cycle("first", 2.5), cycle("steady", cpu_ms), cycle("steady", cpu_ms)],
        "rss_peak_mib": 440.0,
        "load": {"loadavg_1m": load},
    }
    return {"sizes": {"10000": {"runs": [run]}}}


def test_each_run_has_its_load_and_each_pass_is_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "OUT_DIR", tmp_path)
    folder = tmp_path / "r"
    folder.mkdir()
    steady = {"before_1": 0.20, "after_1": 0.22, "before_2": 0.30, "after_2": 0.27}
    log = []
    for i, (name, ms) in enumerate(steady.items()):
        (folder / f"cycle_{name}.json").write_text(json.dumps(_cycle(ms, 5.0 + i)))
        side, run = name.split("_")
        log.append(f"=== 07:0{i}:00 cycle {side} pass {run}; uptime: {i}.50, 6.00, 7.25")
    (folder / "log.txt").write_text("\n".join(log) + "\n")
    text = report.layout_round("r")
    assert "| before pass 2 | 2.50 / 6.00 / 7.25 |" in text
    assert text.count("| 440 |") == 4  # one row per run, nothing of a reactor run
    [row] = [line for line in text.splitlines() if line.startswith("| steady cycle, CPU")]
    # before 0.20 and 0.30, after 0.22 and 0.27: the ranges overlap; after is higher in
    # pass 1 (1.10) and lower in pass 2 (0.90)
    assert row.split(" | ")[4:] == ["yes", "1.00 (0.90-1.10)", "1 of 2 |"]
