"""The configurations `fleetwatch demo` and the e2e tests generate pass the real checkers."""

from __future__ import annotations

from pathlib import Path

from alerts.rules import RuleSettings
from fleetwatch.cli import wiring
from tests.helpers.alerting_tools import amtool_check, promtool


def test_generated_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    rules = wiring.render_rules_file(tmp_path / "rules.yml", RuleSettings(probe_interval=1.5))
    config = wiring.prometheus_config(
        exporter="127.0.0.1:9713",
        alertmanager="127.0.0.1:9093",
        rule_file=rules,
        interval=1.5,
        reactor="127.0.0.1:9714",
    )
    assert config["global"] == {"scrape_interval": "1s500ms", "evaluation_interval": "1s500ms"}
    assert [j["job_name"] for j in config["scrape_configs"]] == [
        "fleetwatch-exporter",
        "fleetwatch-reactor",
    ]
    path = wiring.write_yaml(tmp_path / "prometheus.yml", config)
    result = promtool("check", "config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_alertmanager_config_keeps_the_shipped_route(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    config = wiring.alertmanager_config(
        reactor_url="http://127.0.0.1:1234/",
        token_file=token,
        group_interval="1s",
        repeat_interval="1m",
    )
    shipped = wiring.load_shipped_alertmanager()
    assert config["inhibit_rules"] == shipped["inhibit_rules"]
    hook = config["receivers"][0]["webhook_configs"][0]
    assert hook["url"] == "http://127.0.0.1:1234/alerts"
    assert hook["http_config"]["authorization"]["credentials_file"] == str(token)
    status = [r for r in config["route"]["routes"] if r["receiver"] == "fleetwatch-reactor"]
    assert [(r["group_interval"], r["repeat_interval"]) for r in status] == [("1s", "1m")] * 2
    # Only a copy changed: the shipped example is untouched.
    assert wiring.load_shipped_alertmanager() == shipped
    path = wiring.write_yaml(tmp_path / "alertmanager.yml", config)
    result = amtool_check(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "s3cret" not in path.read_text()
