"""The team-routing example (alerts/examples/team-routing.*.yml, docs/rules.md): the
PromQL join that gives a page its cluster's ``label_team``, checked by the real promtool
(alerts/tests/team-routing.test.yml), and the Alertmanager routes that match it, checked
by the real amtool. Live: both run as processes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.alerting_tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "alerts" / "examples"
RULES = EXAMPLES / "team-routing.rules.yml"
ALERTMANAGER = EXAMPLES / "team-routing.alertmanager.yml"
TESTS = ROOT / "alerts" / "tests" / "team-routing.test.yml"

pytestmark = pytest.mark.live


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} not installed")
    return run_tool(*argv, cwd=cwd)


def test_the_example_rules_are_valid_and_their_unit_tests_pass() -> None:
    check = run("promtool", "check", "rules", str(RULES))
    assert check.returncode == 0, check.stdout + check.stderr
    result = run("promtool", "test", "rules", TESTS.name, cwd=TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_join_fails_the_unit_tests_without_its_safeguards(tmp_path: Path) -> None:
    """The tests can fail: without topk (two replicas, one cluster: no single match) or
    without the `or` (a cluster with no labels series), they do."""
    text = RULES.read_text()
    broken = {
        "no-topk": text.replace(
            "topk by (cluster) (1, fleetwatch_cluster_labels)", "fleetwatch_cluster_labels"
        ),
        "no-or": text.replace(
            "or on (cluster)\n          cluster:fleetwatch_status:code == 2\n", ""
        ),
    }
    for name, rules in broken.items():
        assert rules != text, name
        folder = tmp_path / name
        (folder / "alerts" / "examples").mkdir(parents=True)
        (folder / "alerts" / "tests").mkdir()
        (folder / "alerts" / "examples" / RULES.name).write_text(rules)
        shutil.copy(ROOT / "alerts" / "fleetwatch.rules.yml", folder / "alerts")
        shutil.copy(TESTS, folder / "alerts" / "tests")
        result = run("promtool", "test", "rules", TESTS.name, cwd=folder / "alerts" / "tests")
        assert result.returncode != 0 and "FAILED" in result.stdout + result.stderr, name


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["alertname=FleetClusterOfflineTeam", "label_team=payments"], "payments-pager"),
        (["alertname=FleetClusterOfflineTeam", "label_team=search"], "search-pager"),
        (["alertname=FleetClusterOfflineTeam", "label_team=unknown"], "oncall-pager"),
        (["alertname=FleetClusterOfflineTeam"], "oncall-pager"),
        # The reactor's signal goes to the reactor only, team or not: one page.
        (["alertname=FleetClusterOffline", "label_team=payments"], "fleetwatch-reactor"),
    ],
)
def test_alertmanager_routes_the_page_by_label_team(labels: list[str], receiver: str) -> None:
    check = run("amtool", "check-config", str(ALERTMANAGER))
    assert check.returncode == 0, check.stdout + check.stderr
    routed = run(
        "amtool",
        "config",
        "routes",
        "test",
        f"--config.file={ALERTMANAGER}",
        *labels,
        "severity=critical",
        "cluster=pay-1",
    )
    assert routed.returncode == 0, routed.stdout + routed.stderr
    assert routed.stdout.split() == [receiver]


def test_the_docs_show_the_join_of_the_example() -> None:
    docs = (ROOT / "docs" / "rules.md").read_text()
    assert "* on (cluster) group_left (label_team) cluster:fleetwatch_cluster_labels:one" in docs
    assert "topk by (cluster) (1, fleetwatch_cluster_labels)" in docs
    assert 'label_team = "payments"' in docs
