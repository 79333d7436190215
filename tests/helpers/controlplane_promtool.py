"""promtool unit tests of the etcd, control-plane and CoreDNS alerts (the shipped file is
alerts/tests/controlplane.test.yml).

The cases are data here; the expected annotations are the rules' own templates expanded, so
a reworded annotation does not need two edits, while every expression, ``for:`` and label is
checked by promtool against hand-written series. Regenerate the shipped file with:

    .venv/bin/python -m tests.helpers.controlplane_promtool \
        > alerts/tests/controlplane.test.yml

``observed_states_test`` builds a further test from the reports a real etcd cluster gave
(tests/etcd/test_etcd_direct.py): the alerts' expressions checked against live states.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from alerts.rules import RuleSettings, controlplane_groups
from exporter.controlplane.quorum import EtcdReport, QuorumState
from exporter.controlplane.report import ControlPlaneReport, report_samples
from tests.helpers.promtool_build import (
    SHIPPED_RULE_FILE,
    Generator,
    case,
    document,
    file_body,
)

EXPORTER = {"job": "fleetwatch-exporter", "instance": "127.0.0.1:9713"}


def _rules() -> dict[str, dict[str, Any]]:
    return {
        r["alert"]: r
        for g in controlplane_groups(RuleSettings())
        for r in g["rules"]
        if "alert" in r
    }


def _fmt_value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _expand(text: str, labels: Mapping[str, str], value: float) -> str:
    def one(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        if expr == "$value":
            return _fmt_value(value)
        if expr.startswith("$labels."):
            return labels[expr.removeprefix("$labels.")]
        raise ValueError(f"template {expr!r} not known to the test builder")

    return re.sub(r"\{\{(.*?)\}\}", one, text)


def series(name: str, values: str, instance: str | None = None, **labels: str) -> dict[str, str]:
    all_labels = {**labels, **EXPORTER}
    if instance is not None:
        all_labels["instance"] = instance
    text = ", ".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def expect(
    alertname: str, eval_time: str, fired: Sequence[tuple[Mapping[str, str], float]] = ()
) -> dict[str, Any]:
    """``fired``: (alert labels besides severity, $value) of each alert expected firing."""
    rule = _rules()[alertname]
    exp = []
    for labels, value in fired:
        exp.append(
            {
                "exp_labels": {**labels, **rule["labels"]},
                "exp_annotations": {
                    k: _expand(v, labels, value) for k, v in rule["annotations"].items()
                },
            }
        )
    return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": exp}


STATE = "fleetwatch_etcd_quorum_state"


def localhost_only(values: str, cluster: str, component: str, *nodes: str) -> list[dict[str, str]]:
    """``fleetwatch_controlplane_localhost_only`` of ``component`` on each of ``nodes``."""
    return [
        series(
            "fleetwatch_controlplane_localhost_only",
            values,
            cluster=cluster,
            component=component,
            node=node,
        )
        for node in nodes
    ]


def cases() -> list[dict[str, Any]]:
    a, b, c = {"cluster": "a"}, {"cluster": "b"}, {"cluster": "c"}
    return [
        case(
            "quorum lost pages after 1m; no fault tolerance warns after 15m",
            [
                series(STATE, "0 0 1x20", cluster="a", state="lost"),
                series(STATE, "1 1 0x20", cluster="a", state="healthy"),
                series(STATE, "0x22", cluster="a", state="no_fault_tolerance"),
                series(STATE, "0x22", cluster="b", state="lost"),
                series(STATE, "1x22", cluster="b", state="no_fault_tolerance"),
            ],
            [
                expect("FleetEtcdQuorumLost", "2m"),
                expect("FleetEtcdQuorumLost", "3m", [(a, 1)]),
                expect("FleetEtcdNoFaultTolerance", "14m"),
                expect("FleetEtcdNoFaultTolerance", "15m", [(b, 1)]),
                expect("FleetEtcdNoLeader", "15m"),
            ],
        ),
        case(
            "an HA pair of exporters: one exporter's bad view pages nothing",
            [
                series(STATE, "1x20", "127.0.0.1:9713", cluster="a", state="lost"),
                series(STATE, "0x20", "127.0.0.2:9713", cluster="a", state="lost"),
                series("fleetwatch_etcd_has_leader", "0x20", "127.0.0.1:9713", cluster="a"),
                series("fleetwatch_etcd_has_leader", "1x20", "127.0.0.2:9713", cluster="a"),
            ],
            [
                expect("FleetEtcdQuorumLost", "10m"),
                expect("FleetEtcdNoLeader", "10m"),
            ],
        ),
        case(
            "no leader pages after 1m",
            [
                series("fleetwatch_etcd_has_leader", "1 1 0x10", cluster="a"),
                series("fleetwatch_etcd_has_leader", "1x12", cluster="b"),
            ],
            [
                expect("FleetEtcdNoLeader", "2m"),
                expect("FleetEtcdNoLeader", "3m", [(a, 0)]),
            ],
        ),
        case(
            "even member counts warn after an hour, odd ones never",
            [
                series("fleetwatch_etcd_members", "4x70", cluster="a"),
                series("fleetwatch_etcd_members", "3x70", cluster="b"),
                series("fleetwatch_etcd_members", "2x70", cluster="c"),
            ],
            [
                expect("FleetEtcdEvenMemberCount", "59m"),
                expect("FleetEtcdEvenMemberCount", "60m", [(a, 4), (c, 2)]),
            ],
        ),
        case(
            "three raft term changes within an hour warn",
            [
                series("fleetwatch_etcd_raft_term", "2 2 3 3 4 4 5x10", cluster="a"),
                series("fleetwatch_etcd_raft_term", "2 2 3x14", cluster="b"),
            ],
            [
                expect("FleetEtcdFrequentLeaderChanges", "5m"),
                expect("FleetEtcdFrequentLeaderChanges", "6m", [(a, 3)]),
            ],
        ),
        case(
            "localhost-bound components: one warning per component with its node count",
            [
                *localhost_only("1x20", "a", "kube-scheduler", "cp-1", "cp-2", "cp-3"),
                *localhost_only("0x20", "a", "kube-apiserver", "cp-1", "cp-2", "cp-3"),
                *localhost_only("1x20", "a", "etcd", "cp-1"),
                *localhost_only("0x20", "b", "kube-scheduler", "cp-1"),
            ],
            [
                expect("FleetControlPlaneLocalhostOnly", "14m"),
                expect(
                    "FleetControlPlaneLocalhostOnly",
                    "15m",
                    [
                        ({"cluster": "a", "component": "etcd"}, 1),
                        ({"cluster": "a", "component": "kube-scheduler"}, 3),
                    ],
                ),
            ],
        ),
        case(
            "CoreDNS: two replicas on one node warn; spread or single replica do not",
            [
                series("fleetwatch_coredns_replicas", "2x20", cluster="a"),
                series("fleetwatch_coredns_nodes", "1x20", cluster="a"),
                series("fleetwatch_coredns_replicas", "2x20", cluster="b"),
                series("fleetwatch_coredns_nodes", "2x20", cluster="b"),
                series("fleetwatch_coredns_replicas", "1x20", cluster="c"),
                series("fleetwatch_coredns_nodes", "1x20", cluster="c"),
            ],
            [
                expect("FleetCoreDNSSingleNode", "14m"),
                expect("FleetCoreDNSSingleNode", "15m", [(a, 1)]),
            ],
        ),
    ]


def test_file(settings: RuleSettings, rule_file: str) -> dict[str, Any]:
    """The cases are written for the default settings (the rules' own ``for:``s)."""
    return file_body(rule_file, cases())


GENERATOR = Generator(
    "the etcd, control-plane and CoreDNS alerts",
    "controlplane_promtool",
    "controlplane.test.yml",
    test_file,
    prometheus=None,
    width=100,
    allow_unicode=True,
)


def render_test_file(rule_file: str = SHIPPED_RULE_FILE) -> str:
    return GENERATOR.render(RuleSettings(), rule_file)


# --- the live states ------------------------------------------------------------------------

#: Alerts each quorum state must (and must not) raise, held long enough for every ``for:``.
STATE_ALERTS: dict[QuorumState, set[str]] = {
    QuorumState.HEALTHY: set(),
    QuorumState.NO_FAULT_TOLERANCE: {"FleetEtcdNoFaultTolerance"},
    QuorumState.LOST: {"FleetEtcdQuorumLost", "FleetEtcdNoLeader"},
}
CHECKED = ("FleetEtcdQuorumLost", "FleetEtcdNoFaultTolerance", "FleetEtcdNoLeader")


def observed_states_test(observed: Mapping[str, EtcdReport], rule_file: str) -> str:
    """One promtool test per observed report: its exporter samples held for 20 minutes."""
    tests = []
    for step, report in observed.items():
        samples = report_samples(ControlPlaneReport(etcd=report, targets=(), coredns=None))
        input_series = [
            series(
                s.name,
                "1x20" if s.value == 1 else f"{_fmt_value(s.value)}x20",
                cluster=step,
                **s.labels,
            )
            for s in samples
        ]
        firing = STATE_ALERTS[report.quorum.state]
        checks = []
        for alertname in CHECKED:
            value = 0.0 if alertname == "FleetEtcdNoLeader" else 1.0
            fired = [({"cluster": step}, value)] if alertname in firing else []
            checks.append(expect(alertname, "20m", fired))
        tests.append(case(f"observed on a real etcd: {step}", input_series, checks))
    top = "# Generated from live etcd states.\n"
    return document(file_body(rule_file, tests), top, width=100, allow_unicode=True)


if __name__ == "__main__":
    GENERATOR.main()
