"""Unit tests for the rules in promtool's format, built for any `RuleSettings`.

The same builder makes the shipped ``alerts/tests/fleetwatch.test.yml`` (for the defaults;
a test keeps it equal) and the threshold tests for other N: one description of the
behaviour, checked by the real ``promtool test rules`` for every N we try.

Regenerate the shipped file after changing the rules::

    .venv/bin/python tests/rules/rules_promtool.py > alerts/tests/fleetwatch.test.yml

Timeline: one sample per minute (``interval: 1m``); position i of a series is minute i.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.rules import RuleSettings, groups

JOB = 'job="fleetwatch-exporter", instance="127.0.0.1:9713"'


def _alert_bodies(settings: RuleSettings) -> dict[str, dict[str, Any]]:
    return {
        rule.body["alert"]: rule.body
        for group in groups(settings)
        for rule in group.rules
        if "alert" in rule.body
    }


def expected(
    settings: RuleSettings,
    alert: str,
    labels: dict[str, str],
    value: float | None = None,
) -> dict[str, Any]:
    """One expected alert: its labels and its annotations as Prometheus renders them.

    The annotation templates use only ``$labels.<name>``, ``$value`` and
    ``$value | humanizePercentage``; ``test_annotations_use_known_templates`` holds them to it.
    """
    body = _alert_bodies(settings)[alert]
    rendered: dict[str, str] = {}
    for key, text in body.get("annotations", {}).items():
        for name, label_value in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label_value)
        if value is not None:
            text = text.replace("{{ $value | humanizePercentage }}", f"{value * 100:.4g}%")
            text = text.replace("{{ $value }}", f"{value:g}")
        rendered[key] = text
    return {
        "exp_labels": {**labels, **body.get("labels", {})},
        "exp_annotations": rendered,
    }


def _values(items: Sequence[float | str]) -> str:
    return " ".join(str(v) for v in items)


def _cluster_series(
    cluster: str,
    failures: Sequence[int | str],
    last_success: Sequence[int | str] | None = None,
    probeable: int = 1,
    instance: str = "127.0.0.1:9713",
) -> list[dict[str, str]]:
    """The exporter's gauges for one cluster over len(failures) minutes."""
    n = len(failures)
    if last_success is None:
        last_success = [100] * n
    labels = f'cluster="{cluster}", job="fleetwatch-exporter", instance="{instance}"'
    return [
        {
            "series": (
                f"fleetwatch_cluster_info{{{labels}, "
                f'endpoint="https://{cluster}:6443", source="/kube/{cluster}.yaml"}}'
            ),
            "values": _values([1] * n),
        },
        {"series": f"fleetwatch_cluster_probeable{{{labels}}}", "values": _values([probeable] * n)},
        {
            "series": f"fleetwatch_cluster_probe_consecutive_failures{{{labels}}}",
            "values": _values(list(failures)),
        },
        {
            "series": f"fleetwatch_cluster_probe_last_success_timestamp_seconds{{{labels}}}",
            "values": _values(list(last_success)),
        },
    ]


def _code(eval_minute: int, values: dict[str, int]) -> dict[str, Any]:
    return {
        "expr": "cluster:fleetwatch_status:code",
        "eval_time": f"{eval_minute}m",
        "exp_samples": [
            {"labels": f'cluster:fleetwatch_status:code{{cluster="{c}"}}', "value": v}
            for c, v in sorted(values.items())
        ],
    }


def _alerts(
    settings: RuleSettings,
    minute: int,
    alert: str,
    firing: list[tuple[dict[str, str], float | None]],
) -> dict[str, Any]:
    return {
        "eval_time": f"{minute}m",
        "alertname": alert,
        "exp_alerts": [expected(settings, alert, labels, value) for labels, value in firing],
    }


def hold_minutes(settings: RuleSettings) -> int:
    """keep_firing_for of the storm guard and the warning, in whole minutes of this timeline."""
    return math.ceil(2 * settings.probe_interval / 60)


