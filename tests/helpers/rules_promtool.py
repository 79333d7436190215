"""Unit tests for the rules in promtool's format, built for any `RuleSettings`.

The same builder makes the shipped ``alerts/tests/fleetwatch.test.yml`` (for the defaults;
a test keeps it equal) and the threshold tests for other N: one description of the
behaviour, checked by the real ``promtool test rules`` for every N we try.

Regenerate the shipped file after changing the rules::

    .venv/bin/python -m tests.helpers.rules_promtool > alerts/tests/fleetwatch.test.yml

Timeline: one sample per minute (``interval: 1m``); position i of a series is minute i.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from alerts.cd import (
    CD_NO_ACTOR_ALERT,
    CD_PENDING_ALERT,
    CD_STALLED_ALERT,
    CD_UNWATCHED_ALERT,
)
from alerts.discovery import DISCOVERY_DOWN_ALERT
from alerts.reactor import (
    DATABASE_ALERT,
    NOTIFICATIONS_ALERT,
    REACTOR_DOWN_ALERT,
    REACTOR_REPLICA_DOWN_ALERT,
    RECONCILE_ALERT,
)
from alerts.reason import REASON_ANNOTATIONS
from alerts.rules import RuleSettings, groups
from fleetwatch.common.contract import STORM_ALERT as STORM
from fleetwatch.common.metricnames import (
    DISCOVERY_KUBERNETES_UP,
    REACTOR_CD_INFO,
    REACTOR_CD_LAST_RESYNC,
    REACTOR_CD_LEADER,
    REACTOR_CD_PENDING_AGE,
    REACTOR_CD_RESYNC_INTERVAL,
    REACTOR_CD_UNWATCHED,
    REACTOR_DATABASE_UP,
    REACTOR_NOTIFICATIONS,
    REACTOR_RECONCILE_INTERVAL,
    REACTOR_RECONCILE_LAST_SUCCESS,
    total,
)

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
    reasons: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One expected alert: its labels and its annotations as Prometheus renders them.

    The annotation templates use only ``$labels.<name>``, ``$value`` and
    ``$value | humanizePercentage``; ``test_annotations_use_known_templates`` holds them to it.
    The reason annotations (``alerts.reason``) are ``reasons``, empty by default
    (no replica's last probe failed).
    """
    body = _alert_bodies(settings)[alert]
    rendered: dict[str, str] = {}
    for key, text in body.get("annotations", {}).items():
        if key in REASON_ANNOTATIONS:
            rendered[key] = (reasons or {}).get(key, "")
            continue
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
    credential: Sequence[int | str] | None = None,
) -> list[dict[str, str]]:
    """The exporter's gauges for one cluster over len(failures) minutes.

    ``credential``: of the failures, the refusals (default none).

    A ``"stale"`` in ``failures`` is a staleness marker in every gauge: the replica
    stopped being scraped there (killed); values after it are a restarted replica.
    """
    n = len(failures)
    if last_success is None:
        last_success = [100] * n
    last_success = [
        "stale" if f == "stale" else v for f, v in zip(failures, last_success, strict=True)
    ]
    labels = f'cluster="{cluster}", job="fleetwatch-exporter", instance="{instance}"'

    def constant(value: int) -> str:
        return _values(["stale" if f == "stale" else value for f in failures])

    return [
        {
            "series": (
                f"fleetwatch_cluster_info{{{labels}, "
                f'endpoint="https://{cluster}:6443", source="/kube/{cluster}.yaml"}}'
            ),
            "values": constant(1),
        },
        {"series": f"fleetwatch_cluster_probeable{{{labels}}}", "values": constant(probeable)},
        {
            "series": f"fleetwatch_cluster_probe_consecutive_failures{{{labels}}}",
            "values": _values(list(failures)),
        },
        {
            "series": f"fleetwatch_cluster_probe_last_success_timestamp_seconds{{{labels}}}",
            "values": _values(list(last_success)),
        },
        {
            "series": f"fleetwatch_cluster_probe_consecutive_credential_failures{{{labels}}}",
            "values": _values(
                list(credential)
                if credential is not None
                else ["stale" if f == "stale" else 0 for f in failures]
            ),
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


A0, B0 = "10.0.0.1:9713", "10.0.0.2:9713"  # the two replicas of shard 0
A1, B1 = "10.0.1.1:9713", "10.0.1.2:9713"  # the two replicas of shard 1


def _up(instance: str, values: Sequence[int]) -> dict[str, str]:
    return {
        "series": f'up{{job="fleetwatch-exporter", instance="{instance}"}}',
        "values": _values(list(values)),
    }


def vantage_points_case(s: RuleSettings) -> dict[str, Any]:
    """Two replicas per cluster (two ``instance`` values): one status, never mixed counts.

    - ``restart``: OFFLINE for both; replica B is killed (stale) and comes back knowing
      nothing (0 failures, never succeeded), then fails again. Still OFFLINE at every
      minute: B's 0 must not meet A's old success (min and max taken apart said ONLINE).
    - ``one-stale``: ONLINE for both, then B is killed for good: ONLINE, one series.
    - ``cut``: A is cut off (failures pile up), B answers: ONLINE, no warning.
    """
    n = s.failure_threshold
    minutes = n + 6
    kill, back = 2, 3  # B stale at minute 2, restarted at minute 3
    down_a: list[int | str] = [n + 1 + i for i in range(minutes)]
    down_b: list[int | str] = [n + 1, n + 2, "stale", *range(minutes - back)]
    fresh_last: list[int | str] = [60, 60, "stale", *[0] * (minutes - back)]
    ok: list[int | str] = [0] * minutes
    stale_b: list[int | str] = [0] * kill + ["stale"]
    restart = {"cluster": "restart"}
    return {
        "name": f"threshold {n}: two vantage points, a replica restarted, killed, cut off",
        "interval": "1m",
        "input_series": [
            *_cluster_series("restart", down_a, [60] * minutes, instance=A0),
            *_cluster_series("restart", down_b, fresh_last, instance=B0),
            *_cluster_series("one-stale", ok, instance=A0),
            *_cluster_series("one-stale", stale_b, instance=B0),
            *_cluster_series("cut", [n + 4] * minutes, [60] * minutes, instance=A0),
            *_cluster_series("cut", ok, instance=B0),
        ],
        "alert_rule_test": [
            *(
                _alerts(s, m, "FleetClusterOffline", [(restart, None)])
                for m in (0, kill, back, back + 1, minutes - 1)
            ),
            *(
                _alerts(
                    s,
                    m,
                    "FleetClusterOnline",
                    [({"cluster": "cut"}, None), ({"cluster": "one-stale"}, None)],
                )
                for m in (0, kill, back, minutes - 1)
            ),
            _alerts(s, back, "FleetClusterProbeFailing", []),
        ],
        "promql_expr_test": [
            _code(m, {"restart": 2, "one-stale": 1, "cut": 1})
            for m in (0, kill, back, back + 1, minutes - 1)
        ],
    }


def stalled_replica_case(s: RuleSettings) -> dict[str, Any]:
    """A stalled replica's frozen "ONLINE" does not hold a failing cluster ONLINE.

    Replica A sees ``frozen`` ONLINE, then stalls after minute 5 (no cycle ends, its
    gauges keep their old values); replica B keeps cycling and sees ``frozen`` failing
    from the start. While A is fresh, "any replica sees ONLINE" wins; once A has ended no
    cycle for 3 intervals it has no opinion, and the cluster is what B sees: OFFLINE.
    """
    n = s.failure_threshold
    last_good = 5
    stalled = last_good + math.floor(3 * s.probe_interval / 60) + 1
    minutes = stalled + 2
    series: list[dict[str, str]] = [
        *_cluster_series("frozen", [0] * minutes, [60] * minutes, instance=A0),
        *_cluster_series("frozen", [n + m for m in range(minutes)], [0] * minutes, instance=B0),
    ]
    for instance, cycles in (
        (A0, [60 * min(m, last_good) for m in range(minutes)]),
        (B0, [60 * m for m in range(minutes)]),
    ):
        labels = f'job="{s.exporter_job}", instance="{instance}"'
        series += [
            {
                "series": f"fleetwatch_exporter_last_cycle_timestamp_seconds{{{labels}}}",
                "values": _values(cycles),
            },
            {"series": f"process_start_time_seconds{{{labels}}}", "values": f"0x{minutes}"},
            {
                "series": f"fleetwatch_exporter_probe_interval_seconds{{{labels}}}",
                "values": f"{s.probe_interval:g}x{minutes}",
            },
        ]
    return {
        "name": f"threshold {n}: a stalled replica has no say in the status",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, stalled - 1, "FleetClusterOnline", [({"cluster": "frozen"}, None)]),
            _alerts(s, stalled, "FleetClusterOnline", []),
            _alerts(s, stalled, "FleetClusterOffline", [({"cluster": "frozen"}, None)]),
        ],
        "promql_expr_test": [_code(1, {"frozen": 1}), _code(stalled, {"frozen": 2})],
    }


