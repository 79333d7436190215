"""Smoke runs of the fleet benchmarks on a handful of stand-in clusters (real processes).

Each asserts only that the benchmark ran end to end and produced numbers: timing
thresholds belong in bench/RESULTS.md, never in the test suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import e2e, probe_cycle, reactor, scrape, vs_blackbox
from bench.common import is_number

pytestmark = pytest.mark.live


def test_probe_cycle_runs_with_a_hung_cluster(tmp_path: Path) -> None:
    out = probe_cycle.main(
        ["--clusters", "4", "--hang-fraction", "0.25", "--runs", "1", "--steady", "1",
         "--timeout", "1", "--interval", "1.5", "--out", str(tmp_path / "p.json")]
    )  # fmt: skip
    size = out["4"]
    assert size["hanging"] == 1
    first, steady = size["runs"][0]["cycles"]
    assert (first["kind"], first["probes"], first["ok"]) == ("first", 4, 3)
    assert (steady["kind"], steady["ok"], steady["failed"]) == ("steady", 3, {"timeout": 1})
    for key in ("first_wall_s", "steady_wall_s", "steady_cpu_ms_per_probe", "rss_peak_mib"):
        assert is_number(size["summary"][key]["median"]), key
    assert is_number(first["fleet_cpu_s"])


def test_vs_blackbox_runs(tmp_path: Path) -> None:
    out = vs_blackbox.main(
        ["--clusters", "4", "--runs", "1", "--steady", "1", "--probes", "20",
         "--out", str(tmp_path / "v.json")]
    )  # fmt: skip
    run = out["runs"][0]
    assert run["blackbox"]["ok"] == run["blackbox"]["probes"] == 20
    for key in ("ratio_steady", "ratio_first", "blackbox_probes_per_cpu_s"):
        assert is_number(out[key]["median"]), key


def test_scrape_runs(tmp_path: Path) -> None:
    out = scrape.main(
        ["--clusters", "4", "--scrapes", "3", "--runs", "1", "--out", str(tmp_path / "s.json")]
    )
    assert out["series"] > 4 * 5
    for kind in ("scrape_plain", "scrape_gzip"):
        assert out[kind]["scrapes"] == 3 and is_number(out[kind]["seconds"]["median"])
    assert out["scrape_gzip"]["bytes"] < out["scrape_plain"]["bytes"]
    assert is_number(out["speedup_vs_generate_latest_collector"])
    assert is_number(out["exporter_rss_peak_mib_after_first_cycle"])


def test_reactor_benchmark_runs(tmp_path: Path) -> None:
    out = reactor.main(
        ["--duration", "1", "--runs", "1", "--clusters", "5", "--apps-per-cluster", "2",
         "--cascade-apps", "50", "--out", str(tmp_path / "r.json")]
    )  # fmt: skip
    dep = out["deployments"]
    assert dep["runs"][0]["reactor"]["non_2xx"] == 0 and dep["runs"][0]["bare"]["non_2xx"] == 0
    assert is_number(dep["rps_ratio"]["median"]) and is_number(dep["reactor_p99_ms"]["median"])
    hooks = out["webhooks"]
    assert hooks["apps_after_first"]["offline"]["DEGRADED"] == 10
    assert hooks["apps_after_first"]["restore"]["DEGRADED"] == 0
    assert is_number(hooks["seconds"]["offline"]["median"])
    assert out["cascade"]["counts_checked"] is True
    assert is_number(out["cascade"]["degrade_seconds"]["median"])
    assert out["database"]["seeded_bytes"] >= out["database"]["empty_bytes"] > 0
    # The bare aiohttp peer of the same run (bench.aiohttp_baseline's wrk path).
    assert dep["runs"][0]["bare"]["rps"] > 0 and is_number(dep["bare_p99_ms"]["median"])


def test_e2e_benchmark_runs(tmp_path: Path) -> None:
    # Mode "error" rather than "down": bringing a "down" stand-in cluster back fails now
    # and then with EADDRINUSE (a stand-in bug, bench/RESULTS.md finding 4), and this
    # test keeps the benchmark's code alive; it is not the stand-in's test.
    out = e2e.main(
        ["--runs", "1", "--threshold", "1", "--interval", "0.5", "--clusters", "2",
         "--mode", "error", "--out", str(tmp_path / "e.json")]
    )  # fmt: skip
    assert out["floor_s"] == 0.5
    assert is_number(out["down_to_degraded_s"]["median"])
    assert is_number(out["up_to_deployed_s"]["median"])
    assert out["other_clusters_untouched"] is True
