"""Smoke run of bench.floors on a few stand-in clusters: every step runs and gives numbers.

Only that it runs, that OpenSSL resumed every session in the bare client and in s_time,
that every exporter step probed every cluster, and that the tables render; the figures
belong in bench/RESULTS.md (round 17), not in the test suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import floors, handshake_floor
from bench.common import is_number

pytestmark = pytest.mark.live


def test_floors_runs_every_step(tmp_path: Path) -> None:
    out_file = tmp_path / "f.json"
    argv = ["--clusters", "6", "--option-clusters", "4", "--seconds", "1", "--steady", "1"]
    out = floors.main([*argv, "--no-arena-10k", "--out", str(out_file)])
    steps = {s["step"]: s["result"] for s in out["steps"]}
    bare = steps["bare ssl client"]
    assert bare["connections"] == bare["resumed"] == 4
    for key in ("conn_malloc_kib_released", "session_malloc_kib", "resumed_handshake_get_cpu_ms"):
        assert is_number(bare[key]) and bare[key] > 0, key
    assert steps["openssl resumed handshake + GET"]["reused"] > 0
    cycles = {name: r for name, r in steps.items() if "runs" in r and "clusters" in r}
    assert set(cycles) == {
        "as built 6", "probe only 6", "as built 4", "probe only 4", "max idle 0 4",
        "a certificate per cluster 4", "arena 2 4",
    }  # fmt: skip
    for name, result in cycles.items():
        for cycle in result["runs"][0]["cycles"]:
            assert cycle["ok"] == result["clusters"], (name, cycle)
    table = floors.tables(out_file)
    assert table.count("\n") == len(out["steps"]) + 1


def test_full_handshakes_are_not_resumed(tmp_path: Path) -> None:
    """``-new`` makes full handshakes only: the floor is not a resumed one's."""
    result = handshake_floor.measure(1, page="/")
    assert result["connections"] > 0 and result["reused"] == 0
    assert result["client_total_cpu_ms"] >= result["client_cpu_ms"] > 0
