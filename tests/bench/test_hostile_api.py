"""The hostile-API benchmark, run short: every number is there, and this checkout's
reflectors back off (the rates themselves are bench/RESULTS.md's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import hostile_api
from bench.common import is_number

pytestmark = pytest.mark.live


def test_hostile_api_counts_requests_and_cpu_per_target(tmp_path: Path) -> None:
    out = hostile_api.main(
        ["--seconds", "3", "--modes", "410-event", "--only", "after",
         "--out", str(tmp_path / "h.json")]
    )  # fmt: skip
    (run,) = out["runs"]
    assert run["version"] == "after" and len(run["load"]) == 2
    for target in ("discovery", "cd"):
        numbers = run[target]
        assert all(is_number(numbers[k]) for k in ("lists_per_min", "cpu_s")), numbers
        # a first round at once, then waits of 0.8-1.6 and 1.6-3.2 s: at most 3 rounds
        # per reflector in 3 s (no backoff: thousands)
        rounds = 3 * numbers["reflectors"]
        assert 0 < numbers["lists_per_min"] * 3 / 60 <= rounds + 0.5
    assert "| 410-event | discovery (3) |" in hostile_api.markdown(out)
