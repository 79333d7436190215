"""Refused credentials in the rules: FleetClusterCredentialsRejected and whether they count.

The promtool unit tests (``alerts/tests/credentials.test.yml``, built by
``credentials_promtool.py``) run for both settings of ``--failure.count-rejected`` and
several thresholds; the status cases of ``rules_promtool.py`` (no refusals in them) must
hold unchanged when refusals are not counted.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from alerts.rules import RuleSettings, render_rules
from fleetwatch.cli import main
from tests.helpers import rules_promtool
from tests.helpers.alerting_tools import unit_tests
from tests.helpers.credentials_promtool import render_test_file


def _run(tmp_path: Path, rules: RuleSettings, tests: str) -> subprocess.CompletedProcess[str]:
    return unit_tests(tmp_path, render_rules(rules), tests)


@pytest.mark.parametrize("threshold", [1, 2, 3])
@pytest.mark.parametrize("count_rejected", [True, False], ids=["counted", "not-counted"])
def test_refusals_alert_at_once_and_count_only_when_told(
    tmp_path: Path, threshold: int, count_rejected: bool
) -> None:
    settings = RuleSettings(failure_threshold=threshold, count_rejected=count_rejected)
    result = _run(tmp_path, settings, render_test_file(settings, "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("rules_count", [True, False], ids=["counted", "not-counted"])
def test_the_unit_tests_tell_the_two_settings_apart(tmp_path: Path, rules_count: bool) -> None:
    """Rules of one setting fail the cases of the other: the cases can fail."""
    expected = RuleSettings(count_rejected=not rules_count)
    result = _run(
        tmp_path, RuleSettings(count_rejected=rules_count), render_test_file(expected, "rules.yml")
    )
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_the_status_cases_hold_when_refusals_are_not_counted(tmp_path: Path) -> None:
    """Without refusals, not counting them changes no status, alert or annotation text
    but the sentence that says they are not counted."""
    settings = RuleSettings(count_rejected=False)
    result = _run(tmp_path, settings, rules_promtool.render_test_file(settings, "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_flag_chooses_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for args in ([], ["--failure.count-rejected"], ["--no-failure.count-rejected"]):
        assert main(["rules", *args]) == 0
        outputs[tuple(args)] = capsys.readouterr().out
    assert outputs[()] == outputs[("--failure.count-rejected",)] == render_rules(RuleSettings())
    not_counted = outputs[("--no-failure.count-rejected",)]
    assert not_counted == render_rules(RuleSettings(count_rejected=False))
    credential = "fleetwatch_cluster_probe_consecutive_credential_failures"
    assert credential not in outputs[()] and credential in not_counted
    assert "FleetClusterCredentialsRejected" in outputs[()]