def shard_down_case(s: RuleSettings) -> dict[str, Any]:
    """One replica of shard 0 down: a warning. Both of shard 1: its cluster UNKNOWN, a page.

    ``x`` (shard 0) is ONLINE; ``y`` (shard 1) is OFFLINE until both its replicas go at
    minute 2. Then ``y`` reads UNKNOWN, not OFFLINE (nobody probes it), is still counted
    in the fleet, and is not failing for the storm guard.
    """
    n = s.failure_threshold
    minutes = 8
    gone = 2
    ok: list[int | str] = [0] * minutes
    y_fails: list[int | str] = [n + 1, n + 2, "stale"]
    return {
        "name": f"threshold {n}: one replica down warns, a shard without replicas pages",
        "interval": "1m",
        "input_series": [
            *_cluster_series("x", ok, instance=A0),
            *_cluster_series("x", [0, 0, "stale"], instance=B0),
            *_cluster_series("y", y_fails, [60] * len(y_fails), instance=A1),
            *_cluster_series("y", y_fails, [60] * len(y_fails), instance=B1),
            _up(A0, [1] * minutes),
            _up(B0, [1] * gone + [0] * (minutes - gone)),
            _up(A1, [1] * gone + [0] * (minutes - gone)),
            _up(B1, [1] * gone + [0] * (minutes - gone)),
        ],
        "alert_rule_test": [
            _alerts(s, 1, "FleetClusterOffline", [({"cluster": "y"}, None)]),
            _alerts(s, gone, "FleetClusterOffline", []),
            _alerts(s, gone + 1, "FleetwatchExporterReplicaDown", []),
            _alerts(s, gone + 1, "FleetwatchExporterDown", []),
            _alerts(
                s,
                gone + 2,
                "FleetwatchExporterReplicaDown",
                [({"job": "fleetwatch-exporter", "instance": B0}, 0.0)],
            ),
            _alerts(
                s,
                gone + 2,
                "FleetwatchExporterDown",
                [
                    ({"job": "fleetwatch-exporter", "instance": A1}, 0.0),
                    ({"job": "fleetwatch-exporter", "instance": B1}, 0.0),
                ],
            ),
        ],
        "promql_expr_test": [
            _code(1, {"x": 1, "y": 2}),
            _code(gone, {"x": 1, "y": 0}),
            _code(minutes - 1, {"x": 1, "y": 0}),
            {
                "expr": "fleet:fleetwatch_clusters:count",
                "eval_time": f"{gone}m",
                "exp_samples": [
                    {"labels": 'fleet:fleetwatch_clusters:count{status="OFFLINE"}', "value": 0},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="ONLINE"}', "value": 1},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="UNKNOWN"}', "value": 1},
                ],
            },
            {
                "expr": "fleet:fleetwatch_clusters_probe_failing:ratio",
                "eval_time": f"{gone}m",
                "exp_samples": [
                    {"labels": "fleet:fleetwatch_clusters_probe_failing:ratio", "value": 0}
                ],
            },
        ],
    }


