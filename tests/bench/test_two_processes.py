"""Smoke run of bench.two_processes on a few stand-in clusters: two workers, one cycle each.

Only that it ran and that the two exporter-side workers probed the whole fleet between
them; the timings belong in bench/RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import two_processes

pytestmark = pytest.mark.live


def test_two_processes_share_the_fleet(tmp_path: Path) -> None:
    out = two_processes.main(
        ["--clusters", "6", "--steady", "1", "--timeout", "2", "--out", str(tmp_path / "t.json")]
    )
    assert out["processes"] == 2
    first, steady = out["cycles"]
    assert (first["kind"], first["ok"]) == ("first", 6)
    assert (steady["kind"], steady["ok"]) == ("steady", 6)
    assert all(w["cycles"][0]["probes"] == 3 for w in out["workers"])
