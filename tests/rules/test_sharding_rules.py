"""FleetwatchShardingMismatch: shards that do not split the fleet between them are seen.

The promtool unit tests (``alerts/tests/sharding.test.yml``, built by
``sharding_promtool.py``) pair each way to disagree with the alert it raises. The last
test starts the issue's case for real: two exporters (in process) on one fleet of 24
clusters, one at ``--shard.count 2``, the other at 3, the state a rolling change of the
count passes through. Together they publish fewer than the 24 clusters while each looks
healthy; their own ``/metrics``, fed to promtool as they were scraped, raise the alert.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from alerts.rules import RuleSettings, render_rules
from alerts.sharding import SHARDING_ALERT
from exporter.server import MONITOR, create_app
from exporter.settings import resolve
from fleetwatch.common.metricnames import EXPORTER_FLEET_CLUSTERS, EXPORTER_SHARD, EXPORTER_SHARDS
from tests.helpers.alerting_tools import unit_tests
from tests.helpers.sharding_promtool import JOB, render_test_file


@pytest.mark.parametrize("interval", [30.0, 600.0])
def test_promtool_unit_tests_for_other_intervals(tmp_path: Path, interval: float) -> None:
    """The fleet-size rule holds for two intervals (at least 10 minutes)."""
    settings = RuleSettings(probe_interval=interval)
    result = unit_tests(tmp_path, render_rules(settings), render_test_file(settings, "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def _write_fleet(path: Path, names: list[str]) -> None:
    """A kubeconfig of ``names``, every API server on a port nothing listens on."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": n, "cluster": {"server": "https://127.0.0.1:9"}} for n in names
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in names],
            }
        )
    )


async def test_two_shard_counts_leave_clusters_unprobed_and_raise_the_alert(
    tmp_path: Path, aiohttp_client: Callable[[web.Application], Any]
) -> None:
    names = [f"prod-{i:02d}" for i in range(24)]
    _write_fleet(tmp_path / "fleet.yaml", names)
    scraped: dict[str, dict[str, list[Any]]] = {}
    for instance, count, index in (("127.0.1.0:9713", 2, 0), ("127.0.1.1:9713", 3, 1)):
        settings = resolve(
            env={},
            kubeconfig=str(tmp_path / "fleet.yaml"),
            kubeconfig_dir="",
            shard_count=count,
            shard_index=index,
            timeout="2",
        )
        app = create_app(settings, run_loop=False)
        client = await aiohttp_client(app)
        await app[MONITOR].run_cycle()
        text = await (await client.get("/metrics")).text()
        scraped[instance] = {f.name: f.samples for f in text_string_to_metric_families(text)}
        await client.close()

    published = {
        s.labels["cluster"]
        for samples in scraped.values()
        for s in samples["fleetwatch_cluster_info"]
    }
    unprobed = set(names) - published
    assert len(unprobed) == 7, unprobed  # as in the issue: 7 of 24 probed by no one
    for samples in scraped.values():  # each exporter looks healthy and sees the whole fleet
        assert samples["fleetwatch_exporter_cycles"][0].value == 1
        assert samples[EXPORTER_FLEET_CLUSTERS][0].value == 24

    # What Prometheus would hold after scraping both for 15 minutes.
    series = []
    for instance, samples in scraped.items():
        base = {"job": JOB, "instance": instance}
        for name in (EXPORTER_SHARD, EXPORTER_SHARDS, EXPORTER_FLEET_CLUSTERS):
            for sample in samples[name]:
                labels = ", ".join(f'{k}="{v}"' for k, v in {**base, **sample.labels}.items())
                series.append({"series": f"{name}{{{labels}}}", "values": f"{sample.value:g}x15"})
        labels = ", ".join(f'{k}="{v}"' for k, v in base.items())
        series.append({"series": f"up{{{labels}}}", "values": "1x15"})
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": f'ALERTS{{alertname="{SHARDING_ALERT}", alertstate="firing"}}',
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": _alerts_labels(mismatch, "critical"), "value": 1}
                            for mismatch in ("index_missing", "shard_count")
                        ],
                    },
                    {
                        "expr": f'ALERTS{{alertname="{SHARDING_ALERT}", alertstate="firing"}}',
                        "eval_time": "9m",
                        "exp_samples": [],
                    },
                ],
            }
        ],
    }
    rules_text = render_rules(RuleSettings())
    result = unit_tests(tmp_path, rules_text, yaml.safe_dump(tests, sort_keys=False))
    assert result.returncode == 0, result.stdout + result.stderr


def _alerts_labels(mismatch: str, severity: str) -> str:
    return (
        f'ALERTS{{alertname="{SHARDING_ALERT}", alertstate="firing", job="{JOB}", '
        f'mismatch="{mismatch}", severity="{severity}"}}'
    )