def replicated_storm_case(s: RuleSettings) -> dict[str, Any]:
    """The storm guard and the counts count clusters, not the series of two replicas.

    Four clusters, two replicas each: two fail for both replicas, one for replica A only.
    Clusters failing: 2 of 4. Series failing would be 5 of 8.
    """
    n = s.failure_threshold
    minutes = n + 2
    failing: list[int | str] = list(range(1, minutes + 1))
    ok: list[int | str] = [0] * minutes
    series: list[dict[str, str]] = []
    for name, a, b in (
        ("r0", failing, failing),
        ("r1", failing, failing),
        ("r2", failing, ok),
        ("r3", ok, ok),
    ):
        series += _cluster_series(name, a, instance=A0) + _cluster_series(name, b, instance=B0)
    ratio = 2 / 4
    storm: list[tuple[dict[str, str], float | None]] = (
        [({}, ratio)] if ratio >= s.storm_fraction and s.storm_min_clusters <= 4 else []
    )
    return {
        "name": f"threshold {n}: storm guard over two replicas counts clusters once",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [_alerts(s, 0, STORM, storm)],
        "promql_expr_test": [
            {
                "expr": "fleet:fleetwatch_clusters_probe_failing:ratio",
                "eval_time": "0m",
                "exp_samples": [
                    {"labels": "fleet:fleetwatch_clusters_probe_failing:ratio", "value": ratio}
                ],
            },
            {
                "expr": "fleet:fleetwatch_clusters:count",
                "eval_time": f"{minutes - 1}m",
                "exp_samples": [
                    {"labels": 'fleet:fleetwatch_clusters:count{status="OFFLINE"}', "value": 2},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="ONLINE"}', "value": 2},
                    {"labels": 'fleet:fleetwatch_clusters:count{status="UNKNOWN"}', "value": 0},
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


def stall_case(s: RuleSettings) -> dict[str, Any]:
    """Exporter stalled: scraped, but no cycle ends for over 3 intervals.

    Three replicas, the process of each started at minute 0: "stuck" completes cycles
    (one a minute) until minute 5, then none until it recovers; "never" completes none at
    all; "fine" one every minute. The alert fires ``for: 2m`` after the age passes
    3 intervals, for "never" counted from the process start.
    """
    last_good = 5
    slack = math.floor(3 * s.probe_interval / 60) + 1  # first minute past 3 intervals
    stuck_true, never_true = last_good + slack, slack
    recovered = stuck_true + 4
    minutes = recovered + 2
    stuck = [60 * min(m, last_good) if m < recovered else 60 * m for m in range(minutes)]
    series: list[dict[str, str]] = []
    for instance, cycles in (
        ("stuck:9713", stuck),
        ("never:9713", [0] * minutes),
        ("fine:9713", [60 * m for m in range(minutes)]),
    ):
        labels = f'job="{s.exporter_job}", instance="{instance}"'
        series += [
            {
                "series": f"fleetwatch_exporter_last_cycle_timestamp_seconds{{{labels}}}",
                "values": _values(cycles),
            },
            {"series": f"process_start_time_seconds{{{labels}}}", "values": f"0x{minutes}"},
            {
                "series": f"fleetwatch_exporter_probe_interval_seconds{{{labels}}}",
                "values": f"{s.probe_interval:g}x{minutes}",
            },
        ]

    def at(instance: str) -> tuple[dict[str, str], None]:
        return {"job": s.exporter_job, "instance": instance}, None

    alert = "FleetwatchExporterStalled"
    return {
        "name": "exporter stalled",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, never_true + 1, alert, []),  # pending: for 2m
            _alerts(s, never_true + 2, alert, [at("never:9713")]),
            _alerts(s, stuck_true + 1, alert, [at("never:9713")]),
            _alerts(s, stuck_true + 2, alert, [at("never:9713"), at("stuck:9713")]),
            _alerts(s, recovered, alert, [at("never:9713")]),  # cycles again: resolved
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


def discovery_case(s: RuleSettings) -> dict[str, Any]:
    """Discovery from the management cluster's API failing: a page after 10 minutes, not before.

    - ``down`` (the exporter): the list+watch fails from minute 2 on, then answers again at
      ``back``: pending for 10 minutes, firing from minute 12, resolved at ``back``;
    - ``blip``: failing for 9 minutes (ten samples; a rolling restart of the API servers),
      then fine: pending, never firing;
    - the reactor (another job) failing too: the same alert, with its own job;
    - ``files-only``: an exporter without ``--discovery.kubernetes`` exports no such series
      (only its ``up``): no alert, ever.
    """
    down_from, back = 2, 16
    minutes = back + 2

    def series(job: str, instance: str, values: Sequence[int]) -> dict[str, str]:
        return {
            "series": f'{DISCOVERY_KUBERNETES_UP}{{job="{job}", instance="{instance}"}}',
            "values": _values(list(values)),
        }

    failing = [1] * down_from + [0] * (back - down_from) + [1] * (minutes - back)
    blip = [1] * down_from + [0] * 10 + [1] * (minutes - down_from - 10)
    exporter = {"job": s.exporter_job, "instance": "down:9713"}
    reactor = {"job": "fleetwatch-reactor", "instance": "reactor:9714"}
    alert = DISCOVERY_DOWN_ALERT
    firing: list[tuple[dict[str, str], float | None]] = [(exporter, 0.0), (reactor, 0.0)]
    return {
        "name": "discovery from the management cluster's API down",
        "interval": "1m",
        "input_series": [
            series(s.exporter_job, "down:9713", failing),
            series("fleetwatch-reactor", "reactor:9714", failing),
            series(s.exporter_job, "blip:9713", blip),
            {
                "series": f'up{{job="{s.exporter_job}", instance="files-only:9713"}}',
                "values": f"1x{minutes}",
            },
        ],
        "alert_rule_test": [
            _alerts(s, down_from, alert, []),
            _alerts(s, down_from + 9, alert, []),  # pending, and the blip's last minute
            _alerts(s, down_from + 10, alert, firing),
            _alerts(s, back - 1, alert, firing),
            _alerts(s, back, alert, []),
        ],
    }


def cd_pending_case(s: RuleSettings) -> dict[str, Any]:
    """CD actions pending: past two resync intervals for 5 minutes, and only then.

    Every reactor here resyncs each minute (60 s) but ``slow`` (300 s); ages are those of
    the oldest pending action, growing 60 s a minute while it waits:

    - ``stuck``: pending from minute 1 (age 180 > 120 from minute 4): pending for 5
      minutes, firing from minute 9, resolved when the action is done at minute 14;
    - ``blip``: over 120 s for 3 minutes, then done: never firing;
    - ``slow``: the same ages as ``stuck`` but never done, over its 600 s from minute 12,
      firing from minute 17;
    - ``dry``: a dry run, whose actions are never done: never firing.
    """
    minutes = 18

    def ages(start: int, end: int) -> list[int]:
        return [60 * (m - start) if start <= m < end else 0 for m in range(minutes)]

    reactors = {
        "stuck:9714": (ages(1, 14), 60, "false"),
        "blip:9714": (ages(1, 7), 60, "false"),
        "slow:9714": (ages(1, minutes), 300, "false"),
        "dry:9714": (ages(1, minutes), 60, "true"),
    }
    series: list[dict[str, str]] = []
    for instance, (age, interval, dry_run) in reactors.items():
        labels = f'job="fleetwatch-reactor", instance="{instance}"'
        series += [
            {"series": f"{REACTOR_CD_PENDING_AGE}{{{labels}}}", "values": _values(age)},
            {
                "series": f"{REACTOR_CD_RESYNC_INTERVAL}{{{labels}}}",
                "values": f"{interval}x{minutes}",
            },
            {
                "series": (
                    f'{REACTOR_CD_INFO}{{{labels}, argocd_pause="application", '
                    f'dry_run="{dry_run}"}}'
                ),
                "values": f"1x{minutes}",
            },
        ]

    def at(instance: str, minute: int) -> tuple[dict[str, str], float]:
        age = reactors[instance][0][minute]
        return {"job": "fleetwatch-reactor", "instance": instance}, float(age)

    alert = CD_PENDING_ALERT
    return {
        "name": "CD actions pending",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, 4, alert, []),  # over two intervals: pending
            _alerts(s, 8, alert, []),
            _alerts(s, 9, alert, [at("stuck:9714", 9)]),
            _alerts(s, 13, alert, [at("stuck:9714", 13)]),
            _alerts(s, 14, alert, []),  # done: resolved
            _alerts(s, 16, alert, []),  # slow: over 600 s from minute 12, pending
            _alerts(s, 17, alert, [at("slow:9714", 17)]),
        ],
    }


def cd_no_actor_case(s: RuleSettings) -> dict[str, Any]:
    """No replica acting on the CD objects: after 2 minutes with no Lease holder, and only then.

    Job ``fleetwatch-reactor``, two replicas: r1 acts until minute 4 and r2 takes over at
    minute 5 (one minute without a holder: a hand-over, never firing); nobody acts from
    minute 8 (a Lease the replicas may not update) to 14: firing from minute 10, resolved
    at 14. Job ``fleetwatch-reactor-b``, one replica acting throughout: never firing.
    """
    minutes = 18

    def acting(*spans: tuple[int, int]) -> str:
        return _values([int(any(a <= m < b for a, b in spans)) for m in range(minutes)])

    def leader(job: str, instance: str, values: str) -> dict[str, str]:
        return {
            "series": f'{REACTOR_CD_LEADER}{{job="{job}", instance="{instance}"}}',
            "values": values,
        }

    job = {"job": "fleetwatch-reactor"}
    alert = CD_NO_ACTOR_ALERT
    return {
        "name": "no replica acts on the CD objects",
        "interval": "1m",
        "input_series": [
            leader("fleetwatch-reactor", "r1:9714", acting((0, 4))),
            leader("fleetwatch-reactor", "r2:9714", acting((5, 8), (14, minutes))),
            leader("fleetwatch-reactor-b", "r3:9714", acting((0, minutes))),
        ],
        "alert_rule_test": [
            _alerts(s, 5, alert, []),  # the hand-over's minute: never long enough
            _alerts(s, 9, alert, []),  # pending since minute 8
            _alerts(s, 10, alert, [(job, None)]),
            _alerts(s, 13, alert, [(job, None)]),
            _alerts(s, 14, alert, []),  # r2 took the Lease
        ],
    }


def cd_stalled_case(s: RuleSettings) -> dict[str, Any]:
    """No full pass over the CD objects for 3 resync intervals (60 s here), for 5 minutes.

    ``promtool``'s ``time()`` is the evaluation time since 0, so a pass at minute m stamps
    60 m. ``ok`` passes every minute: never. ``stuck`` (holds the Lease) passes until
    minute 4, then not until 16: over 180 s from minute 8, firing from 13, resolved at 16.
    ``never`` (no election) never completes its first list: over 180 s from minute 4,
    firing from 9. ``waiting`` waits for the Lease (never passes, and need not): never.
    ``dbdown`` never passes while its database is down: the database's alert says it.
    """
    minutes = 18
    passes = {
        "ok:9714": [60 * m for m in range(minutes)],
        "stuck:9714": [60 * m if m <= 4 or m >= 16 else 240 for m in range(minutes)],
        "never:9714": [0] * minutes,
        "waiting:9714": [0] * minutes,
        "dbdown:9714": [0] * minutes,
    }
    series = [_reactor_series(s, REACTOR_CD_LAST_RESYNC, i, _values(v)) for i, v in passes.items()]
    series += [_reactor_series(s, REACTOR_CD_RESYNC_INTERVAL, i, f"60x{minutes}") for i in passes]
    series += [
        _reactor_series(s, REACTOR_CD_LEADER, "stuck:9714", f"1x{minutes}"),
        _reactor_series(s, REACTOR_CD_LEADER, "waiting:9714", f"0x{minutes}"),
        _reactor_series(s, REACTOR_DATABASE_UP, "dbdown:9714", f"0x{minutes}"),
    ]

    def at(*instances: str) -> list[tuple[dict[str, str], None]]:
        return [_reactor(s, i) for i in instances]

    alert = CD_STALLED_ALERT
    return {
        "name": "CD resync stalled",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, 8, alert, []),  # never: pending since minute 4
            _alerts(s, 9, alert, at("never:9714")),
            _alerts(s, 12, alert, at("never:9714")),  # stuck: pending since minute 8
            _alerts(s, 13, alert, at("never:9714", "stuck:9714")),
            _alerts(s, 16, alert, at("never:9714")),  # stuck passed again
        ],
    }


