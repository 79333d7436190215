"""``fleetwatch.cli.explain_next.what_next``: one row per row of its docstring's table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetwatch.cli.explain_next import Facts, what_next

BASE = Facts(
    known=True,
    status="ONLINE",
    threshold=3,
    failures=0,
    reason_class=None,
    count_rejected=True,
    held=None,
    storm_fraction=0.5,
    outage_open=False,
    apps_deployed=3,
    apps_degraded_by_outage=0,
    objects_active=2,
    objects_paused_by_outage=0,
    objects_paused_by_person=0,
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"known": False}, ["nothing: no source knows this cluster"]),
        (
            {
                "status": "UNKNOWN",
                "failures": 1,
                "reason_class": "credentials",
                "count_rejected": False,
            },
            ["refused credentials are not counted"],
        ),
        (
            {"status": "UNKNOWN", "failures": 3, "held": "storm_guard"},
            ["the storm guard holds it back", "until fewer than 50% of the fleet fail"],
        ),
        ({"status": "UNKNOWN", "held": "silence"}, ["silenced: no cascade"]),
        (
            {
                "status": "OFFLINE",
                "failures": 3,
                "outage_open": True,
                "apps_degraded_by_outage": 3,
                "objects_paused_by_outage": 2,
                "objects_paused_by_person": 1,
            },
            ["3 apps restored, 2 objects resumed; 1 object paused by a person stay paused"],
        ),
        ({"status": "OFFLINE", "failures": 3}, ["never seen ONLINE: no cascade"]),
        (
            {"failures": 1},
            ["2 more failed probes -> OFFLINE: 3 apps DEGRADED, 2 CD objects paused"],
        ),
        ({"failures": 2}, ["1 more failed probe -> OFFLINE"]),
        ({}, ["nothing pending", "(at 3)"]),
        ({"status": "UNKNOWN", "failures": None}, ["UNKNOWN: nothing is paused"]),
    ],
)
def test_what_next(changes: dict[str, object], expected: list[str]) -> None:
    said = " | ".join(what_next(replace(BASE, **changes)))  # type: ignore[arg-type]
    for words in expected:
        assert words in said


def test_refused_credentials_not_counted_under_a_storm_say_both() -> None:
    facts = replace(
        BASE, status="UNKNOWN", reason_class="credentials", count_rejected=False, held="storm_guard"
    )
    said = what_next(facts)
    assert len(said) == 2 and "not counted" in said[0] and "storm guard" in said[1]
