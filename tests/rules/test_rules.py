"""The rules and the Alertmanager example, checked by the real promtool and amtool."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import controlplane as rules_controlplane
from alerts import rules
from alerts.reason import REASON_ANNOTATIONS
from alerts.rules import RulesError, RuleSettings, render_rules
from tests.helpers.alerting_tools import amtool_check, promtool, run_tool, unit_tests
from tests.helpers.rules_promtool import render_test_file

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
SHIPPED_RULES = ALERTS / "fleetwatch.rules.yml"
ALERTMANAGER = ALERTS / "alertmanager.yml"
FLEETWATCH = [sys.executable, "-m", "fleetwatch.cli"]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTER_HEALTH_")}
    return {**env, **extra}


def _fleetwatch_rules(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEETWATCH, "rules", *args],
        capture_output=True,
        text=True,
        env=_clean_env(**env),
        timeout=30,
        check=False,
    )


# --- the shipped files are the renderer's output -------------------------------------------


@pytest.mark.live
def test_shipped_rules_equal_fleetwatch_rules_defaults() -> None:
    result = _fleetwatch_rules()
    assert result.returncode == 0, result.stderr
    assert SHIPPED_RULES.read_text() == result.stdout, (
        "alerts/fleetwatch.rules.yml is stale: run "
        "`.venv/bin/fleetwatch rules > alerts/fleetwatch.rules.yml`"
    )


def test_rendered_yaml_is_the_rule_definitions() -> None:
    """Comments aside, the file is exactly the dicts of alerts.rules (nothing lost in YAML)."""
    settings = RuleSettings()
    loaded = yaml.safe_load(render_rules(settings))
    ours = [{"name": g.name, "rules": [r.body for r in g.rules]} for g in rules.groups(settings)]
    assert loaded["groups"][: len(ours)] == ours


# --- promtool -------------------------------------------------------------------------------


def test_promtool_check_rules_is_clean() -> None:
    result = promtool("check", "rules", str(SHIPPED_RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert "WARNING" not in (result.stdout + result.stderr).upper()


@pytest.mark.parametrize(("threshold", "interval"), [(1, 60.0), (3, 60.0), (5, 30.0), (2, 600.0)])
def test_promtool_unit_tests_for_other_thresholds(
    tmp_path: Path, threshold: int, interval: float
) -> None:
    """N-1 failures are ONLINE, N are OFFLINE, whatever N is (the same cases, re-rendered)."""
    settings = RuleSettings(failure_threshold=threshold, probe_interval=interval)
    result = unit_tests(tmp_path, render_rules(settings), render_test_file(settings, "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_rule_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: the threshold moved by one must be caught."""
    good = render_rules(RuleSettings(failure_threshold=2))
    broken = good.replace(">= bool 2", ">= bool 3").replace("<  bool 2", "<  bool 3")
    assert broken != good
    tests = render_test_file(RuleSettings(), "rules.yml")
    result = unit_tests(tmp_path, broken, tests, check=False)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_the_unwatched_objects_alert_fails_its_case_when_it_counts_dry_runs(
    tmp_path: Path,
) -> None:
    """Without its dry-run exclusion the alert fires for a dry run's count (a replica that
    watches fewer kinds than the acting one beside it), and its case says so."""
    good = render_rules(RuleSettings())
    exclusion = '  unless on (job, instance) fleetwatch_reactor_cd_info{dry_run="true"}\n'
    start = good.index("alert: FleetwatchCDUnwatchedObjectsPaused")
    head, rule = good[:start], good[start:]
    broken = head + rule.replace(exclusion.strip(), "", 1)
    assert exclusion.strip() in rule and broken != good
    tests = render_test_file(RuleSettings(), "rules.yml")
    result = unit_tests(tmp_path, broken, tests, check=False)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "alertname: FleetwatchCDUnwatchedObjectsPaused" in out, out
    assert "3 Application object(s) paused by fleetwatch" in out, out  # the dry run's count


def test_annotations_use_known_templates() -> None:
    """Only the template actions the unit-test builder knows how to expect."""
    allowed = {
        "{{ $labels.cluster }}",
        "{{ $labels.instance }}",
        "{{ $labels.job }}",
        "{{ $labels.kind }}",
        "{{ $value }}",
        "{{ $value | humanizePercentage }}",
    }
    for group in rules.groups(RuleSettings()):
        for rule in group.rules:
            for key, text in rule.body.get("annotations", {}).items():
                if key in REASON_ANNOTATIONS:  # queries: the builder takes their values as given
                    assert text == REASON_ANNOTATIONS[key]
                    continue
                assert set(re.findall(r"\{\{.*?\}\}", text)) <= allowed, text


def test_threshold_appears_only_in_the_status_rule() -> None:
    """N is applied once (each replica's status code); every alert reads the codes."""
    settings = RuleSettings(failure_threshold=7)
    exprs = {
        r.body.get("record") or r.body["alert"]: r.body["expr"]
        for g in rules.groups(settings)
        for r in g.rules
    }
    using = {name for name, expr in exprs.items() if re.search(r"\b7\b", expr)}
    assert using == {"cluster_instance:fleetwatch_status:code"}


