"""The cases of ``alerts/tests/fleetwatch.test.yml`` for the reactor's and the CD
integration's alerts: replicas down, the database, reconciliation, notifications, and CD
actions pending, unacted, stalled or unwatched, and the objects' list+watch down.

``rules_promtool`` puts them in the shipped file after the cluster-status cases; the
timeline is the same (one sample a minute, position i of a series is minute i).
"""

from __future__ import annotations

from typing import Any

from alerts.cd import (
    CD_NO_ACTOR_ALERT,
    CD_PENDING_ALERT,
    CD_STALLED_ALERT,
    CD_UNWATCHED_ALERT,
    CD_WATCH_DOWN_ALERT,
)
from alerts.reactor import (
    DATABASE_ALERT,
    NOTIFICATIONS_ALERT,
    REACTOR_DOWN_ALERT,
    REACTOR_REPLICA_DOWN_ALERT,
    RECONCILE_ALERT,
)
from alerts.rules import RuleSettings
from fleetwatch.common.metricnames import (
    REACTOR_CD_INFO,
    REACTOR_CD_LAST_RESYNC,
    REACTOR_CD_LEADER,
    REACTOR_CD_PENDING_AGE,
    REACTOR_CD_RESYNC_INTERVAL,
    REACTOR_CD_UNWATCHED,
    REACTOR_CD_WATCH_UP,
    REACTOR_DATABASE_UP,
    REACTOR_NOTIFICATIONS,
    REACTOR_RECONCILE_INTERVAL,
    REACTOR_RECONCILE_LAST_SUCCESS,
    total,
)
from tests.helpers.promtool_build import alerts, case, timeline


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
            {"series": f"{REACTOR_CD_PENDING_AGE}{{{labels}}}", "values": timeline(age)},
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
    return case(
        name="CD actions pending",
        input_series=series,
        alert_rule_test=[
            alerts(s, 4, alert, []),  # over two intervals: pending
            alerts(s, 8, alert, []),
            alerts(s, 9, alert, [at("stuck:9714", 9)]),
            alerts(s, 13, alert, [at("stuck:9714", 13)]),
            alerts(s, 14, alert, []),  # done: resolved
            alerts(s, 16, alert, []),  # slow: over 600 s from minute 12, pending
            alerts(s, 17, alert, [at("slow:9714", 17)]),
        ],
    )


def cd_no_actor_case(s: RuleSettings) -> dict[str, Any]:
    """No replica acting on the CD objects: after 2 minutes with no Lease holder, and only then.

    Job ``fleetwatch-reactor``, two replicas: r1 acts until minute 4 and r2 takes over at
    minute 5 (one minute without a holder: a hand-over, never firing); nobody acts from
    minute 8 (a Lease the replicas may not update) to 14: firing from minute 10, resolved
    at 14. Job ``fleetwatch-reactor-b``, one replica acting throughout: never firing.
    """
    minutes = 18

    def acting(*spans: tuple[int, int]) -> str:
        return timeline([int(any(a <= m < b for a, b in spans)) for m in range(minutes)])

    def leader(job: str, instance: str, values: str) -> dict[str, str]:
        return {
            "series": f'{REACTOR_CD_LEADER}{{job="{job}", instance="{instance}"}}',
            "values": values,
        }

    job = {"job": "fleetwatch-reactor"}
    alert = CD_NO_ACTOR_ALERT
    return case(
        name="no replica acts on the CD objects",
        input_series=[
            leader("fleetwatch-reactor", "r1:9714", acting((0, 4))),
            leader("fleetwatch-reactor", "r2:9714", acting((5, 8), (14, minutes))),
            leader("fleetwatch-reactor-b", "r3:9714", acting((0, minutes))),
        ],
        alert_rule_test=[
            alerts(s, 5, alert, []),  # the hand-over's minute: never long enough
            alerts(s, 9, alert, []),  # pending since minute 8
            alerts(s, 10, alert, [(job, None)]),
            alerts(s, 13, alert, [(job, None)]),
            alerts(s, 14, alert, []),  # r2 took the Lease
        ],
    )


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
    series = [_reactor_series(s, REACTOR_CD_LAST_RESYNC, i, timeline(v)) for i, v in passes.items()]
    series += [_reactor_series(s, REACTOR_CD_RESYNC_INTERVAL, i, f"60x{minutes}") for i in passes]
    series += [
        _reactor_series(s, REACTOR_CD_LEADER, "stuck:9714", f"1x{minutes}"),
        _reactor_series(s, REACTOR_CD_LEADER, "waiting:9714", f"0x{minutes}"),
        _reactor_series(s, REACTOR_DATABASE_UP, "dbdown:9714", f"0x{minutes}"),
    ]

    def at(*instances: str) -> list[tuple[dict[str, str], None]]:
        return [_reactor(s, i) for i in instances]

    alert = CD_STALLED_ALERT
    return case(
        name="CD resync stalled",
        input_series=series,
        alert_rule_test=[
            alerts(s, 8, alert, []),  # never: pending since minute 4
            alerts(s, 9, alert, at("never:9714")),
            alerts(s, 12, alert, at("never:9714")),  # stuck: pending since minute 8
            alerts(s, 13, alert, at("never:9714", "stuck:9714")),
            alerts(s, 16, alert, at("never:9714")),  # stuck passed again
        ],
    )


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
    paused = timeline([2 if 2 <= m < 12 else 0 for m in range(minutes)])

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
    return case(
        name="CD objects paused and no longer watched",
        input_series=series,
        alert_rule_test=[
            alerts(s, 1, alert, []),  # the dry run's paused Applications: never
            alerts(s, 6, alert, []),  # pending since minute 2
            alerts(s, 7, alert, firing),
            alerts(s, 11, alert, firing),
            alerts(s, 12, alert, []),  # resumed
        ],
    )


