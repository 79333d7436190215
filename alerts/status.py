"""The status rules: each cluster's ONLINE, OFFLINE or UNKNOWN from the exporter's gauges.

The failure threshold N is applied only here (its default, once, in
``fleetwatch.common.contract.FAILURE_THRESHOLD``; see the statuses in the README): the exporter
publishes raw counts, these rules decide, and the reactor learns the result from the
Alertmanager notifications of ``FleetClusterOnline`` and ``FleetClusterOffline``
(``fleetwatch.common.contract``). The module is long because each rule's reason and alert texts sit
next to its expression.
"""

from __future__ import annotations

from alerts.model import Group, Rule, RuleSettings, indent
from alerts.reason import (
    REASON_ANNOTATIONS,
    counted_failures,
    credentials_rule,
    refusals_block_online,
)
from fleetwatch.common.contract import (
    CLUSTERS_COUNT_RECORD,
    FAILING_RATIO_RECORD,
    PROBE_FAILING_ALERT,
    REPLICA_STATUS_RECORD,
    STATUS_CODE_RECORD,
    STATUS_CODES,
    STORM_ALERT,
    Status,
    StatusAlert,
)
from fleetwatch.common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_SUCCESS,
    CLUSTER_PROBEABLE,
    EXPORTER_LAST_CYCLE,
    EXPORTER_PROBE_INTERVAL,
)

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


def remembered(s: RuleSettings) -> str:
    """The clusters each exporter published within MEMORY, labelled with job and instance."""
    return f'last_over_time({CLUSTER_INFO}{{job="{s.exporter_job}"}}[{MEMORY}])'


def uncovered(s: RuleSettings) -> str:
    """Remembered clusters that no exporter publishes now: nobody probes them."""
    return f"{remembered(s)} unless on (cluster) {CLUSTER_INFO}"


def stalled(s: RuleSettings) -> str:
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
    failures = counted_failures(s)
    replica_code = (
        f"{CLUSTER_PROBEABLE}\n"
        "* (\n"
        f"      2 * ({failures} >= bool {n})\n"
        f"    +     ({failures} <  bool {n})\n"
        f"        * ({CLUSTER_PROBE_LAST_SUCCESS} > bool 0)\n"
        f"{refusals_block_online(s)}"
        "  )\n"
        "unless on (job, instance) (\n" + indent(stalled(s), "  ") + ")\n"
    )
    down = f'up{{job="{s.exporter_job}"}} == 0'
    code = (
        f"max by (cluster) ({REPLICA_STATUS_RECORD} == {online})\n"
        f"or max by (cluster) ({REPLICA_STATUS_RECORD})\n"
        f"or on (cluster) 0 * {_INFO}\n"
        f"or on (cluster) 0 * max by (cluster) (\n"
        f"    {remembered(s)}\n"
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
    counted = f"min by (cluster) ({failures})" if not s.count_rejected else _FAILURES
    refusals = (
        " Probes refused for credentials (401, 403, TLS verification) are not counted "
        "(fleetwatch rules --no-failure.count-rejected): FleetClusterCredentialsRejected "
        "tells of them."
        if not s.count_rejected
        else ""
    )
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
                    + (
                        "\nRefusals (401, 403, TLS verification) are not counted: they are taken\n"
                        "off the failures, and one since the last success keeps the replica\n"
                        "from ONLINE (UNKNOWN: the cluster answers, not to us)."
                        if not s.count_rejected
                        else ""
                    )
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
                            "the rules (fleetwatch rules --failure.threshold). For planned "
                            "maintenance, silence this alert for the cluster to avoid the cascade."
                            + refusals
                        ),
                        **REASON_ANNOTATIONS,
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
                        **REASON_ANNOTATIONS,
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
                        f"{counted} >= 1\n"
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
                            "load balancer, certificates)." + refusals
                        ),
                        **REASON_ANNOTATIONS,
                    },
                },
            ),
            credentials_rule(s, stalled(s)),
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
