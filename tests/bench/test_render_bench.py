"""Smoke run of the rendering benchmark (bench/render.py) on a few clusters."""

from __future__ import annotations

from pathlib import Path

from bench import render
from bench.common import is_number


def test_render_benchmark_runs(tmp_path: Path) -> None:
    out = render.main(
        ["--clusters", "30", "--levels", "1", "6", "--runs", "2", "--out", str(tmp_path / "r.json")]
    )
    size = out["30"]
    held = size["check_results_held"]
    assert held["objects"] > 0 and is_number(held["per_cluster"])
    for level in ("1", "6"):
        one = size["levels"][level]
        assert one["metrics_gzip_bytes"] < one["metrics_plain_bytes"]
        for key in ("render_fresh_cpu_s", "render_reusing_cpu_s"):
            assert is_number(one[key]["median"]), key