def cd_unwatched_case(s: RuleSettings) -> dict[str, Any]:
    """Objects paused by fleetwatch of a kind the acting replica does not watch.

    ``acting`` (no dry run) counts 2 Applications paused for an outage from minute 2, the
    restart that dropped --cd.argocd, to minute 12, when they were resumed (by a replica
    that watches them again): pending for 5 minutes, firing from minute 7 with its value.
    It counts Kustomizations it does not watch from minute 0, all running: never. ``dry``,
    a dry run watching only Flux beside an acting replica that watches Argo CD too, counts
    3 paused Applications throughout: never (the case fails without the dry-run exclusion).
    """
    minutes = 14
    paused = _values([2 if 2 <= m < 12 else 0 for m in range(minutes)])

    def at(instance: str, metric: str, labels: str, values: str) -> dict[str, str]:
        where = f'job="{s.reactor_job}", instance="{instance}"'
        return {"series": f"{metric}{{{where}, {labels}}}", "values": values}

    def unwatched(instance: str, kind: str, state: str, values: str) -> dict[str, str]:
        return at(instance, REACTOR_CD_UNWATCHED, f'kind="{kind}", state="{state}"', values)

    def info(instance: str, dry_run: str) -> dict[str, str]:
        labels = f'argocd_pause="application", dry_run="{dry_run}"'
        return at(instance, REACTOR_CD_INFO, labels, f"1x{minutes}")

    series = [
        unwatched("acting:9714", "Application", "paused_by_outage", paused),
        unwatched("acting:9714", "Application", "running", f"0x{minutes}"),
        unwatched("acting:9714", "Kustomization", "running", f"4x{minutes}"),
        unwatched("acting:9714", "Kustomization", "paused_by_outage", f"0x{minutes}"),
        info("acting:9714", "false"),
        unwatched("dry:9714", "Application", "paused_by_outage", f"3x{minutes}"),
        info("dry:9714", "true"),
    ]
    firing = [({"job": s.reactor_job, "kind": "Application"}, 2.0)]
    alert = CD_UNWATCHED_ALERT
    return {
        "name": "CD objects paused and no longer watched",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, 1, alert, []),  # the dry run's paused Applications: never
            _alerts(s, 6, alert, []),  # pending since minute 2
            _alerts(s, 7, alert, firing),
            _alerts(s, 11, alert, firing),
            _alerts(s, 12, alert, []),  # resumed
        ],
    }