def threshold_case(s: RuleSettings) -> dict[str, Any]:
    """Threshold exactly (N-1 failures: ONLINE; N: OFFLINE), grace period, recovery."""
    n = s.failure_threshold
    hold = hold_minutes(s)
    # minute: 0 1 | 2 .. n+1 (1..n failures) | n+2 (n+1) | n+3.. recovered
    failures: list[int | str] = [0, 0, *range(1, n + 2)]
    last: list[int | str] = [60] * len(failures)
    recovered_at = len(failures)
    tail = hold + 3
    failures += [0] * tail
    last += [60 * (recovered_at + i) for i in range(tail)]
    a = {"cluster": "a"}
    at_n_minus_1 = n  # minute where failures == N - 1
    at_n = n + 1  # minute where failures == N
    tests: list[dict[str, Any]] = [
        _alerts(s, 1, "FleetClusterOnline", [(a, None)]),
        _alerts(s, 1, "FleetClusterOffline", []),
        _alerts(s, at_n_minus_1, "FleetClusterOnline", [(a, None)]),
        _alerts(s, at_n_minus_1, "FleetClusterOffline", []),
        _alerts(s, at_n, "FleetClusterOffline", [(a, None)]),
        _alerts(s, at_n, "FleetClusterOnline", []),
        _alerts(s, at_n + 1, "FleetClusterOffline", [(a, None)]),
        # Recovery: one success is enough; OFFLINE resolves in the same evaluation.
        _alerts(s, recovered_at, "FleetClusterOnline", [(a, None)]),
        _alerts(s, recovered_at, "FleetClusterOffline", []),
    ]
    if n >= 2:
        # The grace period: failing, warned about, still ONLINE, not OFFLINE.
        tests.append(_alerts(s, 2, "FleetClusterProbeFailing", [(a, 1.0)]))
        tests.append(_alerts(s, at_n_minus_1, "FleetClusterProbeFailing", [(a, float(n - 1))]))
        # Held through OFFLINE (Alertmanager inhibits it there) and for the hold after
        # the last failing minute (n), then resolved.
        tests.append(_alerts(s, n + hold - 1 + 1, "FleetClusterProbeFailing", [(a, float(n - 1))]))
        tests.append(_alerts(s, n + 1 + hold, "FleetClusterProbeFailing", []))
    else:
        # N = 1: no grace period, the first failure is OFFLINE.
        tests.append(_alerts(s, 2, "FleetClusterProbeFailing", []))
    return {
        "name": f"threshold {n}: N-1 failures ONLINE, N OFFLINE, recovery",
        "interval": "1m",
        "input_series": _cluster_series("a", failures, last),
        "alert_rule_test": tests,
        "promql_expr_test": [
            _code(1, {"a": 1}),
            _code(at_n_minus_1, {"a": 1}),
            _code(at_n, {"a": 2}),
            _code(recovered_at, {"a": 1}),
        ],
    }


def unknown_case(s: RuleSettings) -> dict[str, Any]:
    """Never-successful, unprobeable, and not-yet-probed clusters; two exporters (HA)."""
    n = s.failure_threshold
    minutes = max(n + 3, 17)
    never = list(range(minutes))  # fails from the start, never succeeded
    c = {"cluster": "never"}
    return {
        "name": f"threshold {n}: UNKNOWN until proven, unprobeable never OFFLINE",
        "interval": "1m",
        "input_series": [
            *_cluster_series("never", never, [0] * minutes),
            # Was probed once, then lost its credentials: failures pile up, still UNKNOWN.
            *_cluster_series("unprobeable", list(range(minutes)), [60] * minutes, probeable=0),
            # Discovered, not probed yet: only the info gauge exists.
            {
                "series": (
                    'fleetwatch_cluster_info{cluster="new", endpoint="https://new:6443", '
                    f'source="/kube/new.yaml", {JOB}}}'
                ),
                "values": _values([1] * minutes),
            },
            # An HA pair of exporters: one cannot reach "ha" (a network split on its
            # side), the other can. Not OFFLINE: the cluster answers someone.
            *_cluster_series("ha", [n + 5] * minutes, instance="10.0.0.1:9713"),
            *_cluster_series("ha", [0] * minutes, instance="10.0.0.2:9713"),
        ],
        "alert_rule_test": [
            _alerts(s, 0, "FleetClusterOnline", [({"cluster": "ha"}, None)]),
            _alerts(s, n - 1, "FleetClusterOffline", []),
            _alerts(s, n, "FleetClusterOffline", [(c, None)]),
            _alerts(s, minutes - 1, "FleetClusterOffline", [(c, None)]),
            _alerts(s, 14, "FleetClusterNotProbeable", []),
            _alerts(s, 15, "FleetClusterNotProbeable", [({"cluster": "unprobeable"}, 0.0)]),
        ],
        "promql_expr_test": [
            _code(0, {"never": 0, "unprobeable": 0, "new": 0, "ha": 1}),
            _code(n, {"never": 2, "unprobeable": 0, "new": 0, "ha": 1}),
            {
                "expr": "fleet:fleetwatch_clusters:count",
                "eval_time": f"{n}m",
                "exp_samples": [
                    {"labels": 'fleet:fleetwatch_clusters:count{status="OFFLINE"}', "value": 1},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="ONLINE"}', "value": 1},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="UNKNOWN"}', "value": 2},
                ],
            },
        ],
    }


