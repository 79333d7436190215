"""`fleetwatch rules`: render the Prometheus rules that turn the exporter's gauges into statuses.

``alerts/fleetwatch.rules.yml`` is this command's output for the defaults (a test keeps
them equal). The rules are built by role: the status rules (``alerts.status``),
the exporter's own alerts (``alerts.exporter``), the alert on discovery from
the management cluster's API (``alerts.discovery``), the alert on shards that do
not split the fleet between them (``alerts.sharding``), the reactor's own alerts
(``alerts.reactor``), the alert on the CD integration's pending actions
(``alerts.cd``), the etcd and control-plane
groups (``alerts.controlplane``), on the settings and the rules as data of
``alerts.model``, written as YAML by ``alerts.render``. This module is
the command line, and what the rest of fleetwatch imports of the rules.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from alerts.model import Group, Rule, RulesError, RuleSettings, prom_duration
from alerts.render import (
    controlplane_groups,
    groups,
    render_groups_text,
    render_prometheusrule,
    render_rules,
)
from fleetwatch.common.contract import FAILURE_THRESHOLD
from fleetwatch.common.flags import add_old_spelling

__all__ = [
    "ENV_INTERVAL",
    "ENV_THRESHOLD",
    "Group",
    "Rule",
    "RuleSettings",
    "RulesError",
    "add_parsers",
    "controlplane_groups",
    "groups",
    "prom_duration",
    "render_groups_text",
    "render_prometheusrule",
    "render_rules",
    "run",
    "settings_from_args",
]

ENV_THRESHOLD = "CLUSTER_HEALTH_FAILURE_THRESHOLD"
ENV_INTERVAL = "CLUSTER_HEALTH_INTERVAL"


def _env_number(name: str, default: str, kind: type[int] | type[float]) -> int | float:
    raw = os.environ.get(name, "").strip() or default
    try:
        return kind(raw)
    except ValueError:
        raise RulesError(f"{name}={raw!r} is not a valid {kind.__name__}") from None


def settings_from_args(args: argparse.Namespace) -> RuleSettings:
    threshold = args.failure_threshold
    if threshold is None:
        threshold = _env_number(ENV_THRESHOLD, str(FAILURE_THRESHOLD), int)
    interval = args.probe_interval
    if interval is None:
        interval = _env_number(ENV_INTERVAL, "300", float)
    return RuleSettings(
        failure_threshold=int(threshold),
        probe_interval=float(interval),
        storm_fraction=args.storm_fraction,
        storm_min_clusters=args.storm_min_clusters,
        exporter_job=args.exporter_job,
        reactor_job=args.reactor_job,
        count_rejected=args.count_rejected,
        runbook_base_url=args.runbook_base_url,
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except RulesError as exc:
        print(f"fleetwatch rules: {exc}", file=sys.stderr)
        return 2
    if args.format == "prometheusrule":
        try:
            labels = dict(_label(text) for text in args.label)
        except RulesError as exc:
            print(f"fleetwatch rules: {exc}", file=sys.stderr)
            return 2
        sys.stdout.write(render_prometheusrule(settings, namespace=args.namespace, labels=labels))
    elif args.namespace or args.label:
        print(
            "fleetwatch rules: --namespace and --label need --format prometheusrule",
            file=sys.stderr,
        )
        return 2
    else:
        sys.stdout.write(render_rules(settings))
    return 0


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?", key):
        raise RulesError(f"--label {text!r}: expected KEY=VALUE with a Kubernetes label key")
    return key, value


def add_parsers(subparsers: Any) -> None:
    defaults = RuleSettings()
    p: argparse.ArgumentParser = subparsers.add_parser(
        "rules",
        help="print the Prometheus alerting and recording rules for a failure threshold",
        description=(
            "Print the rules that compute each cluster's status from the exporter's gauges "
            "(alerts/fleetwatch.rules.yml is the output for the defaults)."
        ),
    )
    p.add_argument(
        "--failure.threshold",
        dest="failure_threshold",
        type=int,
        default=None,
        metavar="N",
        help=(
            "consecutive failed probes before OFFLINE "
            f"(default ${ENV_THRESHOLD} or {FAILURE_THRESHOLD})"
        ),
    )
    p.add_argument(
        "--probe.interval",
        dest="probe_interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"exporter probe interval; sets hold times and texts (default ${ENV_INTERVAL} or 300)",
    )
    p.add_argument(
        "--storm.fraction",
        dest="storm_fraction",
        type=float,
        default=defaults.storm_fraction,
        metavar="F",
        help="share of probeable clusters failing at once: a storm (default %(default)s)",
    )
    p.add_argument(
        "--storm.min-clusters",
        dest="storm_min_clusters",
        type=int,
        default=defaults.storm_min_clusters,
        metavar="M",
        help="smallest probeable fleet where a storm is recognised (default %(default)s)",
    )
    p.add_argument(
        "--exporter.job",
        dest="exporter_job",
        default=defaults.exporter_job,
        metavar="JOB",
        help="job label of the exporter's scrape config (default %(default)s)",
    )
    p.add_argument(
        "--reactor.job",
        dest="reactor_job",
        default=defaults.reactor_job,
        metavar="JOB",
        help="job label of the reactor's scrape config (default %(default)s)",
    )
    p.add_argument(
        "--failure.count-rejected",
        dest="count_rejected",
        action=argparse.BooleanOptionalAction,
        default=defaults.count_rejected,
        help="count probes refused for credentials (401, 403, TLS verification) toward "
        "OFFLINE; --no-failure.count-rejected: such a cluster reads UNKNOWN (default: counted)",
    )
    p.add_argument(
        "--runbook.base-url",
        dest="runbook_base_url",
        default=defaults.runbook_base_url,
        metavar="URL",
        help="absolute URL of the runbooks page where your team publishes docs/runbooks.md; "
        "each alert's runbook_url is URL#<alert name in lower case> (default %(default)s)",
    )
    p.add_argument(
        "--format",
        choices=("rules", "prometheusrule"),
        default="rules",
        help="a rules file, or a prometheus-operator PrometheusRule object (default %(default)s)",
    )
    p.add_argument(
        "--namespace",
        default=None,
        help="PrometheusRule only: its namespace, also added as a label to every alert "
        "(the operator's AlertmanagerConfig routes match on it)",
    )
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="PrometheusRule only: a label of the object, to match a ruleSelector (repeatable)",
    )
    # Spellings of older releases, hidden: scripts that use them keep working.
    for old, flag in (
        ("--failure-threshold", "--failure.threshold"),
        ("--probe-interval", "--probe.interval"),
        ("--storm-fraction", "--storm.fraction"),
        ("--storm-min-clusters", "--storm.min-clusters"),
        ("--exporter-job", "--exporter.job"),
    ):
        add_old_spelling(p, old, flag)
    p.set_defaults(func=run)
