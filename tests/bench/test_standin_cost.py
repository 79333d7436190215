"""Smoke runs of bench/standin_cost.py (compared with itself) and bench/standin_handshake.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import standin_cost, standin_handshake
from bench.common import REPO, is_number

pytestmark = pytest.mark.live


def test_standin_cost_runs_and_compares(tmp_path: Path) -> None:
    out = standin_cost.main(
        ["--clusters", "3", "--steady", "1", "--runs", "1", "--baseline", str(REPO),
         "--out", str(tmp_path / "c.json")]
    )  # fmt: skip
    for side in ("this", "baseline"):
        (run,) = out["runs"][side]
        assert [c["ok"] for c in run["cycles"]] == [3, 3]
        assert run["fleet_descriptors_idle"] >= 3
        summary = out["summary"][side]
        for key in ("first_fleet_cpu_ms_per_cluster", "fleet_rss_peak_mib"):
            assert is_number(summary[key]), key
    assert is_number(out["summary"]["ratio_baseline_over_this"]["fleet_rss_peak_mib"])


def test_standin_handshake_runs(tmp_path: Path) -> None:
    out = standin_handshake.main(
        ["--handshakes", "3", "--rounds", "1", "--clusters", "3", "--steady", "1",
         "--out", str(tmp_path / "h.json")]
    )  # fmt: skip
    per_variant = out["isolated"]["server_cpu_ms_per_handshake"]
    assert set(per_variant) == set(standin_handshake.TICKETS)
    assert all(is_number(v["median"]) for v in per_variant.values())
    assert out["in_fleet"]["ok"] == 3
    assert out["in_fleet"]["of_it_ms_per_cluster"]["handshake"] > 0
    assert is_number(out["in_fleet_steady"]["of_it_ms_per_cluster"]["send"])
