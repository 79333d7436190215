"""The PostgreSQL side of ``bench/reactor.py`` runs (a smoke run: tiny fleet, 1 s of wrk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import reactor
from bench.common import is_number

pytestmark = pytest.mark.live


def test_the_postgresql_benchmark_runs(tmp_path: Path) -> None:
    out = reactor.main(
        ["--postgres", "--duration", "1", "--runs", "1", "--clusters", "5",
         "--apps-per-cluster", "2", "--cascade-apps", "50", "--writers", "2",
         "--out", str(tmp_path / "r.json")]
    )  # fmt: skip
    side = out["deployments"]
    for key in ("bare", "sqlite", "postgres_1", "postgres_2", "postgres_1_async_commit"):
        assert side[key]["non_2xx"] == 0, key
        assert is_number(side[key]["rps"]["median"]) and side[key]["rps"]["median"] > 0, key
    assert is_number(side["postgres_2"]["rps_ratio"]["median"])
    hooks = out["postgres_webhooks"]
    assert hooks["apps_after_first"]["offline"]["DEGRADED"] == 10
    assert hooks["apps_after_first"]["restore"]["DEGRADED"] == 0
    assert out["postgres_cascade"]["counts_checked"] is True