def storm_case(s: RuleSettings) -> dict[str, Any]:
    """Most of the fleet failing at once fires the guard at the first failed cycle."""
    n = s.failure_threshold
    hold = hold_minutes(s)
    size = max(s.storm_min_clusters, 4)
    failing = math.ceil(s.storm_fraction * size)
    down = n + 3  # minutes of outage, from minute 1
    minutes = 1 + down + hold + 2
    series: list[dict[str, str]] = []
    for i in range(size):
        if i < failing:
            failures: list[int | str] = [0, *range(1, down + 1)] + [0] * (minutes - 1 - down)
        else:
            failures = [0] * minutes
        series += _cluster_series(f"s{i}", failures)
    ratio = failing / size
    back = 1 + down  # first minute everything answers again
    return {
        "name": f"storm guard: {failing} of {size} failing",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, 0, "FleetProbeStorm", []),
            # First failed cycle: the guard is up before any cluster is OFFLINE (N >= 2).
            _alerts(s, 1, "FleetProbeStorm", [({}, ratio)]),
            _alerts(s, back - 1, "FleetProbeStorm", [({}, ratio)]),
            # Held after the fleet is back, then gone.
            _alerts(s, back + hold - 1, "FleetProbeStorm", [({}, ratio)]),
            _alerts(s, back + hold, "FleetProbeStorm", []),
        ],
        "promql_expr_test": [
            {
                "expr": "fleet:fleetwatch_clusters_probe_failing:ratio",
                "eval_time": "0m",
                "exp_samples": [
                    {"labels": "fleet:fleetwatch_clusters_probe_failing:ratio", "value": 0}
                ],
            },
            {
                "expr": "fleet:fleetwatch_clusters_probe_failing:ratio",
                "eval_time": "1m",
                "exp_samples": [
                    {"labels": "fleet:fleetwatch_clusters_probe_failing:ratio", "value": ratio}
                ],
            },
        ],
    }


def no_storm_case(s: RuleSettings) -> dict[str, Any]:
    """No storm below the minimum fleet size (1 of 2), nor below the fraction."""
    minutes = 6
    failing: list[int | str] = list(range(minutes))
    fine: list[int | str] = [0] * minutes
    small = _cluster_series("pair-a", failing) + _cluster_series("pair-b", fine)
    return {
        "name": "no storm: 1 of 2 failing",
        "interval": "1m",
        "input_series": small,
        "alert_rule_test": [_alerts(s, m, "FleetProbeStorm", []) for m in range(minutes)],
    }


def few_failing_case(s: RuleSettings) -> dict[str, Any]:
    size = max(s.storm_min_clusters, 4) * 2
    below = math.ceil(s.storm_fraction * size) - 1
    minutes = 4
    series: list[dict[str, str]] = []
    for i in range(size):
        failures: list[int | str] = list(range(minutes)) if i < below else [0] * minutes
        series += _cluster_series(f"f{i}", failures)
    return {
        "name": f"no storm: {below} of {size} failing",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [_alerts(s, m, "FleetProbeStorm", []) for m in range(minutes)],
    }


def exporter_case(s: RuleSettings) -> dict[str, Any]:
    """Exporter down (scrape fails) and absent (no target at all)."""
    job = {"job": s.exporter_job, "instance": "127.0.0.1:9713"}
    return {
        "name": "exporter down",
        "interval": "1m",
        "input_series": [
            {
                "series": f'up{{job="{s.exporter_job}", instance="127.0.0.1:9713"}}',
                "values": "1 1 0 0 0 0",
            }
        ],
        "alert_rule_test": [
            _alerts(s, 3, "FleetwatchExporterDown", []),
            _alerts(s, 4, "FleetwatchExporterDown", [(job, 0.0)]),
            _alerts(s, 5, "FleetwatchExporterAbsent", []),
        ],
    }


def absent_case(s: RuleSettings) -> dict[str, Any]:
    return {
        "name": "exporter absent",
        "interval": "1m",
        "input_series": [
            {"series": 'up{job="prometheus", instance="127.0.0.1:9090"}', "values": "1x8"}
        ],
        "alert_rule_test": [
            _alerts(s, 4, "FleetwatchExporterAbsent", []),
            _alerts(s, 5, "FleetwatchExporterAbsent", [({"job": s.exporter_job}, 1.0)]),
        ],
    }


def test_file(settings: RuleSettings, rule_file: str) -> dict[str, Any]:
    """A whole promtool test file for rules rendered with ``settings``."""
    return {
        "rule_files": [rule_file],
        "evaluation_interval": "1m",
        "tests": [
            threshold_case(settings),
            unknown_case(settings),
            storm_case(settings),
            no_storm_case(settings),
            few_failing_case(settings),
            exporter_case(settings),
            absent_case(settings),
        ],
    }


def render_test_file(settings: RuleSettings, rule_file: str) -> str:
    header = (
        "# Unit tests of fleetwatch.rules.yml for `promtool test rules` (Prometheus 2.42).\n"
        "# Generated by tests/rules/rules_promtool.py; regenerate, do not edit by hand:\n"
        "#   .venv/bin/python tests/rules/rules_promtool.py > alerts/tests/fleetwatch.test.yml\n"
        "# Run: promtool test rules alerts/tests/fleetwatch.test.yml\n"
    )
    return header + yaml.safe_dump(test_file(settings, rule_file), sort_keys=False, width=200)


SHIPPED_RULE_FILE = "../fleetwatch.rules.yml"

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.stdout.write(render_test_file(RuleSettings(), SHIPPED_RULE_FILE))