def _reactor_series(s: RuleSettings, metric: str, instance: str, values: str) -> dict[str, str]:
    return {
        "series": f'{metric}{{job="{s.reactor_job}", instance="{instance}"}}',
        "values": values,
    }


def _reactor(s: RuleSettings, instance: str) -> tuple[dict[str, str], None]:
    return {"job": s.reactor_job, "instance": instance}, None


def reactor_down_case(s: RuleSettings) -> dict[str, Any]:
    """Two replicas: r1 down from minute 2 (a warning while r2 serves), r2 from minute 5
    (then both are the critical alert, and the warning resolves)."""
    return {
        "name": "reactor replicas down",
        "interval": "1m",
        "input_series": [
            _reactor_series(s, "up", "r1:9714", "1 1 0 0 0 0 0 0 0"),
            _reactor_series(s, "up", "r2:9714", "1 1 1 1 1 0 0 0 0"),
        ],
        "alert_rule_test": [
            _alerts(s, 3, REACTOR_REPLICA_DOWN_ALERT, []),  # pending: for 2m
            _alerts(s, 4, REACTOR_REPLICA_DOWN_ALERT, [_reactor(s, "r1:9714")]),
            _alerts(s, 4, REACTOR_DOWN_ALERT, []),
            _alerts(s, 6, REACTOR_DOWN_ALERT, []),
            _alerts(s, 6, REACTOR_REPLICA_DOWN_ALERT, []),  # r2 gone too: not a warning
            _alerts(s, 7, REACTOR_DOWN_ALERT, [_reactor(s, "r1:9714"), _reactor(s, "r2:9714")]),
        ],
    }


