"""The Secrets-versus-files benchmark: what it reads and writes, then its quick mode end to end.

The smoke run asserts that every part ran and gave numbers, and the behaviour the
benchmark relies on (every cluster probed from Secrets, again after a rotation of every
token, the watches still open); timing goals belong in bench/RESULTS.md, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import secret_discovery
from bench.common import is_number
from fleetwatch.discovery import DEFAULT_SELECTOR, read_secret

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="

EXPOSITION = """\
# TYPE fleetwatch_cluster_probe_success gauge
fleetwatch_cluster_probe_success{cluster="a"} 1
fleetwatch_cluster_probe_success{cluster="b"} 0
fleetwatch_cluster_probe_success{cluster="c"} 1
fleetwatch_cluster_probe_failures_total{cluster="b",reason="unauthorized"} 2
fleetwatch_cluster_probe_failures_total{cluster="c",reason="unauthorized"} 1
fleetwatch_exporter_clusters_discovered 3
fleetwatch_exporter_cycle_duration_seconds 1.25
fleetwatch_exporter_cycles_total 7
fleetwatch_exporter_last_cycle_timestamp_seconds 1.7e+09
fleetwatch_discovery_kubernetes_objects{kind="argocd"} 3
fleetwatch_discovery_kubernetes_objects{kind="labelled"} 0
fleetwatch_discovery_kubernetes_watch_restarts_total{reason="closed"} 4
fleetwatch_discovery_kubernetes_errors_total{reason="network"} 1
"""


def test_the_exposition_is_read_for_cycles_probes_and_the_watch() -> None:
    got = secret_discovery.parse_metrics(EXPOSITION, at=5.0)
    assert (got.cycles, got.cycle_duration, got.last_cycle_end) == (7, 1.25, 1.7e9)
    assert (got.discovered, got.probed, got.ok) == (3, 3, 2)
    assert got.failures == {"unauthorized": 3.0}
    assert (got.objects, got.restarts, got.errors) == (3, {"closed": 4.0}, {"network": 1.0})


def test_the_benchmark_secret_is_the_same_cluster_for_discovery() -> None:
    cluster = secret_discovery.FleetCluster("bench-0001", "https://127.0.0.1:4443", "tok", CA)
    secret = secret_discovery.argocd_secret(cluster, "new-token")
    secret["metadata"]["uid"] = "u1"
    secret["metadata"]["resourceVersion"] = "9"
    read = read_secret(secret, DEFAULT_SELECTOR)
    assert read is not None
    [found] = read.clusters
    assert (found.cluster.name, found.cluster.endpoint) == ("bench-0001", "https://127.0.0.1:4443")
    assert found.cluster.not_probeable is None and found.config is not None
    assert read.problems == ()


@pytest.mark.live
def test_the_quick_mode_runs_both_sources_and_a_rotation(tmp_path: Path) -> None:
    out = secret_discovery.main(["--quick", "--out", str(tmp_path / "s.json")])
    n = out["clusters"]
    runs = out["runs"]
    assert set(runs) == {"files-1", "secrets-1", f"files-{n}", f"secrets-{n}"}
    for name, run in runs.items():
        assert is_number(run["all_probed_s"]) and is_number(run["rss_mib"]), name
        assert is_number(run["rest"]["cpu_s"]), name
    assert is_number(runs[f"secrets-{n}"]["listed_s"])
    for key in ("files_kib_per_cluster", "secrets_kib_per_cluster", "secrets_vs_files"):
        assert is_number(out["memory"][key]), key
    rotation = runs[f"secrets-{n}"]["rotation"]
    assert is_number(rotation["all_ok_after_s"]) and is_number(rotation["max_cycle_s"])
    assert rotation["objects"] == n
    assert rotation["watches_open"] == 3  # none stalled or terminated by the burst
    assert rotation["relists"] == 0
    assert "| secrets |" in secret_discovery.markdown(out)