def cd_watch_down_case(s: RuleSettings) -> dict[str, Any]:
    """The CD objects' list+watch failing for 10 minutes, and only then.

    ``down`` fails from minute 2 to 16 (a kind forbidden, an objects process that keeps
    ending): pending for 10 minutes, firing from minute 12, resolved at 16. ``blip`` fails
    for 4 minutes (an API server restarted, the backoff heals): never. ``ok``: never.
    """
    minutes = 18

    def up(start: int, end: int) -> str:
        return timeline([0 if start <= m < end else 1 for m in range(minutes)])

    series = [
        _reactor_series(s, REACTOR_CD_WATCH_UP, "down:9714", up(2, 16)),
        _reactor_series(s, REACTOR_CD_WATCH_UP, "blip:9714", up(3, 7)),
        _reactor_series(s, REACTOR_CD_WATCH_UP, "ok:9714", f"1x{minutes}"),
    ]
    alert = CD_WATCH_DOWN_ALERT
    return case(
        name="CD objects' list+watch down",
        input_series=series,
        alert_rule_test=[
            alerts(s, 6, alert, []),  # blip: pending, then healed
            alerts(s, 11, alert, []),  # down: pending since minute 2
            alerts(s, 12, alert, [_reactor(s, "down:9714")]),
            alerts(s, 15, alert, [_reactor(s, "down:9714")]),
            alerts(s, 16, alert, []),  # answering again
        ],
    )


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
    return case(
        name="reactor replicas down",
        input_series=[
            _reactor_series(s, "up", "r1:9714", "1 1 0 0 0 0 0 0 0"),
            _reactor_series(s, "up", "r2:9714", "1 1 1 1 1 0 0 0 0"),
        ],
        alert_rule_test=[
            alerts(s, 3, REACTOR_REPLICA_DOWN_ALERT, []),  # pending: for 2m
            alerts(s, 4, REACTOR_REPLICA_DOWN_ALERT, [_reactor(s, "r1:9714")]),
            alerts(s, 4, REACTOR_DOWN_ALERT, []),
            alerts(s, 6, REACTOR_DOWN_ALERT, []),
            alerts(s, 6, REACTOR_REPLICA_DOWN_ALERT, []),  # r2 gone too: not a warning
            alerts(s, 7, REACTOR_DOWN_ALERT, [_reactor(s, "r1:9714"), _reactor(s, "r2:9714")]),
        ],
    )


def reactor_database_case(s: RuleSettings) -> dict[str, Any]:
    """r1 cannot read its database from minute 2 to 5 (a page from minute 4), r2 can."""
    return case(
        name="reactor database unavailable",
        input_series=[
            _reactor_series(s, REACTOR_DATABASE_UP, "r1:9714", "1 1 0 0 0 0 1 1"),
            _reactor_series(s, REACTOR_DATABASE_UP, "r2:9714", "1x7"),
        ],
        alert_rule_test=[
            alerts(s, 3, DATABASE_ALERT, []),
            alerts(s, 4, DATABASE_ALERT, [_reactor(s, "r1:9714")]),
            alerts(s, 5, DATABASE_ALERT, [_reactor(s, "r1:9714")]),
            alerts(s, 6, DATABASE_ALERT, []),
        ],
    )


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
            _reactor_series(s, REACTOR_RECONCILE_LAST_SUCCESS, instance, timeline(list(last))),
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
    return case(
        name="reactor reconciliation failing",
        input_series=series,
        alert_rule_test=[
            alerts(s, 5, RECONCILE_ALERT, []),  # never: pending since minute 4
            alerts(s, 6, RECONCILE_ALERT, [never]),
            alerts(s, 7, RECONCILE_ALERT, [never]),  # stuck: pending since minute 6
            alerts(s, 8, RECONCILE_ALERT, [never, stuck]),
        ],
    )


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
    return case(
        name="reactor notifications failing",
        input_series=[
            *each("refusing:9714", rising, flat, 1),
            *each("mixed:9714", rising, rising, 1),
            *each("dbdown:9714", rising, flat, 0),
            *each("quiet:9714", flat, flat, 1),
        ],
        alert_rule_test=[
            alerts(s, 5, NOTIFICATIONS_ALERT, []),  # pending since minute 1: for 5m
            alerts(s, 6, NOTIFICATIONS_ALERT, [refusing]),
            alerts(s, 11, NOTIFICATIONS_ALERT, [refusing]),
        ],
    )
