"""Unit tests for the rules in promtool's format, built for any `RuleSettings`.

The same builder makes the shipped ``alerts/tests/fleetwatch.test.yml`` (for the defaults;
a test keeps it equal) and the threshold tests for other N: one description of the
behaviour, checked by the real ``promtool test rules`` for every N we try.

The cases of the reactor's and the CD integration's alerts are in
``rules_promtool_reactor``; the pieces every case builds with in ``promtool_build``.
Regenerate the shipped file after changing the rules::

    .venv/bin/python -m tests.helpers.rules_promtool > alerts/tests/fleetwatch.test.yml

Timeline: one sample per minute (``interval: 1m``); position i of a series is minute i.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from alerts.discovery import DISCOVERY_DOWN_ALERT
from alerts.rules import RuleSettings
from fleetwatch.common.contract import STORM_ALERT as STORM
from fleetwatch.common.metricnames import DISCOVERY_KUBERNETES_UP
from tests.helpers.promtool_build import (
    Generator,
    alerts,
    case,
    cluster_series,
    file_body,
    status_codes,
    timeline,
)
from tests.helpers.rules_promtool_reactor import (
    cd_no_actor_case,
    cd_pending_case,
    cd_stalled_case,
    cd_unwatched_case,
    cd_watch_down_case,
    reactor_database_case,
    reactor_down_case,
    reactor_notifications_case,
    reactor_reconcile_case,
)

JOB = 'job="fleetwatch-exporter", instance="127.0.0.1:9713"'


def hold_minutes(settings: RuleSettings) -> int:
    """keep_firing_for of the storm guard and the warning, in whole minutes of this timeline."""
    return math.ceil(2 * settings.probe_interval / 60)


def _cycle_series(s: RuleSettings, instance: str, cycles: list[int]) -> list[dict[str, str]]:
    """An exporter's gauges of its own cycles, one a minute: when the last one ended (the
    ``cycles``), when its process started (minute 0), and its probe interval."""
    labels = f'job="{s.exporter_job}", instance="{instance}"'
    minutes = len(cycles)
    return [
        {
            "series": f"fleetwatch_exporter_last_cycle_timestamp_seconds{{{labels}}}",
            "values": timeline(cycles),
        },
        {"series": f"process_start_time_seconds{{{labels}}}", "values": f"0x{minutes}"},
        {
            "series": f"fleetwatch_exporter_probe_interval_seconds{{{labels}}}",
            "values": f"{s.probe_interval:g}x{minutes}",
        },
    ]


def _fleet_counts(minute: int, *, offline: int, online: int, unknown: int) -> dict[str, Any]:
    """``fleet:fleetwatch_clusters:count`` of each status at ``minute``."""
    record = "fleet:fleetwatch_clusters:count"
    counts = {"OFFLINE": offline, "ONLINE": online, "UNKNOWN": unknown}
    return {
        "expr": record,
        "eval_time": f"{minute}m",
        "exp_samples": [
            {"labels": f'{record}{{status="{status}"}}', "value": n} for status, n in counts.items()
        ],
    }


def _failing_ratio(minute: int, ratio: float) -> dict[str, Any]:
    """``fleet:fleetwatch_clusters_probe_failing:ratio`` at ``minute``."""
    record = "fleet:fleetwatch_clusters_probe_failing:ratio"
    return {
        "expr": record,
        "eval_time": f"{minute}m",
        "exp_samples": [{"labels": record, "value": ratio}],
    }


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
        alerts(s, 1, "FleetClusterOnline", [(a, None)]),
        alerts(s, 1, "FleetClusterOffline", []),
        alerts(s, at_n_minus_1, "FleetClusterOnline", [(a, None)]),
        alerts(s, at_n_minus_1, "FleetClusterOffline", []),
        alerts(s, at_n, "FleetClusterOffline", [(a, None)]),
        alerts(s, at_n, "FleetClusterOnline", []),
        alerts(s, at_n + 1, "FleetClusterOffline", [(a, None)]),
        # Recovery: one success is enough; OFFLINE resolves in the same evaluation.
        alerts(s, recovered_at, "FleetClusterOnline", [(a, None)]),
        alerts(s, recovered_at, "FleetClusterOffline", []),
    ]
    if n >= 2:
        # The grace period: failing, warned about, still ONLINE, not OFFLINE.
        tests.append(alerts(s, 2, "FleetClusterProbeFailing", [(a, 1.0)]))
        tests.append(alerts(s, at_n_minus_1, "FleetClusterProbeFailing", [(a, float(n - 1))]))
        # Held through OFFLINE (Alertmanager inhibits it there) and for the hold after
        # the last failing minute (n), then resolved.
        tests.append(alerts(s, n + hold - 1 + 1, "FleetClusterProbeFailing", [(a, float(n - 1))]))
        tests.append(alerts(s, n + 1 + hold, "FleetClusterProbeFailing", []))
    else:
        # N = 1: no grace period, the first failure is OFFLINE.
        tests.append(alerts(s, 2, "FleetClusterProbeFailing", []))
    return case(
        name=f"threshold {n}: N-1 failures ONLINE, N OFFLINE, recovery",
        input_series=cluster_series("a", failures, last),
        alert_rule_test=tests,
        promql_expr_test=[
            status_codes(1, {"a": 1}),
            status_codes(at_n_minus_1, {"a": 1}),
            status_codes(at_n, {"a": 2}),
            status_codes(recovered_at, {"a": 1}),
        ],
    )


def unknown_case(s: RuleSettings) -> dict[str, Any]:
    """Never-successful, unprobeable, and not-yet-probed clusters; two exporters (HA)."""
    n = s.failure_threshold
    minutes = max(n + 3, 17)
    never = list(range(minutes))  # fails from the start, never succeeded
    c = {"cluster": "never"}
    return case(
        name=f"threshold {n}: UNKNOWN until proven, unprobeable never OFFLINE",
        input_series=[
            *cluster_series("never", never, [0] * minutes),
            # Was probed once, then lost its credentials: failures pile up, still UNKNOWN.
            *cluster_series("unprobeable", list(range(minutes)), [60] * minutes, probeable=0),
            # Discovered, not probed yet: only the info gauge exists.
            {
                "series": (
                    'fleetwatch_cluster_info{cluster="new", endpoint="https://new:6443", '
                    f'source="/kube/new.yaml", {JOB}}}'
                ),
                "values": timeline([1] * minutes),
            },
            # An HA pair of exporters: one cannot reach "ha" (a network split on its
            # side), the other can. Not OFFLINE: the cluster answers someone.
            *cluster_series("ha", [n + 5] * minutes, instance="127.0.0.1:9713"),
            *cluster_series("ha", [0] * minutes, instance="127.0.0.2:9713"),
        ],
        alert_rule_test=[
            alerts(s, 0, "FleetClusterOnline", [({"cluster": "ha"}, None)]),
            alerts(s, n - 1, "FleetClusterOffline", []),
            alerts(s, n, "FleetClusterOffline", [(c, None)]),
            alerts(s, minutes - 1, "FleetClusterOffline", [(c, None)]),
            alerts(s, 14, "FleetClusterNotProbeable", []),
            alerts(s, 15, "FleetClusterNotProbeable", [({"cluster": "unprobeable"}, 0.0)]),
        ],
        promql_expr_test=[
            status_codes(0, {"never": 0, "unprobeable": 0, "new": 0, "ha": 1}),
            status_codes(n, {"never": 2, "unprobeable": 0, "new": 0, "ha": 1}),
            _fleet_counts(n, offline=1, online=1, unknown=2),
        ],
    )


A0, B0 = "127.0.0.1:9713", "127.0.0.2:9713"  # the two replicas of shard 0
A1, B1 = "127.0.1.1:9713", "127.0.1.2:9713"  # the two replicas of shard 1


def _up(instance: str, values: Sequence[int]) -> dict[str, str]:
    return {
        "series": f'up{{job="fleetwatch-exporter", instance="{instance}"}}',
        "values": timeline(list(values)),
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
    return case(
        name=f"threshold {n}: two vantage points, a replica restarted, killed, cut off",
        input_series=[
            *cluster_series("restart", down_a, [60] * minutes, instance=A0),
            *cluster_series("restart", down_b, fresh_last, instance=B0),
            *cluster_series("one-stale", ok, instance=A0),
            *cluster_series("one-stale", stale_b, instance=B0),
            *cluster_series("cut", [n + 4] * minutes, [60] * minutes, instance=A0),
            *cluster_series("cut", ok, instance=B0),
        ],
        alert_rule_test=[
            *(
                alerts(s, m, "FleetClusterOffline", [(restart, None)])
                for m in (0, kill, back, back + 1, minutes - 1)
            ),
            *(
                alerts(
                    s,
                    m,
                    "FleetClusterOnline",
                    [({"cluster": "cut"}, None), ({"cluster": "one-stale"}, None)],
                )
                for m in (0, kill, back, minutes - 1)
            ),
            alerts(s, back, "FleetClusterProbeFailing", []),
        ],
        promql_expr_test=[
            status_codes(m, {"restart": 2, "one-stale": 1, "cut": 1})
            for m in (0, kill, back, back + 1, minutes - 1)
        ],
    )


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
        *cluster_series("frozen", [0] * minutes, [60] * minutes, instance=A0),
        *cluster_series("frozen", [n + m for m in range(minutes)], [0] * minutes, instance=B0),
    ]
    for instance, cycles in (
        (A0, [60 * min(m, last_good) for m in range(minutes)]),
        (B0, [60 * m for m in range(minutes)]),
    ):
        series += _cycle_series(s, instance, cycles)
    return case(
        name=f"threshold {n}: a stalled replica has no say in the status",
        input_series=series,
        alert_rule_test=[
            alerts(s, stalled - 1, "FleetClusterOnline", [({"cluster": "frozen"}, None)]),
            alerts(s, stalled, "FleetClusterOnline", []),
            alerts(s, stalled, "FleetClusterOffline", [({"cluster": "frozen"}, None)]),
        ],
        promql_expr_test=[status_codes(1, {"frozen": 1}), status_codes(stalled, {"frozen": 2})],
    )


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
    return case(
        name=f"threshold {n}: one replica down warns, a shard without replicas pages",
        input_series=[
            *cluster_series("x", ok, instance=A0),
            *cluster_series("x", [0, 0, "stale"], instance=B0),
            *cluster_series("y", y_fails, [60] * len(y_fails), instance=A1),
            *cluster_series("y", y_fails, [60] * len(y_fails), instance=B1),
            _up(A0, [1] * minutes),
            _up(B0, [1] * gone + [0] * (minutes - gone)),
            _up(A1, [1] * gone + [0] * (minutes - gone)),
            _up(B1, [1] * gone + [0] * (minutes - gone)),
        ],
        alert_rule_test=[
            alerts(s, 1, "FleetClusterOffline", [({"cluster": "y"}, None)]),
            alerts(s, gone, "FleetClusterOffline", []),
            alerts(s, gone + 1, "FleetwatchExporterReplicaDown", []),
            alerts(s, gone + 1, "FleetwatchExporterDown", []),
            alerts(
                s,
                gone + 2,
                "FleetwatchExporterReplicaDown",
                [({"job": "fleetwatch-exporter", "instance": B0}, 0.0)],
            ),
            alerts(
                s,
                gone + 2,
                "FleetwatchExporterDown",
                [
                    ({"job": "fleetwatch-exporter", "instance": A1}, 0.0),
                    ({"job": "fleetwatch-exporter", "instance": B1}, 0.0),
                ],
            ),
        ],
        promql_expr_test=[
            status_codes(1, {"x": 1, "y": 2}),
            status_codes(gone, {"x": 1, "y": 0}),
            status_codes(minutes - 1, {"x": 1, "y": 0}),
            _fleet_counts(gone, offline=0, online=1, unknown=1),
            _failing_ratio(gone, 0),
        ],
    )


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
        series += cluster_series(name, a, instance=A0) + cluster_series(name, b, instance=B0)
    ratio = 2 / 4
    storm: list[tuple[dict[str, str], float | None]] = (
        [({}, ratio)] if ratio >= s.storm_fraction and s.storm_min_clusters <= 4 else []
    )
    return case(
        name=f"threshold {n}: storm guard over two replicas counts clusters once",
        input_series=series,
        alert_rule_test=[alerts(s, 0, STORM, storm)],
        promql_expr_test=[
            _failing_ratio(0, ratio),
            _fleet_counts(minutes - 1, offline=2, online=2, unknown=0),
        ],
    )


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
        series += cluster_series(f"s{i}", failures)
    ratio = failing / size
    back = 1 + down  # first minute everything answers again
    return case(
        name=f"storm guard: {failing} of {size} failing",
        input_series=series,
        alert_rule_test=[
            alerts(s, 0, "FleetProbeStorm", []),
            # First failed cycle: the guard is up before any cluster is OFFLINE (N >= 2).
            alerts(s, 1, "FleetProbeStorm", [({}, ratio)]),
            alerts(s, back - 1, "FleetProbeStorm", [({}, ratio)]),
            # Held after the fleet is back, then gone.
            alerts(s, back + hold - 1, "FleetProbeStorm", [({}, ratio)]),
            alerts(s, back + hold, "FleetProbeStorm", []),
        ],
        promql_expr_test=[
            _failing_ratio(0, 0),
            _failing_ratio(1, ratio),
        ],
    )


def no_storm_case(s: RuleSettings) -> dict[str, Any]:
    """No storm below the minimum fleet size (1 of 2), nor below the fraction."""
    minutes = 6
    failing: list[int | str] = list(range(minutes))
    fine: list[int | str] = [0] * minutes
    small = cluster_series("pair-a", failing) + cluster_series("pair-b", fine)
    return case(
        name="no storm: 1 of 2 failing",
        input_series=small,
        alert_rule_test=[alerts(s, m, "FleetProbeStorm", []) for m in range(minutes)],
    )


def few_failing_case(s: RuleSettings) -> dict[str, Any]:
    size = max(s.storm_min_clusters, 4) * 2
    below = math.ceil(s.storm_fraction * size) - 1
    minutes = 4
    series: list[dict[str, str]] = []
    for i in range(size):
        failures: list[int | str] = list(range(minutes)) if i < below else [0] * minutes
        series += cluster_series(f"f{i}", failures)
    return case(
        name=f"no storm: {below} of {size} failing",
        input_series=series,
        alert_rule_test=[alerts(s, m, "FleetProbeStorm", []) for m in range(minutes)],
    )


def exporter_case(s: RuleSettings) -> dict[str, Any]:
    """Exporter down (scrape fails) and absent (no target at all)."""
    job = {"job": s.exporter_job, "instance": "127.0.0.1:9713"}
    return case(
        name="exporter down",
        input_series=[
            {
                "series": f'up{{job="{s.exporter_job}", instance="127.0.0.1:9713"}}',
                "values": "1 1 0 0 0 0",
            }
        ],
        alert_rule_test=[
            alerts(s, 3, "FleetwatchExporterDown", []),
            alerts(s, 4, "FleetwatchExporterDown", [(job, 0.0)]),
            alerts(s, 5, "FleetwatchExporterAbsent", []),
        ],
    )


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
        series += _cycle_series(s, instance, cycles)

    def at(instance: str) -> tuple[dict[str, str], None]:
        return {"job": s.exporter_job, "instance": instance}, None

    alert = "FleetwatchExporterStalled"
    return case(
        name="exporter stalled",
        input_series=series,
        alert_rule_test=[
            alerts(s, never_true + 1, alert, []),  # pending: for 2m
            alerts(s, never_true + 2, alert, [at("never:9713")]),
            alerts(s, stuck_true + 1, alert, [at("never:9713")]),
            alerts(s, stuck_true + 2, alert, [at("never:9713"), at("stuck:9713")]),
            alerts(s, recovered, alert, [at("never:9713")]),  # cycles again: resolved
        ],
    )


def absent_case(s: RuleSettings) -> dict[str, Any]:
    return case(
        name="exporter absent",
        input_series=[
            {"series": 'up{job="prometheus", instance="127.0.0.1:9090"}', "values": "1x8"}
        ],
        alert_rule_test=[
            alerts(s, 4, "FleetwatchExporterAbsent", []),
            alerts(s, 5, "FleetwatchExporterAbsent", [({"job": s.exporter_job}, 1.0)]),
        ],
    )


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
            "values": timeline(list(values)),
        }

    failing = [1] * down_from + [0] * (back - down_from) + [1] * (minutes - back)
    blip = [1] * down_from + [0] * 10 + [1] * (minutes - down_from - 10)
    exporter = {"job": s.exporter_job, "instance": "down:9713"}
    reactor = {"job": "fleetwatch-reactor", "instance": "reactor:9714"}
    alert = DISCOVERY_DOWN_ALERT
    firing: list[tuple[dict[str, str], float | None]] = [(exporter, 0.0), (reactor, 0.0)]
    return case(
        name="discovery from the management cluster's API down",
        input_series=[
            series(s.exporter_job, "down:9713", failing),
            series("fleetwatch-reactor", "reactor:9714", failing),
            series(s.exporter_job, "blip:9713", blip),
            {
                "series": f'up{{job="{s.exporter_job}", instance="files-only:9713"}}',
                "values": f"1x{minutes}",
            },
        ],
        alert_rule_test=[
            alerts(s, down_from, alert, []),
            alerts(s, down_from + 9, alert, []),  # pending, and the blip's last minute
            alerts(s, down_from + 10, alert, firing),
            alerts(s, back - 1, alert, firing),
            alerts(s, back, alert, []),
        ],
    )


def test_file(settings: RuleSettings, rule_file: str) -> dict[str, Any]:
    """A whole promtool test file for rules rendered with ``settings``."""
    return file_body(
        rule_file,
        [
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
            cd_watch_down_case(settings),
            reactor_down_case(settings),
            reactor_database_case(settings),
            reactor_reconcile_case(settings),
            reactor_notifications_case(settings),
        ],
    )


GENERATOR = Generator("fleetwatch.rules.yml", "rules_promtool", "fleetwatch.test.yml", test_file)


def render_test_file(settings: RuleSettings, rule_file: str) -> str:
    return GENERATOR.render(settings, rule_file)


if __name__ == "__main__":
    GENERATOR.main()
