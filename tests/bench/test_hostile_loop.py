"""Smoke run of bench.hostile_loop: one hostile mode, short, every figure there.

Only that it runs and gives numbers; the times belong in bench/RESULTS.md (the tests of the
mechanism, requests counted, are ``tests/discovery/test_discovery_hostile.py`` and
``tests/reactor/test_cd_hostile.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import hostile_loop
from bench.common import is_number

pytestmark = pytest.mark.live


def test_hostile_loop_times_the_loop_and_the_reactor(tmp_path: Path) -> None:
    out = hostile_loop.main(
        ["--seconds", "1", "--modes", "410-event", "--out", str(tmp_path / "h.json")]
    )
    discovery, cd = out["runs"]
    assert (discovery["target"], cd["target"]) == ("discovery", "cd")
    for run in (discovery, cd):
        assert all(is_number(run[k]) for k in ("lag_p90_s", "lag_max_s", "cpu_share")), run
        assert run["requests"] >= 1 and is_number(run["load"]["loadavg_1m"])
    assert cd["probe_s"]["n"] >= 1 and is_number(cd["probe_s"]["max"])
    assert "| 410-event | cd |" in hostile_loop.markdown(out["runs"])