def test_status_alerts_have_the_contract_labels() -> None:
    bodies = {
        r.body["alert"]: r.body
        for g in rules.groups(RuleSettings())
        for r in g.rules
        if "alert" in r.body
    }
    assert bodies["FleetClusterOnline"]["labels"] == {"severity": "none"}
    assert bodies["FleetClusterOffline"]["labels"] == {"severity": "critical"}
    assert bodies["FleetClusterProbeFailing"]["labels"] == {"severity": "warning"}
    assert {"FleetwatchExporterDown", "FleetwatchExporterAbsent", "FleetProbeStorm"} <= set(bodies)
    # Status signals need a fresh startsAt per episode: never held, never delayed.
    for name in ("FleetClusterOnline", "FleetClusterOffline"):
        assert "for" not in bodies[name] and "keep_firing_for" not in bodies[name]


# --- the control-plane seam -----------------------------------------------------------------


def test_control_plane_groups_are_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = [{"name": "fleetwatch-etcd", "rules": [{"alert": "X", "expr": "vector(1)\n"}]}]
    monkeypatch.setattr(rules_controlplane, "rule_groups", lambda: extra)
    loaded = yaml.safe_load(render_rules(RuleSettings(runbook_base_url="https://wiki.example/rb")))
    # Appended as they are, each alert given its runbook link like ours.
    x = {**extra[0]["rules"][0], "annotations": {"runbook_url": "https://wiki.example/rb#x"}}
    assert loaded["groups"][-1] == {**extra[0], "rules": [x]}
    assert [g["name"] for g in loaded["groups"]][:2] == ["fleetwatch-status", "fleetwatch-exporter"]


# --- the command line -----------------------------------------------------------------------


@pytest.mark.live
def test_threshold_comes_from_the_environment() -> None:
    result = _fleetwatch_rules(CLUSTER_HEALTH_FAILURE_THRESHOLD="4")
    assert result.returncode == 0, result.stderr
    assert result.stdout == render_rules(RuleSettings(failure_threshold=4))


@pytest.mark.live
def test_flags_win_over_the_environment() -> None:
    result = _fleetwatch_rules(
        "--failure.threshold",
        "3",
        "--probe.interval",
        "30",
        CLUSTER_HEALTH_FAILURE_THRESHOLD="4",
        CLUSTER_HEALTH_INTERVAL="60",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == render_rules(RuleSettings(failure_threshold=3, probe_interval=30))
    assert "keep_firing_for: 1m\n" in result.stdout


@pytest.mark.live
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--failure.threshold", "0"], {}, "failure threshold must be at least 1, got 0"),
        (
            [],
            {"CLUSTER_HEALTH_FAILURE_THRESHOLD": "two"},
            "CLUSTER_HEALTH_FAILURE_THRESHOLD='two' is not a valid int",
        ),
        (
            [],
            {"CLUSTER_HEALTH_INTERVAL": "-5"},
            "probe interval must be a positive number of seconds, got -5.0",
        ),
        (["--storm.fraction", "1.5"], {}, "storm fraction must be in (0, 1], got 1.5"),
        (["--storm.fraction", "0"], {}, "storm fraction must be in (0, 1], got 0.0"),
        (["--storm.min-clusters", "1"], {}, "storm minimum fleet size must be at least 2, got 1"),
        (["--exporter.job", 'a"b'], {}, "exporter job must be a plain job name"),
        (
            ["--runbook.base-url", "ftp://wiki.example/rb"],
            {},
            "runbook base URL must be an absolute http(s) URL or a path, got 'ftp://wiki.example/rb'",
        ),
        (
            ["--runbook.base-url", "https://wiki.example/rb#top"],
            {},
            "runbook base URL must have no fragment, template braces or spaces",
        ),
        (
            ["--runbook.base-url", "https://wiki.example/{{ $labels.cluster }}"],
            {},
            "runbook base URL must have no fragment, template braces or spaces",
        ),
    ],
)
def test_bad_settings_are_refused_clearly(
    args: list[str], env: dict[str, str], message: str
) -> None:
    result = _fleetwatch_rules(*args, **env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr


@pytest.mark.live
def test_runbook_base_url_links_every_alert_and_is_in_the_header() -> None:
    result = _fleetwatch_rules("--runbook.base-url", "https://wiki.example/fleet/runbooks")
    assert result.returncode == 0, result.stderr
    assert "--runbook.base-url https://wiki.example/fleet/runbooks`" in result.stdout
    alerts = [
        r for g in yaml.safe_load(result.stdout)["groups"] for r in g["rules"] if "alert" in r
    ]
    assert len(alerts) >= 30
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]
        assert url == f"https://wiki.example/fleet/runbooks#{rule['alert'].lower()}"


def test_bad_settings_raise_rules_error() -> None:
    with pytest.raises(RulesError, match="at least 1"):
        RuleSettings(failure_threshold=-1)


def test_durations_are_prometheus_durations() -> None:
    assert rules.prom_duration(600) == "10m"
    assert rules.prom_duration(2) == "2s"
    assert rules.prom_duration(90.5) == "1m30s500ms"
    assert rules.prom_duration(7200) == "2h"


