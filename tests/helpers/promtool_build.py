"""What every promtool unit-test generator builds with: the exporter's series of a cluster,
the alerts and recorded statuses expected at a minute, and the test file's header and YAML.

The generators (``rules_promtool``, ``rules_promtool_reactor``, ``credentials_promtool``,
``sharding_promtool``, ``controlplane_promtool``) each write one shipped file under
``alerts/tests/``; what they share is written here once, so that a case reads as its
timeline and its expectations. Timeline: one sample per minute (``interval: 1m``);
position i of a series is minute i.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from alerts.reason import REASON_ANNOTATIONS
from alerts.rules import RuleSettings, groups

#: The rules file as the shipped tests name it, from ``alerts/tests/``.
SHIPPED_RULE_FILE = "../fleetwatch.rules.yml"


def _alert_bodies(settings: RuleSettings) -> dict[str, dict[str, Any]]:
    return {
        rule.body["alert"]: rule.body
        for group in groups(settings)
        for rule in group.rules
        if "alert" in rule.body
    }


def expected(
    settings: RuleSettings,
    alert: str,
    labels: dict[str, str],
    value: float | None = None,
    reasons: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One expected alert: its labels and its annotations as Prometheus renders them.

    The annotation templates use only ``$labels.<name>``, ``$value`` and
    ``$value | humanizePercentage``; ``test_annotations_use_known_templates`` holds them to it.
    The reason annotations (``alerts.reason``) are ``reasons``, empty by default
    (no replica's last probe failed).
    """
    body = _alert_bodies(settings)[alert]
    rendered: dict[str, str] = {}
    for key, text in body.get("annotations", {}).items():
        if key in REASON_ANNOTATIONS:
            rendered[key] = (reasons or {}).get(key, "")
            continue
        for name, label_value in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label_value)
        if value is not None:
            text = text.replace("{{ $value | humanizePercentage }}", f"{value * 100:.4g}%")
            text = text.replace("{{ $value }}", f"{value:g}")
        rendered[key] = text
    return {
        "exp_labels": {**labels, **body.get("labels", {})},
        "exp_annotations": rendered,
    }


def timeline(items: Sequence[float | str]) -> str:
    """A series' ``values``: one item a minute (a number, ``stale`` or ``_``)."""
    return " ".join(str(v) for v in items)


def cluster_series(
    cluster: str,
    failures: Sequence[int | str],
    last_success: Sequence[int | str] | None = None,
    probeable: int = 1,
    instance: str = "127.0.0.1:9713",
    credential: Sequence[int | str] | None = None,
) -> list[dict[str, str]]:
    """The exporter's gauges for one cluster over len(failures) minutes.

    ``credential``: of the failures, the refusals (default none).

    A ``"stale"`` in ``failures`` is a staleness marker in every gauge: the replica
    stopped being scraped there (killed); values after it are a restarted replica.
    """
    n = len(failures)
    if last_success is None:
        last_success = [100] * n
    last_success = [
        "stale" if f == "stale" else v for f, v in zip(failures, last_success, strict=True)
    ]
    labels = f'cluster="{cluster}", job="fleetwatch-exporter", instance="{instance}"'

    def constant(value: int) -> str:
        return timeline(["stale" if f == "stale" else value for f in failures])

    return [
        {
            "series": (
                f"fleetwatch_cluster_info{{{labels}, "
                f'endpoint="https://{cluster}:6443", source="/kube/{cluster}.yaml"}}'
            ),
            "values": constant(1),
        },
        {"series": f"fleetwatch_cluster_probeable{{{labels}}}", "values": constant(probeable)},
        {
            "series": f"fleetwatch_cluster_probe_consecutive_failures{{{labels}}}",
            "values": timeline(list(failures)),
        },
        {
            "series": f"fleetwatch_cluster_probe_last_success_timestamp_seconds{{{labels}}}",
            "values": timeline(list(last_success)),
        },
        {
            "series": f"fleetwatch_cluster_probe_consecutive_credential_failures{{{labels}}}",
            "values": timeline(
                list(credential)
                if credential is not None
                else ["stale" if f == "stale" else 0 for f in failures]
            ),
        },
    ]


def status_codes(eval_minute: int, values: dict[str, int]) -> dict[str, Any]:
    """``cluster:fleetwatch_status:code`` of each cluster at ``eval_minute``."""
    return {
        "expr": "cluster:fleetwatch_status:code",
        "eval_time": f"{eval_minute}m",
        "exp_samples": [
            {"labels": f'cluster:fleetwatch_status:code{{cluster="{c}"}}', "value": v}
            for c, v in sorted(values.items())
        ],
    }


def alerts(
    settings: RuleSettings,
    minute: int,
    alert: str,
    firing: list[tuple[dict[str, str], float | None]],
) -> dict[str, Any]:
    """The alerts named ``alert`` expected at ``minute``: (labels, $value) of each firing."""
    return {
        "eval_time": f"{minute}m",
        "alertname": alert,
        "exp_alerts": [expected(settings, alert, labels, value) for labels, value in firing],
    }


def case(
    name: str,
    input_series: list[dict[str, str]],
    alert_rule_test: list[dict[str, Any]],
    promql_expr_test: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One promtool test: ``input_series`` sampled each minute, the alerts expected at given
    minutes and, if any, the recorded values (each argument is promtool's field of its name)."""
    test: dict[str, Any] = {
        "name": name,
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": alert_rule_test,
    }
    if promql_expr_test is not None:
        test["promql_expr_test"] = promql_expr_test
    return test


def header(what: str, module: str, shipped: str, prometheus: str | None = "2.42") -> str:
    """The comment on top of a shipped file: what it tests, who writes it, how to run it."""
    tested_by = "`promtool test rules`" + (f" (Prometheus {prometheus})" if prometheus else "")
    return (
        f"# Unit tests of {what} for {tested_by}.\n"
        f"# Generated by tests/helpers/{module}.py; regenerate, do not edit by hand:\n"
        f"#   .venv/bin/python -m tests.helpers.{module} > alerts/tests/{shipped}\n"
        f"# Run: promtool test rules alerts/tests/{shipped}\n"
    )


def file_body(rule_file: str, tests: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole promtool test file: ``tests`` against ``rule_file``, evaluated each minute."""
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


def document(
    body: dict[str, Any], header: str, width: int = 200, allow_unicode: bool = False
) -> str:
    """The file's text: ``header``, then ``body`` in YAML, keys in the order written."""
    return header + yaml.safe_dump(body, sort_keys=False, width=width, allow_unicode=allow_unicode)


@dataclass(frozen=True)
class Generator:
    """One generator of a shipped file: what its header says it tests, its module, the file
    it writes under ``alerts/tests/``, and ``build``, the file's body for the settings the
    rules are rendered with and the rules file's name. The YAML options are the file's
    own (the control-plane file has always been written narrower, UTF-8 as is)."""

    what: str
    module: str
    shipped: str
    build: Callable[[RuleSettings, str], dict[str, Any]]
    prometheus: str | None = "2.42"
    width: int = 200
    allow_unicode: bool = False

    def render(self, settings: RuleSettings, rule_file: str = SHIPPED_RULE_FILE) -> str:
        top = header(self.what, self.module, self.shipped, self.prometheus)
        body = self.build(settings, rule_file)
        return document(body, top, width=self.width, allow_unicode=self.allow_unicode)

    def main(self) -> None:
        """What ``python -m tests.helpers.<module>`` prints: the shipped file."""
        sys.stdout.write(self.render(RuleSettings()))
