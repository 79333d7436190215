"""Smoke run of bench.connections on a few stand-in clusters, against a baseline tree too.

Only that both workers ran end to end on their own tree, kept every connection alive and
gave numbers; the figures themselves belong in bench/RESULTS.md, not in the test suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import connections
from bench.common import is_number

pytestmark = pytest.mark.live


def test_connections_runs_this_tree_and_a_baseline(tmp_path: Path) -> None:
    out = connections.main(
        ["--connections", "3", "--runs", "1", "--rounds", "1", "--baseline", "HEAD",
         "--out", str(tmp_path / "c.json")]
    )  # fmt: skip
    this, baseline = out["trees"]["this"]["runs"][0], out["trees"]["baseline"]["runs"][0]
    assert this["exporter"] == str(connections.REPO / "exporter")
    assert baseline["exporter"] != this["exporter"]  # the exported tree's, not ours
    for run in (this, baseline):
        assert run["connections"] == run["opened_while_kept"] == 3
        assert run["podlist_bytes"] > run["readyz_bytes"] > 0
        for phase in ("handshake", "readyz", "podlist", "cycle"):
            assert is_number(run[f"malloc_kib_per_conn_{phase}"]), phase
            assert is_number(run[f"rss_kib_per_conn_{phase}"]), phase
        for key in ("keepalive_get_cpu_ms_timeout", "new_connection_cpu_ms"):
            assert is_number(run[key]) and run[key] > 0, key
    assert is_number(this["keepalive_get_cpu_ms_deadline"])
