"""`fleetwatch rules`: render the Prometheus rules that turn the exporter's gauges into statuses.

The failure threshold N lives only here (see the statuses in the README): the exporter
publishes raw counts, these rules decide ONLINE/OFFLINE, and the reactor learns the result
from the Alertmanager notifications of ``FleetClusterOnline`` and ``FleetClusterOffline``.
``alerts/fleetwatch.rules.yml`` is this module's output for the defaults (a test keeps them
equal), followed by the etcd/control-plane groups of ``fleetwatch.rules_controlplane``.

Rules are built as plain dicts with a "why" comment each and written as YAML by hand-sized
code, so the shipped file reads like a hand-written one and still cannot drift from the
renderer. That makes this module longer than most: the bulk of it is the rules' comments
and alert texts, which belong next to the expressions they explain.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from common.contract import (
    CLUSTERS_COUNT_RECORD,
    FAILING_RATIO_RECORD,
    PROBE_FAILING_ALERT,
    REPLICA_STATUS_RECORD,
    STATUS_CODE_RECORD,
    STATUS_CODES,
    STORM_ALERT,
    STORM_FRACTION,
    STORM_MIN_CLUSTERS,
    Status,
    StatusAlert,
)
from common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_SUCCESS,
    CLUSTER_PROBEABLE,
    EXPORTER_LAST_CYCLE,
    EXPORTER_PROBE_INTERVAL,
)
from fleetwatch import rules_controlplane

ENV_THRESHOLD = "CLUSTER_HEALTH_FAILURE_THRESHOLD"
ENV_INTERVAL = "CLUSTER_HEALTH_INTERVAL"


class RulesError(ValueError):
    """A setting that cannot make sensible rules (the message says which and why)."""


@dataclass(frozen=True)
class RuleSettings:
    """What the rendered rules depend on; every field has a command-line flag."""

    failure_threshold: int = 2
    """N: consecutive failed probes before a cluster is OFFLINE (the guide's grace period)."""

    probe_interval: float = 300.0
    """Seconds between probe cycles (CLUSTER_HEALTH_INTERVAL). Only the hold times of the
    storm guard and of the warning scale with it; detection itself needs no ``for:``."""

    storm_fraction: float = STORM_FRACTION
    """Share of the probeable clusters failing at once that means "the watcher is broken"."""

    storm_min_clusters: int = STORM_MIN_CLUSTERS
    """Smallest probeable fleet where a storm is recognised: 1 failing of 2 is no storm."""

    exporter_job: str = "fleetwatch-exporter"
    """Prometheus ``job`` label of the exporter's scrape config (for the exporter alerts)."""

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise RulesError(f"failure threshold must be at least 1, got {self.failure_threshold}")
        if not (math.isfinite(self.probe_interval) and self.probe_interval > 0):
            raise RulesError(
                f"probe interval must be a positive number of seconds, got {self.probe_interval}"
            )
        if not (0 < self.storm_fraction <= 1):
            raise RulesError(f"storm fraction must be in (0, 1], got {self.storm_fraction}")
        if self.storm_min_clusters < 2:
            raise RulesError(
                f"storm minimum fleet size must be at least 2, got {self.storm_min_clusters}"
            )
        if not self.exporter_job or '"' in self.exporter_job or "\\" in self.exporter_job:
            raise RulesError(f"exporter job must be a plain job name, got {self.exporter_job!r}")

    @property
    def hold(self) -> str:
        """Hold time of the storm guard and the warning: two probe cycles."""
        return prom_duration(2 * self.probe_interval)

    @property
    def detection(self) -> str:
        """Human words for the grace period, used in descriptions."""
        about = prom_duration(self.failure_threshold * self.probe_interval)
        return f"{self.failure_threshold} probes, about {about}"


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration (``600`` -> ``10m``), exact to the millisecond."""
    millis = max(1, round(seconds * 1000))
    parts: list[str] = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


@dataclass(frozen=True)
class Rule:
    """One rule and the comment written above it (the reason for its shape)."""

    why: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Group:
    name: str
    why: str
    rules: tuple[Rule, ...]


# --- the rules -----------------------------------------------------------------------------

# Several exporters may watch one cluster: two replicas of a shard (two vantage points), or
# an HA pair of unsharded exporters. Each replica's series carry its `instance`; every status
# is computed per replica first and then combined by cluster (dropping `job` and `instance`),
# so each alert is one per cluster whatever scraped it. Counts of two replicas are never mixed:
# a replica that has not probed yet (0 failures, never succeeded) would otherwise lend its 0
# to the other's old success and make an OFFLINE cluster ONLINE for a cycle.
_PROBEABLE = f"max by (cluster) ({CLUSTER_PROBEABLE})"
_FAILURES = f"min by (cluster) ({CLUSTER_PROBE_CONSECUTIVE_FAILURES})"
_INFO = f"max by (cluster) ({CLUSTER_INFO})"

#: How long the rules remember which clusters a now-down exporter published: its clusters
#: read UNKNOWN (rather than vanish) and the exporter alerts know whether another replica
#: still covers them. Longer costs a longer scan of fleetwatch_cluster_info per evaluation.
MEMORY = "1h"


def _remembered(s: RuleSettings) -> str:
    """The clusters each exporter published within MEMORY, labelled with job and instance."""
    return f'last_over_time({CLUSTER_INFO}{{job="{s.exporter_job}"}}[{MEMORY}])'


def _uncovered(s: RuleSettings) -> str:
    """Remembered clusters that no exporter publishes now: nobody probes them."""
    return f"{_remembered(s)} unless on (cluster) {CLUSTER_INFO}"


def _stalled(s: RuleSettings) -> str:
    """Exporters scraped but stalled: no probe cycle ended for over 3 probe intervals.

    Their series are frozen at old values. FleetwatchExporterStalled pages on this, and
    the per-replica status ignores such a replica at once: a frozen "ONLINE" would
    otherwise hold a cluster ONLINE that the live replica sees failing.
    """
    job = f'job="{s.exporter_job}"'
    return (
        "time() - (\n"
        f"    {EXPORTER_LAST_CYCLE}{{{job}}} > 0\n"
        f"  or on (job, instance) process_start_time_seconds{{{job}}}\n"
        ")\n"
        "> on (job, instance)\n"
        f"  3 * {EXPORTER_PROBE_INTERVAL}{{{job}}}\n"
    )


def status_group(s: RuleSettings) -> Group:
    n = s.failure_threshold
    online, offline = STATUS_CODES[Status.ONLINE], STATUS_CODES[Status.OFFLINE]
    failures = CLUSTER_PROBE_CONSECUTIVE_FAILURES
    replica_code = (
        f"{CLUSTER_PROBEABLE}\n"
        "* (\n"
        f"      2 * ({failures} >= bool {n})\n"
        f"    +     ({failures} <  bool {n})\n"
        f"        * ({CLUSTER_PROBE_LAST_SUCCESS} > bool 0)\n"
        "  )\n"
        "unless on (job, instance) (\n" + _indent(_stalled(s), "  ") + ")\n"
    )
    down = f'up{{job="{s.exporter_job}"}} == 0'
    code = (
        f"max by (cluster) ({REPLICA_STATUS_RECORD} == {online})\n"
        f"or max by (cluster) ({REPLICA_STATUS_RECORD})\n"
        f"or on (cluster) 0 * {_INFO}\n"
        f"or on (cluster) 0 * max by (cluster) (\n"
        f"    {_remembered(s)}\n"
        f"  and on (job, instance) {down}\n"
        ")\n"
    )
    failing_ratio = (
        "(\n"
        "    count(\n"
        f"        {_FAILURES} >= 1\n"
        f"      and on (cluster) {_PROBEABLE} == 1\n"
        "    )\n"
        "  or vector(0)\n"
        ")\n"
        f"/ count({_PROBEABLE} == 1)\n"
    )
    pct = (
        f"{s.storm_fraction:.0%}"
        if (s.storm_fraction * 100).is_integer()
        else f"{s.storm_fraction:.2%}"
    )
    cluster = "{{ $labels.cluster }}"
    return Group(
        name="fleetwatch-status",
        why=(
            "Cluster statuses ONLINE, OFFLINE, UNKNOWN. Rules of a group run in order at one\n"
            "timestamp, so each alert below sees the status recorded first, and the storm\n"
            "guard is sent before the OFFLINE alerts it must inhibit."
        ),
        rules=(
            Rule(
                why=(
                    f"0 UNKNOWN, 1 ONLINE, 2 OFFLINE as one exporter replica sees the cluster.\n"
                    f"The threshold (N = {n}) is applied here only. OFFLINE: probeable and at\n"
                    "least N consecutive failed probes (a cluster that never answered is OFFLINE\n"
                    "too; the reactor degrades nothing for it). ONLINE: probeable, succeeded\n"
                    "once, fewer than N failures since. UNKNOWN: everything else, including a\n"
                    "replica that has not probed yet and unprobeable clusters (never OFFLINE).\n"
                    "A stalled replica (no cycle ended for 3 intervals) has no opinion at all."
                ),
                body={"record": REPLICA_STATUS_RECORD, "expr": replica_code},
            ),
            Rule(
                why=(
                    "The cluster's status, one series per cluster: ONLINE when any replica sees\n"
                    "it ONLINE (it answers someone, so a replica cut off from it changes\n"
                    "nothing), else OFFLINE when a replica sees it OFFLINE (every replica with\n"
                    "an opinion agrees), else UNKNOWN. Also UNKNOWN: a cluster with only its\n"
                    f"info gauge, and for {MEMORY} a cluster whose exporters are all down (its\n"
                    "shard unwatched: not OFFLINE, no cascade, still counted in the fleet)."
                ),
                body={"record": STATUS_CODE_RECORD, "expr": code},
            ),
            *(
                Rule(
                    why=f"Clusters per status, 0 included, for dashboards ({status.value}).",
                    body={
                        "record": CLUSTERS_COUNT_RECORD,
                        "expr": f"sum({STATUS_CODE_RECORD} == bool {value})\n",
                        "labels": {"status": status.value},
                    },
                )
                for status, value in STATUS_CODES.items()
            ),
            Rule(
                why=(
                    "Share of probeable clusters whose last probe failed (OFFLINE ones included):\n"
                    "the storm guard reacts to the first failed cycle, N - 1 probes before any\n"
                    "cluster can be OFFLINE."
                ),
                body={"record": FAILING_RATIO_RECORD, "expr": failing_ratio},
            ),
            Rule(
                why=(
                    "Storm guard: most of the fleet failing at once points at the watcher (its\n"
                    "network, its credentials). Alertmanager's inhibit rule then holds back every\n"
                    "FleetClusterOffline, so no cascade runs and people get this one page.\n"
                    "No `for:`: it must fire before the OFFLINE alerts it inhibits (with N = 1 it\n"
                    "fires in the same evaluation and relies on coming first in this group).\n"
                    f"keep_firing_for ({s.hold}, two probe cycles): clusters that come back a\n"
                    "cycle apart must not let the stragglers through as a burst of cascades; a\n"
                    "cluster still down after the hold is a real outage and does cascade then."
                ),
                body={
                    "alert": STORM_ALERT,
                    "expr": (
                        f"{FAILING_RATIO_RECORD} >= {s.storm_fraction:g}\n"
                        f"and count({_PROBEABLE} == 1) >= {s.storm_min_clusters}\n"
                    ),
                    "keep_firing_for": s.hold,
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": (
                            "{{ $value | humanizePercentage }} of the probeable clusters are "
                            "failing their probes at once"
                        ),
                        "description": (
                            f"At least {pct} of the fleet (and at least {s.storm_min_clusters} "
                            "clusters) failed their last probe. That many clusters rarely fail "
                            "together: suspect the watcher first. Check the exporter's log and "
                            f"{CLUSTER_PROBE_FAILURES} by reason (timeouts: its "
                            "network, DNS or proxy; unauthorized or certificate reasons: expired "
                            "credentials or a rotated CA). While this fires, FleetClusterOffline "
                            "notifications are inhibited, so the reactor degrades no apps."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Status signal for the reactor (cascade: apps DEGRADED, deployments 409)\n"
                    "and a page for people. No `for:`: the exporter already counts consecutive\n"
                    "failures, so N is the grace period and a `for:` would only add latency.\n"
                    "No keep_firing_for: every outage needs its own startsAt, and one success is\n"
                    "by definition enough to leave OFFLINE."
                ),
                body={
                    "alert": StatusAlert.OFFLINE.value,
                    "expr": f"{STATUS_CODE_RECORD} == {offline}\n",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": f"Cluster {cluster} is OFFLINE: {n} consecutive probes failed",
                        "description": (
                            "fleetwatch could not get a ready answer from the API server of "
                            f"{cluster} for {s.detection}. Its deployed apps are marked DEGRADED "
                            "and deployments to it are refused (409) until it answers again. "
                            f"Check: the reason in {CLUSTER_PROBE_FAILURES}"
                            f'{{cluster="{cluster}"}}; that the endpoint in '
                            f"{CLUSTER_INFO} is reachable from the exporter's host; that "
                            "the kubeconfig file in its `source` label is readable by the "
                            "exporter and its credentials are still valid. If short blips "
                            "degrade apps, raise CLUSTER_HEALTH_FAILURE_THRESHOLD and re-render "
                            "the rules (fleetwatch rules --failure-threshold). For planned "
                            "maintenance, silence this alert for the cluster to avoid the cascade."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Status signal for the reactor only (severity none, never paged): restores\n"
                    "the apps an outage degraded. No `for:` (recovery is one success) and no\n"
                    "keep_firing_for: an ONLINE alert held through a short outage would keep its\n"
                    "old startsAt and the reactor would never see the cluster come back.\n"
                    "Alertmanager's repeats of this alert are the reactor's anti-entropy."
                ),
                body={
                    "alert": StatusAlert.ONLINE.value,
                    "expr": f"{STATUS_CODE_RECORD} == {online}\n",
                    "labels": {"severity": "none"},
                    "annotations": {
                        "summary": f"Cluster {cluster} is ONLINE",
                        "description": (
                            f"Status signal for the fleetwatch reactor: {cluster} answered its "
                            f"last probe, or fewer than {n} probes in a row failed since it did. "
                            "Route it to the reactor only; nothing to do for people."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Failing but still inside the grace period: a heads-up, not a page. Resolves\n"
                    "once the cluster is OFFLINE (the critical alert takes over) or answers.\n"
                    f"keep_firing_for ({s.hold}): a cluster failing every other probe is one\n"
                    "warning, not one per cycle; it never delays or hides FleetClusterOffline."
                ),
                body={
                    "alert": PROBE_FAILING_ALERT,
                    "expr": (
                        f"{_FAILURES} >= 1\n"
                        f"and on (cluster) {_PROBEABLE} == 1\n"
                        f"unless on (cluster) {STATUS_CODE_RECORD} == {offline}\n"
                    ),
                    "keep_firing_for": s.hold,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            f"Cluster {cluster} failed {{{{ $value }}}} probe(s) in a row; "
                            f"OFFLINE at {n}"
                        ),
                        "description": (
                            f"The API server of {cluster} did not answer its readiness probe. "
                            f"It becomes OFFLINE (apps DEGRADED, deployments refused) after {n} "
                            "failures in a row. Check the reason in "
                            f"{CLUSTER_PROBE_FAILURES}"
                            f'{{cluster="{cluster}"}} and the API server\'s own health (etcd, '
                            "load balancer, certificates)."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Not probeable: stays UNKNOWN forever, so it is never gated nor cascaded.\n"
                    "`for: 15m` lets someone fix a kubeconfig without a warning on every edit."
                ),
                body={
                    "alert": "FleetClusterNotProbeable",
                    "expr": f"{_PROBEABLE} == 0\n",
                    "for": "15m",
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": f"Cluster {cluster} cannot be probed and stays UNKNOWN",
                        "description": (
                            f"fleetwatch has no usable credentials for {cluster}, so it never "
                            "probes it: its status stays UNKNOWN, deployments to it are allowed "
                            "and an outage would go unnoticed. Check that its "
                            "kubeconfig_secret_ref is a kubeconfig file readable by fleetwatch "
                            '(log: "is not a readable file") and that its context has a user '
                            "entry."
                        ),
                    },
                },
            ),
        ),
    )


def exporter_group(s: RuleSettings) -> Group:
    job = f'job="{s.exporter_job}"'
    down = f"up{{{job}}} == 0"
    # Down, and some cluster it published is published by no one now; or down and nothing
    # remembered of it (never came up, or down for longer than MEMORY).
    unwatched = (
        "(\n"
        f"    {down}\n"
        f"  and on (job, instance) ({_uncovered(s)})\n"
        ")\n"
        "or (\n"
        f"    {down}\n"
        f"  unless on (job, instance) {_remembered(s)}\n"
        ")\n"
    )
    covered = (
        "(\n"
        f"    {down}\n"
        f"  and on (job, instance) {_remembered(s)}\n"
        ")\n"
        f"unless on (job, instance) ({_uncovered(s)})\n"
    )
    return Group(
        name="fleetwatch-exporter",
        why=(
            "The watcher itself. While every replica probing a cluster is down, its status\n"
            "alerts resolve: it reads UNKNOWN, deployments are allowed and no outage is seen.\n"
            "With two replicas per shard, one replica down changes no status: a warning."
        ),
        rules=(
            Rule(
                why=(
                    "Clusters unwatched: an exporter is down and no other replica publishes\n"
                    f"some cluster it did (or the rules know nothing of it: it never came up, or\n"
                    f"it has been down for over {MEMORY}). `for: 2m`: a restart costs a scrape\n"
                    "or two; longer than that and part of the fleet is unwatched."
                ),
                body={
                    "alert": "FleetwatchExporterDown",
                    "expr": unwatched,
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter {{ $labels.instance }} is down and its clusters "
                            "are unwatched"
                        ),
                        "description": (
                            "Prometheus cannot scrape the fleetwatch exporter at "
                            "{{ $labels.instance }}, and no other replica probes (some of) its "
                            "clusters. Until one is back they read UNKNOWN: outages go unnoticed "
                            "and deployments are not gated. Check the process (fleetwatch "
                            "exporter), its log and its --web.listen-address; with shards, that "
                            "both replicas of its --shard.index run."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "One replica down while another still publishes every cluster it did (two\n"
                    "replicas per shard): statuses are unchanged, one vantage point is left.\n"
                    "A warning; it becomes FleetwatchExporterDown if the other goes too."
                ),
                body={
                    "alert": "FleetwatchExporterReplicaDown",
                    "expr": covered,
                    "for": "2m",
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter replica {{ $labels.instance }} is down; "
                            "another replica covers its clusters"
                        ),
                        "description": (
                            "Prometheus cannot scrape the fleetwatch exporter at "
                            "{{ $labels.instance }}. Another replica of its shard still probes "
                            "every cluster it did, so no status changed, but those clusters "
                            "are watched from one place only: a network problem of that replica "
                            "would now make them OFFLINE. Bring the replica back."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "No exporter target at all (scrape job removed or renamed, service discovery\n"
                    "empty). `for: 5m` covers a Prometheus restart, when absent() is briefly true."
                ),
                body={
                    "alert": "FleetwatchExporterAbsent",
                    "expr": f"absent(up{{{job}}})\n",
                    "for": "5m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": f"No fleetwatch exporter is scraped (job {s.exporter_job})",
                        "description": (
                            f"Prometheus has no target with {job}, so no cluster is watched. Check "
                            "the scrape config (the job name must match the rules: fleetwatch "
                            "rules --exporter-job) and its service discovery."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Scraped but stalled: no probe cycle has ended for over 3 probe intervals\n"
                    "(or none since it started that long ago). Its series are frozen at old\n"
                    "values, worse than absent: a frozen replica keeps a cluster ONLINE that the\n"
                    "other replica sees failing. The exporter's /-/ready fails on the same\n"
                    "condition. `for: 2m` rides out a slow scrape."
                ),
                body={
                    "alert": "FleetwatchExporterStalled",
                    "expr": _stalled(s),
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter {{ $labels.instance }} has completed no probe "
                            "cycle for over 3 intervals"
                        ),
                        "description": (
                            "The fleetwatch exporter at {{ $labels.instance }} answers scrapes "
                            "but its probe cycles have stopped: its cluster series hold old "
                            "values, so outages it should see go unnoticed. Its /-/ready answers "
                            "503. Read its log (credential plugins and kubeconfig reads are the "
                            "usual suspects) and restart it."
                        ),
                    },
                },
            ),
        ),
    )


def groups(settings: RuleSettings) -> list[Group]:
    return [status_group(settings), exporter_group(settings)]


# --- rendering -----------------------------------------------------------------------------


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


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))


def _comment(text: str, prefix: str) -> str:
    return "".join(f"{prefix}# {line}".rstrip() + "\n" for line in text.splitlines())


def _with_labels(body: dict[str, Any], alert_labels: Mapping[str, str]) -> dict[str, Any]:
    """An alerting rule with ``alert_labels`` added (a recording rule is left as it is)."""
    if "alert" not in body or not alert_labels:
        return body
    return {**body, "labels": {**alert_labels, **body.get("labels", {})}}


def _render_group(group: Group, alert_labels: Mapping[str, str] = {}) -> str:
    out = [_comment(group.why, "  "), f"  - name: {group.name}\n", "    rules:\n"]
    for rule in group.rules:
        out.append(_comment(rule.why, "      "))
        item = _dump([_with_labels(rule.body, alert_labels)])
        out.append(_indent(item, "      "))
    return "".join(out)


def render_groups_text(settings: RuleSettings, alert_labels: Mapping[str, str] = {}) -> str:
    """The ``groups:`` document: ours with comments, then the control-plane groups.

    ``alert_labels`` are added to every alerting rule (``--namespace`` needs it).
    """
    out = ["groups:\n"]
    for group in groups(settings):
        out.append(_render_group(group, alert_labels))
        out.append("\n")
    extra = [
        {**g, "rules": [_with_labels(r, alert_labels) for r in g["rules"]]}
        for g in rules_controlplane.rule_groups()
    ]
    if extra:
        out.append(
            "  # etcd quorum, control plane and CoreDNS (fleetwatch/rules_controlplane.py).\n"
        )
        out.append(_indent(_dump(extra), "  "))
    return "".join(out).rstrip("\n") + "\n"


def _header(settings: RuleSettings) -> str:
    return (
        "# Generated by `fleetwatch rules "
        f"--failure-threshold {settings.failure_threshold} "
        f"--probe.interval {settings.probe_interval:g} "
        f"--storm-fraction {settings.storm_fraction:g} "
        f"--storm-min-clusters {settings.storm_min_clusters} "
        f"--exporter-job {settings.exporter_job}`.\n"
        "# Do not edit by hand: change fleetwatch/rules.py (or render other values) instead.\n"
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
    return _header(settings) + head + "spec:\n" + _indent(body, "  ")


# --- command line --------------------------------------------------------------------------


def _env_number(name: str, default: str, kind: type[int] | type[float]) -> int | float:
    raw = os.environ.get(name, "").strip() or default
    try:
        return kind(raw)
    except ValueError:
        raise RulesError(f"{name}={raw!r} is not a valid {kind.__name__}") from None


def settings_from_args(args: argparse.Namespace) -> RuleSettings:
    threshold = args.failure_threshold
    if threshold is None:
        threshold = _env_number(ENV_THRESHOLD, "2", int)
    interval = args.probe_interval
    if interval is None:
        interval = _env_number(ENV_INTERVAL, "300", float)
    return RuleSettings(
        failure_threshold=int(threshold),
        probe_interval=float(interval),
        storm_fraction=args.storm_fraction,
        storm_min_clusters=args.storm_min_clusters,
        exporter_job=args.exporter_job,
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
        "--failure-threshold",
        type=int,
        default=None,
        metavar="N",
        help=f"consecutive failed probes before OFFLINE (default ${ENV_THRESHOLD} or 2)",
    )
    p.add_argument(
        "--probe.interval",
        dest="probe_interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"exporter probe interval; sets hold times and texts (default ${ENV_INTERVAL} or 300)",
    )
    # The spelling before flags were unified with the exporter's; kept so scripts work.
    p.add_argument("--probe-interval", dest="probe_interval", type=float, help=argparse.SUPPRESS)
    p.add_argument(
        "--storm-fraction",
        type=float,
        default=defaults.storm_fraction,
        metavar="F",
        help="share of probeable clusters failing at once: a storm (default %(default)s)",
    )
    p.add_argument(
        "--storm-min-clusters",
        type=int,
        default=defaults.storm_min_clusters,
        metavar="M",
        help="smallest probeable fleet where a storm is recognised (default %(default)s)",
    )
    p.add_argument(
        "--exporter-job",
        default=defaults.exporter_job,
        metavar="JOB",
        help="job label of the exporter's scrape config (default %(default)s)",
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
    p.set_defaults(func=run)
