"""Smoke run of bench.auth_flood: a few scrapes with the right password through a small
flood of wrong ones, each timed.

Only that it runs and gives numbers; the time belongs in bench/RESULTS.md (the test of
the mechanism is ``tests/test_operating_surface_webguard.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import auth_flood
from bench.common import is_number

pytestmark = pytest.mark.live


def test_auth_flood_runs(tmp_path: Path) -> None:
    out = auth_flood.main(
        ["--threads", "4", "--scrapes", "2", "--between", "20", "--out", str(tmp_path / "a.json")]
    )
    assert out["scrape_seconds"]["n"] == 2 and is_number(out["scrape_seconds"]["median"])
    assert out["wrong_sent"] >= 40
