"""The rule groups written as YAML: a Prometheus rules file or a PrometheusRule object.

Rules are plain dicts with a "why" comment each, written by hand-sized code, so the
shipped file (``alerts/fleetwatch.rules.yml``, held equal to this output by a test) reads
like a hand-written one and still cannot drift from its generator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from alerts import controlplane as rules_controlplane
from alerts.cd import cd_group
from alerts.discovery import discovery_group
from alerts.exporter import exporter_group
from alerts.model import Group, Rule, RuleSettings, indent, runbook_url
from alerts.reactor import reactor_group
from alerts.sharding import sharding_group
from alerts.status import status_group


def groups(settings: RuleSettings) -> list[Group]:
    """Our groups as they are rendered: every alert with its ``runbook_url``."""
    return [group for group, _ in _groups_and_sources(settings)]


def _source(builder: Callable[..., Group]) -> str:
    """The file that writes a group's rules: where a newcomer changes one."""
    return builder.__module__.replace(".", "/") + ".py"


def _groups_and_sources(settings: RuleSettings) -> list[tuple[Group, str]]:
    built = [
        (status_group(settings), _source(status_group)),
        (exporter_group(settings), _source(exporter_group)),
        (discovery_group(), _source(discovery_group)),
        (sharding_group(settings), _source(sharding_group)),
        (cd_group(), _source(cd_group)),
        (reactor_group(settings), _source(reactor_group)),
    ]
    return [
        (
            Group(
                g.name, g.why, tuple(Rule(r.why, with_runbook(r.body, settings)) for r in g.rules)
            ),
            source,
        )
        for g, source in built
    ]


def controlplane_groups(settings: RuleSettings) -> list[dict[str, Any]]:
    """The etcd and control-plane groups as they are rendered (with ``runbook_url``)."""
    return [
        {**g, "rules": [with_runbook(r, settings) for r in g["rules"]]}
        for g in rules_controlplane.rule_groups()
    ]


def with_runbook(body: dict[str, Any], settings: RuleSettings) -> dict[str, Any]:
    """An alerting rule with ``runbook_url`` last among its annotations.

    The one place the link is made: each alert's definition says what it means, and its
    section of docs/runbooks.md (named after the alert) what to do; a test holds every
    link to an existing section. A recording rule is left as it is.
    """
    if "alert" not in body:
        return body
    annotations = {
        **body.get("annotations", {}),
        "runbook_url": runbook_url(body["alert"], settings),
    }
    return {**body, "annotations": annotations}


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (PromQL), plain dicts in insertion order."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Lists indented under their key, as in the hand-written part of the file.
        super().increase_indent(flow, False)


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # PromQL keeps its line breaks; long prose (annotations) is folded to stay readable.
    style = "|" if "\n" in data else ">" if len(data) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def _comment(text: str, prefix: str) -> str:
    return "".join(f"{prefix}# {line}".rstrip() + "\n" for line in text.splitlines())


def _with_labels(body: dict[str, Any], alert_labels: Mapping[str, str]) -> dict[str, Any]:
    """An alerting rule with ``alert_labels`` added (a recording rule is left as it is)."""
    if "alert" not in body or not alert_labels:
        return body
    return {**body, "labels": {**alert_labels, **body.get("labels", {})}}


def _render_group(group: Group, source: str, alert_labels: Mapping[str, str] = {}) -> str:
    out = [
        _comment(f"{group.why}\n({source})", "  "),
        f"  - name: {group.name}\n",
        "    rules:\n",
    ]
    for rule in group.rules:
        out.append(_comment(rule.why, "      "))
        item = _dump([_with_labels(rule.body, alert_labels)])
        out.append(indent(item, "      "))
    return "".join(out)


def render_groups_text(settings: RuleSettings, alert_labels: Mapping[str, str] = {}) -> str:
    """The ``groups:`` document: ours with comments, then the control-plane groups.

    ``alert_labels`` are added to every alerting rule (``--namespace`` needs it).
    """
    out = ["groups:\n"]
    for group, source in _groups_and_sources(settings):
        out.append(_render_group(group, source, alert_labels))
        out.append("\n")
    extra = [
        {**g, "rules": [_with_labels(r, alert_labels) for r in g["rules"]]}
        for g in controlplane_groups(settings)
    ]
    if extra:
        out.append("  # etcd quorum, control plane and CoreDNS (alerts/controlplane.py).\n")
        out.append(indent(_dump(extra), "  "))
    return "".join(out).rstrip("\n") + "\n"


def _header(settings: RuleSettings) -> str:
    return (
        "# Generated by `fleetwatch rules "
        f"--failure.threshold {settings.failure_threshold} "
        f"--probe.interval {settings.probe_interval:g} "
        f"--storm.fraction {settings.storm_fraction:g} "
        f"--storm.min-clusters {settings.storm_min_clusters} "
        f"--exporter.job {settings.exporter_job} "
        f"--reactor.job {settings.reactor_job} "
        f"--{'' if settings.count_rejected else 'no-'}failure.count-rejected "
        f"--runbook.base-url {settings.runbook_base_url}`.\n"
        "# Do not edit by hand: each group names the module of alerts/ that writes its rules\n"
        "# (the threshold's rules: alerts/status.py); change them there, or render other values.\n"
    )


def render_rules(settings: RuleSettings) -> str:
    """A Prometheus rules file (``rule_files:``)."""
    return _header(settings) + render_groups_text(settings)


def render_prometheusrule(
    settings: RuleSettings,
    name: str = "fleetwatch",
    namespace: str | None = None,
    labels: Mapping[str, str] = {},
) -> str:
    """The same groups as a prometheus-operator ``PrometheusRule`` object.

    ``labels`` go on the object, so it matches the Prometheus resource's ``ruleSelector``
    (kube-prometheus-stack selects ``release: <its release name>``). With ``namespace``,
    the object lives there and every alert carries ``namespace=<it>``: the operator adds
    a ``namespace`` matcher to every AlertmanagerConfig route, so without that label the
    route to the reactor would match nothing.
    """
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {"app.kubernetes.io/name": "fleetwatch", **labels}
    head = _dump(
        {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": metadata}
    )
    alert_labels = {"namespace": namespace} if namespace else {}
    body = render_groups_text(settings, alert_labels)
    return _header(settings) + head + "spec:\n" + indent(body, "  ")