def reactor_database_case(s: RuleSettings) -> dict[str, Any]:
    """r1 cannot read its database from minute 2 to 5 (a page from minute 4), r2 can."""
    return {
        "name": "reactor database unavailable",
        "interval": "1m",
        "input_series": [
            _reactor_series(s, REACTOR_DATABASE_UP, "r1:9714", "1 1 0 0 0 0 1 1"),
            _reactor_series(s, REACTOR_DATABASE_UP, "r2:9714", "1x7"),
        ],
        "alert_rule_test": [
            _alerts(s, 3, DATABASE_ALERT, []),
            _alerts(s, 4, DATABASE_ALERT, [_reactor(s, "r1:9714")]),
            _alerts(s, 5, DATABASE_ALERT, [_reactor(s, "r1:9714")]),
            _alerts(s, 6, DATABASE_ALERT, []),
        ],
    }


def reactor_reconcile_case(s: RuleSettings) -> dict[str, Any]:
    """Reconciliation every 60 s, each process started at minute 0:

    - ``stuck`` succeeds until minute 2, then never: older than 3 intervals from minute 6,
      firing from minute 8 (``for: 2m``);
    - ``never`` has not succeeded since it started: firing from minute 6;
    - ``off`` has no --alertmanager.url (interval 0): never;
    - ``dbdown`` never succeeded because its database is down: that alert's, not this one;
    - ``fine`` succeeds every minute: never.
    """
    minutes = 10

    def each(instance: str, last: list[int], interval: int, db: int) -> list[dict[str, str]]:
        return [
            _reactor_series(s, REACTOR_RECONCILE_LAST_SUCCESS, instance, _values(list(last))),
            _reactor_series(s, REACTOR_RECONCILE_INTERVAL, instance, f"{interval}x{minutes}"),
            _reactor_series(s, "process_start_time_seconds", instance, f"0x{minutes}"),
            _reactor_series(s, REACTOR_DATABASE_UP, instance, f"{db}x{minutes}"),
        ]

    series = [
        *each("stuck:9714", [60 * min(m, 2) for m in range(minutes + 1)], 60, 1),
        *each("never:9714", [0] * (minutes + 1), 60, 1),
        *each("off:9714", [0] * (minutes + 1), 0, 1),
        *each("dbdown:9714", [0] * (minutes + 1), 60, 0),
        *each("fine:9714", [60 * m for m in range(minutes + 1)], 60, 1),
    ]
    never, stuck = _reactor(s, "never:9714"), _reactor(s, "stuck:9714")
    return {
        "name": "reactor reconciliation failing",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            _alerts(s, 5, RECONCILE_ALERT, []),  # never: pending since minute 4
            _alerts(s, 6, RECONCILE_ALERT, [never]),
            _alerts(s, 7, RECONCILE_ALERT, [never]),  # stuck: pending since minute 6
            _alerts(s, 8, RECONCILE_ALERT, [never, stuck]),
        ],
    }


