"""Unit tests of FleetwatchShardingMismatch in promtool's format (alerts/tests/sharding.test.yml).

Each case is a set of exporters, each one its ``up`` and the three series of its shard view
(``fleetwatch_exporter_shard{index,count}``, ``fleetwatch_exporter_shards``,
``fleetwatch_exporter_fleet_clusters``), over a timeline of one sample per minute.
The shipped file is this module's output for the default settings (a test keeps them
equal); regenerate it after changing the rules::

    .venv/bin/python -m tests.helpers.sharding_promtool > alerts/tests/sharding.test.yml
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from alerts.rules import RuleSettings, groups
from alerts.sharding import FLEET_SIZE_MIN_FOR_S, SHARDING_ALERT
from fleetwatch.common.metricnames import EXPORTER_FLEET_CLUSTERS, EXPORTER_SHARD, EXPORTER_SHARDS
from tests.helpers.promtool_build import Generator, file_body

JOB = "fleetwatch-exporter"
MINUTES = 30


@dataclass(frozen=True)
class Exporter:
    """One exporter's view: its shard, the fleet it sees; ``down`` from that minute on."""

    instance: str
    index: int
    count: int
    fleet: int = 24
    down: int | None = None
    #: (from minute, fleet size): what it sees changes there
    fleet_from: tuple[int, int] | None = None


def _values(exporter: Exporter, value: int, fleet: bool = False) -> str:
    out: list[str] = []
    for minute in range(MINUTES):
        if exporter.down is not None and minute >= exporter.down:
            out.append("stale")
        elif fleet and exporter.fleet_from is not None and minute >= exporter.fleet_from[0]:
            out.append(str(exporter.fleet_from[1]))
        else:
            out.append(str(value))
    return " ".join(out)


def series(exporters: list[Exporter]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for e in exporters:
        labels = f'job="{JOB}", instance="{e.instance}"'
        up = " ".join("0" if e.down is not None and m >= e.down else "1" for m in range(MINUTES))
        out += [
            {"series": f"up{{{labels}}}", "values": up},
            {
                "series": f'{EXPORTER_SHARD}{{{labels}, index="{e.index}", count="{e.count}"}}',
                "values": _values(e, 1),
            },
            {"series": f"{EXPORTER_SHARDS}{{{labels}}}", "values": _values(e, e.count)},
            {
                "series": f"{EXPORTER_FLEET_CLUSTERS}{{{labels}}}",
                "values": _values(e, e.fleet, fleet=True),
            },
        ]
    return out


def _alert(settings: RuleSettings, mismatch: str, value: float) -> dict[str, Any]:
    """The alert as Prometheus renders it (its templates use ``$labels.job`` and ``$value``)."""
    (body,) = [
        r.body
        for g in groups(settings)  # as rendered: with its runbook_url
        for r in g.rules
        if r.body.get("alert") == SHARDING_ALERT and r.body["labels"]["mismatch"] == mismatch
    ]
    return {
        "exp_labels": {"job": JOB, **body["labels"]},
        "exp_annotations": {
            key: text.replace("{{ $labels.job }}", JOB).replace("{{ $value }}", f"{value:g}")
            for key, text in body["annotations"].items()
        },
    }


def case(
    settings: RuleSettings,
    name: str,
    exporters: list[Exporter],
    checks: list[tuple[int, list[tuple[str, float]]]],
) -> dict[str, Any]:
    """``checks``: (minute, the mismatches firing then, each with its value)."""
    return {
        "name": name,
        "interval": "1m",
        "input_series": series(exporters),
        "alert_rule_test": [
            {
                "eval_time": f"{minute}m",
                "alertname": SHARDING_ALERT,
                "exp_alerts": [_alert(settings, m, v) for m, v in firing],
            }
            for minute, firing in checks
        ],
    }


def two_by_two(count: int = 2, **changes: Exporter) -> list[Exporter]:
    """Two vantage points (a, b) of ``count`` shards each, as the sharded overlay runs them."""
    fleet = [Exporter(f"127.0.{vp}.{i}:9713", i, count) for vp in (1, 2) for i in range(count)]
    return [changes.get(e.instance, e) for e in fleet]


def fleet_hold_minutes(settings: RuleSettings) -> int:
    """The fleet-size rule's ``for:``, in minutes of this timeline."""
    return math.ceil(max(2 * settings.probe_interval, FLEET_SIZE_MIN_FOR_S) / 60)


def test_file(settings: RuleSettings, rule_file: str) -> dict[str, Any]:
    hold = fleet_hold_minutes(settings)
    assert 2 + hold < MINUTES, "the timeline is too short for this probe interval"
    a0, b0 = "127.0.1.0:9713", "127.0.2.0:9713"
    a1, b1 = "127.0.1.1:9713", "127.0.2.1:9713"
    return file_body(
        rule_file,
        [
            case(
                settings,
                "a rolling change of --shard.count stuck half-way: one exporter at 2, one at 3",
                [Exporter(a0, 0, 2), Exporter(a1, 1, 3)],
                [(9, []), *((m, [("shard_count", 3), ("index_missing", 2)]) for m in (10, 29))],
            ),
            case(
                settings,
                "two vantage points of two shards, one replica down: no mismatch",
                two_by_two(**{b1: Exporter(b1, 1, 2, down=5)}),
                [(4, []), (20, []), (29, [])],
            ),
            case(
                settings,
                "unsharded, two replicas: no mismatch",
                [Exporter(a0, 0, 1), Exporter(b0, 0, 1)],
                [(20, [])],
            ),
            case(
                settings,
                "--shard.count 3 but two replicas per StatefulSet: index 2 missing, no doubled",
                [Exporter(a0, 0, 3), Exporter(a1, 1, 3), Exporter(b0, 0, 3), Exporter(b1, 1, 3)],
                [(9, []), (10, [("index_missing", 2)])],
            ),
            case(
                settings,
                "an exporter with the wrong index: index 0 served three times",
                two_by_two(**{b1: Exporter(b1, 0, 2)}),
                [(9, []), (10, [("index_doubled", 3)])],
            ),
            case(
                settings,
                "one exporter does not see two clusters",
                two_by_two(**{b1: Exporter(b1, 1, 2, fleet_from=(2, 22))}),
                [(2 + hold - 1, []), (2 + hold, [("fleet_size", 24)])],
            ),
            case(
                settings,
                "the fleet grows and the exporters see it one cycle apart: no mismatch",
                two_by_two(
                    **{
                        a0: Exporter(a0, 0, 2, fleet_from=(3, 25)),
                        a1: Exporter(a1, 1, 2, fleet_from=(3, 25)),
                        b0: Exporter(b0, 0, 2, fleet_from=(8, 25)),
                        b1: Exporter(b1, 1, 2, fleet_from=(8, 25)),
                    }
                ),
                [(5, []), (12, []), (29, [])],
            ),
        ],
    )


GENERATOR = Generator(SHARDING_ALERT, "sharding_promtool", "sharding.test.yml", test_file)


def render_test_file(settings: RuleSettings, rule_file: str) -> str:
    return GENERATOR.render(settings, rule_file)


if __name__ == "__main__":
    GENERATOR.main()
