"""A real Prometheus scrapes the stand-in's node addresses: up 1 where fixed, 0 where not."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ControlPlane, ThreadedFleet, node_ip
from tests.helpers.controlplane_nodes import free_first_index

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus"),
]


def _up(base: str) -> dict[str, float]:
    query = urllib.parse.urlencode({"query": "up"})
    with urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=5) as resp:
        result = json.load(resp)["data"]["result"]
    return {r["metric"]["instance"]: float(r["value"][1]) for r in result}


def _both(base: str) -> dict[str, float] | None:
    up = _up(base)
    return up if len(up) == 2 else None


def test_prometheus_sees_the_localhost_trap(tmp_path: Path) -> None:
    plane = ControlPlane(nodes=1, serve_metrics=True).with_localhost_bound("etcd", False)
    with ThreadedFleet(
        tmp_path / "fleet", control_plane=plane, first_index=free_first_index(nodes=1)
    ) as fleet:
        cluster = fleet.add_cluster("c")
        ip = node_ip(cluster.index, 1)
        etcd, scheduler = f"{ip}:2381", f"{ip}:10259"
        port = free_port()
        config = {
            "global": {"scrape_interval": "200ms", "scrape_timeout": "150ms"},
            "scrape_configs": [
                {"job_name": "etcd", "static_configs": [{"targets": [etcd]}]},
                {
                    "job_name": "scheduler",
                    "scheme": "https",
                    "tls_config": {"insecure_skip_verify": True},
                    "static_configs": [{"targets": [scheduler]}],
                },
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        base = f"http://127.0.0.1:{port}"
        argv = [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        with ManagedProcess(argv, tmp_path / "prometheus.log", ready_url=f"{base}/-/ready"):
            up = wait_until(lambda: _both(base), 15, what="both targets scraped")
    assert up == {etcd: 1.0, scheduler: 0.0}
