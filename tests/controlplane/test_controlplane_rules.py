"""The etcd/control-plane/CoreDNS alert rules: promtool unit tests, and that they can fail.

That the shipped alerts/tests/controlplane.test.yml is its generator's output and passes on
the shipped rules is tests/rules/test_promtool_files.py's, with every generated file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from alerts.controlplane import KUBEADM_FIX, WHY, rule_groups
from alerts.rules import RuleSettings, render_rules
from tests.helpers.alerting_tools import promtool
from tests.helpers.controlplane_promtool import render_test_file

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool")


def layout(tmp_path: Path, rules_text: str) -> Path:
    """rules at tmp/fleetwatch.rules.yml, tests at tmp/tests/, as in alerts/."""
    (tmp_path / "fleetwatch.rules.yml").write_text(rules_text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "controlplane.test.yml").write_text(render_test_file())
    return tmp_path / "tests"


@needs_promtool
def test_promtool_check_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(render_rules(RuleSettings()))
    result = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    tests = layout(tmp_path, render_rules(RuleSettings()))
    result = promtool("test", "rules", "controlplane.test.yml", cwd=tests)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("good", "broken"),
    [
        (
            "changes(fleetwatch_etcd_raft_term[1h])) >= 3",
            "changes(fleetwatch_etcd_raft_term[1h])) >= 4",
        ),
        (
            "max by (cluster) (fleetwatch_coredns_nodes) == 1",
            "max by (cluster) (fleetwatch_coredns_nodes) == 2",
        ),
        (
            'min by (cluster) (fleetwatch_etcd_quorum_state{state="lost"})',
            'max by (cluster) (fleetwatch_etcd_quorum_state{state="lost"})',
        ),
    ],
)
def test_a_broken_rule_fails_the_unit_tests(tmp_path: Path, good: str, broken: str) -> None:
    rules_text = render_rules(RuleSettings())
    assert good in rules_text
    tests = layout(tmp_path, rules_text.replace(good, broken))
    result = promtool("test", "rules", "controlplane.test.yml", cwd=tests)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_rules_are_appended_to_the_rendered_file() -> None:
    loaded = yaml.safe_load(render_rules(RuleSettings()))
    names = [g["name"] for g in loaded["groups"]]
    assert names[-2:] == ["fleetwatch-etcd", "fleetwatch-controlplane"]


def test_every_alert_is_justified_and_has_a_severity() -> None:
    alerts = [r for g in rule_groups() for r in g["rules"]]
    assert {r["alert"] for r in alerts} == set(WHY)
    for rule in alerts:
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_localhost_alert_gives_the_kubeadm_fix() -> None:
    rule = next(
        r
        for g in rule_groups()
        for r in g["rules"]
        if r["alert"] == "FleetControlPlaneLocalhostOnly"
    )
    text = rule["annotations"]["description"]
    assert KUBEADM_FIX in text
    for needle in (
        "scheduler.extraArgs",
        "controllerManager.extraArgs",
        "bind-address: 0.0.0.0",
        "listen-metrics-urls: http://0.0.0.0:2381",
    ):
        assert needle in text