# --- PrometheusRule -------------------------------------------------------------------------


@pytest.mark.live
def test_prometheusrule_format(tmp_path: Path) -> None:
    result = _fleetwatch_rules("--format", "prometheusrule", "--failure.threshold", "3")
    assert result.returncode == 0, result.stderr
    obj: dict[str, Any] = yaml.safe_load(result.stdout)
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    assert obj["kind"] == "PrometheusRule"
    assert obj["metadata"]["name"] == "fleetwatch"
    plain = yaml.safe_load(render_rules(RuleSettings(failure_threshold=3)))
    assert obj["spec"] == plain
    # The spec is a valid rules file for the same Prometheus.
    (tmp_path / "spec.yml").write_text(yaml.safe_dump(obj["spec"]))
    check = promtool("check", "rules", str(tmp_path / "spec.yml"))
    assert check.returncode == 0, check.stdout + check.stderr


# --- Alertmanager ---------------------------------------------------------------------------


def test_amtool_check_config_passes() -> None:
    result = amtool_check(ALERTMANAGER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        (["alertname=FleetClusterOnline", "severity=none", "cluster=a"], "fleetwatch-reactor"),
        (
            ["alertname=FleetClusterOffline", "severity=critical", "cluster=a"],
            "fleetwatch-reactor,oncall-pager",
        ),
        (["alertname=FleetProbeStorm", "severity=critical"], "oncall-pager"),
        (["alertname=FleetwatchExporterDown", "severity=critical"], "oncall-pager"),
        (["alertname=FleetClusterProbeFailing", "severity=warning", "cluster=a"], "team-chat"),
    ],
)
def test_alertmanager_routes(labels: list[str], receivers: str) -> None:
    """Online goes to the reactor only; Offline to the reactor and people (amtool decides)."""
    result = run_tool(
        "amtool",
        "config",
        "routes",
        "test",
        f"--config.file={ALERTMANAGER}",
        f"--verify.receivers={receivers}",
        *labels,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_reactor_receiver_and_storm_inhibition() -> None:
    config = yaml.safe_load(ALERTMANAGER.read_text())
    reactor = next(r for r in config["receivers"] if r["name"] == "fleetwatch-reactor")
    webhook = reactor["webhook_configs"][0]
    assert webhook["url"] == "http://127.0.0.1:9714/alerts"
    assert webhook["send_resolved"] is True
    assert "credentials_file" in webhook["http_config"]["authorization"]
    status_routes = [r for r in config["route"]["routes"] if r["receiver"] == "fleetwatch-reactor"]
    assert len(status_routes) == 2
    for route in status_routes:
        assert route["group_by"] == ["alertname", "cluster"]
        assert route["group_wait"] == "0s"
    storm = config["inhibit_rules"][0]
    assert storm["source_matchers"] == ['alertname = "FleetProbeStorm"']
    assert "FleetClusterOffline" in storm["target_matchers"][0]
    # The rules file defines every alert name the route and inhibit rules name.
    names = {
        r.body["alert"] for g in rules.groups(RuleSettings()) for r in g.rules if "alert" in r.body
    }
    mentioned = set(re.findall(r"Fleet\w+", ALERTMANAGER.read_text()))
    assert mentioned <= names


@pytest.mark.live
def test_the_old_probe_interval_spelling_still_works() -> None:
    old = _fleetwatch_rules("--probe-interval", "30")
    new = _fleetwatch_rules("--probe.interval", "30")
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    assert old.stdout == new.stdout
    help_text = _fleetwatch_rules("--help").stdout
    assert "--probe.interval" in help_text and "--probe-interval" not in help_text


@pytest.mark.live
def test_prometheusrule_namespace_and_labels() -> None:
    result = _fleetwatch_rules(
        "--format",
        "prometheusrule",
        "--namespace",
        "fw",
        "--label",
        "release=kps",
        "--label",
        "team=platform",
    )
    assert result.returncode == 0, result.stderr
    obj = yaml.safe_load(result.stdout)
    assert obj["metadata"]["namespace"] == "fw"
    assert obj["metadata"]["labels"] == {
        "app.kubernetes.io/name": "fleetwatch",
        "release": "kps",
        "team": "platform",
    }
    rules = [rule for group in obj["spec"]["groups"] for rule in group["rules"]]
    alerts = [rule for rule in rules if "alert" in rule]
    assert alerts and all(rule["labels"]["namespace"] == "fw" for rule in alerts)
    assert all("namespace" not in rule.get("labels", {}) for rule in rules if "record" in rule)
    # The status alerts keep their own labels beside the namespace.
    offline = next(rule for rule in alerts if rule["alert"] == "FleetClusterOffline")
    assert offline["labels"]["severity"] == "critical"


@pytest.mark.live
@pytest.mark.parametrize(
    "args",
    [("--namespace", "fw"), ("--format", "prometheusrule", "--label", "no-equals-sign")],
)
def test_prometheusrule_options_are_checked(args: tuple[str, ...]) -> None:
    result = _fleetwatch_rules(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "fleetwatch rules:" in result.stderr