def reactor_notifications_case(s: RuleSettings) -> dict[str, Any]:
    """Counters of POST /alerts by outcome, one refusal a minute on some replicas:

    - ``refusing`` refuses every notification (401) and applies none: a page after 5m;
    - ``mixed`` refuses some (a stray 401) and applies others: never;
    - ``dbdown`` fails them with 503 while its database is down: that alert's, not this;
    - ``quiet`` receives nothing: never.
    """
    minutes = 12
    counter = total(REACTOR_NOTIFICATIONS)
    rising, flat = f"0+1x{minutes}", f"0x{minutes}"

    def each(instance: str, refused: str, applied: str, db: int) -> list[dict[str, str]]:
        labels = f'job="{s.reactor_job}", instance="{instance}"'
        return [
            {"series": f'{counter}{{{labels}, outcome="unauthorized"}}', "values": refused},
            {"series": f'{counter}{{{labels}, outcome="error"}}', "values": flat},
            {"series": f'{counter}{{{labels}, outcome="applied"}}', "values": applied},
            _reactor_series(s, REACTOR_DATABASE_UP, instance, f"{db}x{minutes}"),
        ]

    refusing = _reactor(s, "refusing:9714")
    return {
        "name": "reactor notifications failing",
        "interval": "1m",
        "input_series": [
            *each("refusing:9714", rising, flat, 1),
            *each("mixed:9714", rising, rising, 1),
            *each("dbdown:9714", rising, flat, 0),
            *each("quiet:9714", flat, flat, 1),
        ],
        "alert_rule_test": [
            _alerts(s, 5, NOTIFICATIONS_ALERT, []),  # pending since minute 1: for 5m
            _alerts(s, 6, NOTIFICATIONS_ALERT, [refusing]),
            _alerts(s, 11, NOTIFICATIONS_ALERT, [refusing]),
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
            vantage_points_case(settings),
            stalled_replica_case(settings),
            shard_down_case(settings),
            replicated_storm_case(settings),
            exporter_case(settings),
            stall_case(settings),
            absent_case(settings),
            discovery_case(settings),
            cd_pending_case(settings),
            cd_no_actor_case(settings),
            cd_stalled_case(settings),
            cd_unwatched_case(settings),
            reactor_down_case(settings),
            reactor_database_case(settings),
            reactor_reconcile_case(settings),
            reactor_notifications_case(settings),
        ],
    }


def render_test_file(settings: RuleSettings, rule_file: str) -> str:
    header = (
        "# Unit tests of fleetwatch.rules.yml for `promtool test rules` (Prometheus 2.42).\n"
        "# Generated by tests/helpers/rules_promtool.py; regenerate, do not edit by hand:\n"
        "#   .venv/bin/python -m tests.helpers.rules_promtool > alerts/tests/fleetwatch.test.yml\n"
        "# Run: promtool test rules alerts/tests/fleetwatch.test.yml\n"
    )
    return header + yaml.safe_dump(test_file(settings, rule_file), sort_keys=False, width=200)


SHIPPED_RULE_FILE = "../fleetwatch.rules.yml"

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.stdout.write(render_test_file(RuleSettings(), SHIPPED_RULE_FILE))
