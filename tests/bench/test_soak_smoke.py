"""The soak benchmark: its fit and its folder churn, then a 20-second run on a tiny fleet.

The real soak runs for half an hour (bench/RESULTS.md); here it only has to start every
process, churn, flap, load the reactor, sample every series and stop everything.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

from bench import soak
from bench.common import is_number

# --- the fit ------------------------------------------------------------------------------


def test_fit_finds_a_steady_growth_and_its_rate() -> None:
    ts = [5.0 * i for i in range(200)]
    ys = [100 + 0.01 * t + random.Random(i).uniform(-0.5, 0.5) for i, t in enumerate(ts)]
    f = soak.fit("fds", ts, ys)
    assert f.slope_per_10min == pytest.approx(6.0, abs=0.3)
    assert f.verdict == "GROWS" and f.grows
    assert f.start < f.end


def test_fit_calls_noise_without_a_trend_flat() -> None:
    rng = random.Random(3)
    ts = [5.0 * i for i in range(200)]
    ys = [50 + rng.gauss(0, 2) for _ in ts]
    f = soak.fit("rss", ts, ys)
    assert f.verdict == "flat" and not f.grows


def test_fit_small_relative_growth_is_flat_and_a_fall_is_not_growth() -> None:
    ts = [5.0 * i for i in range(100)]
    creep = soak.fit("rss", ts, [1000 + 0.001 * t for t in ts])  # +0.18 % in 30 min
    assert (creep.verdict, creep.why) == ("flat", "under 5% per 30 min")
    fall = soak.fit("p99", ts, [100 - 0.02 * t for t in ts])
    assert fall.verdict == "falls" and not fall.grows


def test_fit_floor_keeps_a_near_zero_series_from_reading_as_huge_growth() -> None:
    ts = [5.0 * i for i in range(100)]
    ys = [0.5 + 0.0001 * t for t in ts]  # 0.5 ms to 0.55 ms
    assert soak.fit("p50", ts, ys, floor=5.0).verdict == "flat"
    assert soak.fit("p50", ts, ys).verdict == "GROWS"


def test_fit_with_too_few_samples_says_so() -> None:
    f = soak.fit("x", [0.0, 1.0], [1.0, 2.0])
    assert f.verdict == "unknown" and math.isnan(f.slope_per_10min)


def test_t_quantiles_shrink_towards_the_normal_one() -> None:
    assert soak.t95(1) == pytest.approx(12.706)
    assert soak.t95(11) == pytest.approx(2.228)  # between entries: the lower df
    assert soak.t95(1000) == pytest.approx(1.96)


# --- the folder churn -----------------------------------------------------------------------

KUBECONFIG = "apiVersion: v1\nclusters:\n- name: {n}\n  cluster:\n    server: {url}\n"


def make_folder(tmp_path: Path, names: list[str]) -> soak.KubeconfigFolder:
    pool = tmp_path / "pool"
    pool.mkdir()
    urls = {n: f"https://127.0.0.1:{10000 + i}" for i, n in enumerate(names)}
    for n in names:
        (pool / f"{n}.yaml").write_text(KUBECONFIG.format(n=n, url=urls[n]))
    return soak.KubeconfigFolder(tmp_path / "dir", {n: pool / f"{n}.yaml" for n in names}, urls)


def visible_files(folder: Path) -> dict[str, str]:
    """What a reader that skips hidden entries and follows links sees."""
    out = {}
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                path = Path(root) / name
                out[str(path.relative_to(folder))] = path.read_text()
    return out


def test_plain_file_rewrite_points_at_another_server_and_back(tmp_path: Path) -> None:
    f = make_folder(tmp_path, ["a", "b"])
    f.add("a", secret=False)
    f.rewrite("a", "b")
    assert visible_files(f.folder) == {"a.yaml": KUBECONFIG.format(n="a", url=f.urls["b"])}
    f.rewrite("a", "b")
    assert "server: " + f.urls["a"] in visible_files(f.folder)["a.yaml"]
    f.remove("a")
    assert list(f.folder.iterdir()) == []
    assert f.counts == {"added": 1, "removed": 1, "rewritten": 2, "data_swaps": 0}


def test_secret_volume_swaps_its_data_link_and_drops_the_old_version(tmp_path: Path) -> None:
    f = make_folder(tmp_path, ["a", "b"])
    f.add("a", secret=True)
    volume = f.folder / "secret-a"
    first = os.readlink(volume / "..data")
    assert visible_files(f.folder) == {"secret-a/value": KUBECONFIG.format(n="a", url=f.urls["a"])}
    f.rewrite("a", "b")
    second = os.readlink(volume / "..data")
    assert second != first and not (volume / first).exists()
    assert (volume / "value").is_symlink()
    assert visible_files(f.folder) == {"secret-a/value": KUBECONFIG.format(n="a", url=f.urls["b"])}
    assert f.counts["data_swaps"] == 1
    f.remove("a")
    assert not volume.exists()


# --- a short run ----------------------------------------------------------------------------


@pytest.mark.live
def test_soak_runs_churns_samples_and_stops_everything(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    result = soak.main(
        ["--duration", "20", "--clusters", "12", "--in-folder", "6", "--apps", "40",
         "--churn", "0.34", "--churn-every", "3", "5", "--flap", "2", "--flap-interval", "1",
         "--probe-interval", "2", "--probe-timeout", "1", "--sample-every", "2",
         "--warmup", "0", "--out", str(out)]
    )  # fmt: skip
    assert result["error"] is None
    # Every process was stopped by us and ended on its own SIGTERM.
    assert result["exit_codes"] == {"exporter": 0, "reactor": 0, "standin": 0}
    samples = result["samples"]
    assert len(samples) >= 6
    for row in samples:
        for metric in soak.FITTED:
            if not metric.startswith("req_"):  # a window may see no answer at all
                assert is_number(row[metric]), (metric, row[metric])
        assert row["exporter_fds"] >= row["exporter_sockets"] > 0
        assert row["exporter_rss_mib"] > 10 and row["reactor_threads"] >= 1
    assert samples[-1]["exporter_cycles"] >= 3
    assert samples[-1]["outages_open"] + samples[-1]["outages_closed"] > 0  # the flaps
    assert samples[-1]["files_in_folder"] == 6
    totals = result["totals"]
    assert totals["requests"] >= 40 and totals["status_5xx"] == 0 and totals["failed"] == 0
    churn = result["churn"]
    assert churn["removed"] >= 2 and churn["added"] >= 8 and churn["rewritten"] >= 2
    assert [f["metric"] for f in result["fits"]] == list(soak.FITTED)
    assert out.exists() and out.with_suffix(".csv").read_text().startswith("t_s,utc,load_1m")
