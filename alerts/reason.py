"""Why a cluster fails, in the rules: the reason annotations and refused credentials.

The exporter publishes each cluster's last failure as
``fleetwatch_cluster_probe_last_failure_reason{cluster, reason, class} 1`` (one series per
failing cluster and exporter replica, none after a success). Two things are built on it:

- :data:`REASON_ANNOTATIONS`: the ``reason``, ``reason_class`` and ``seen_by`` annotations
  of every status alert, read with ``query`` in the template rather than joined into the
  expression: a join would put ``reason`` in the alert's labels, and a reason that changes
  (``timeout`` then ``connect``) would end the alert and start a new one with a new
  ``startsAt``, which the reactor reads as a new outage. Annotations change in place.
- :func:`credentials_rule`: ``FleetClusterCredentialsRejected`` (warning), while the last
  probe failed with the class ``credentials`` on every vantage point that probes it.

And the count toward OFFLINE (``--failure.count-rejected``, the default, or
``--no-failure.count-rejected``): :func:`counted_failures` and :func:`refusals_block_online`.
Without counting, the exporter's
``fleetwatch_cluster_probe_consecutive_credential_failures`` (the refusals among the
consecutive failures, reset by a success) is taken off the consecutive failures, and a
replica that saw a refusal since the last success reads neither ONLINE nor OFFLINE (until
N other failures make it OFFLINE or a success makes it ONLINE): the cluster answered, but
not to us, so nothing is known of its health. One gauge is the least the exporter can
publish for this: the last failure's reason alone cannot tell how many of the run's
failures were refusals, and a count per class would repeat the consecutive failures.
"""

from __future__ import annotations

from alerts.model import Rule, RuleSettings, indent
from fleetwatch.common.contract import CREDENTIALS_ALERT
from fleetwatch.common.metricnames import (
    CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_LAST_FAILURE_REASON,
    CLUSTER_PROBE_SUCCESS,
)


def _listed(label: str) -> str:
    """A template: the distinct values of ``label`` on the cluster's last-failure series,
    sorted and joined by ", " (empty while no replica's last probe failed)."""
    query = f"count by ({label}) ({CLUSTER_PROBE_LAST_FAILURE_REASON}{{cluster=%q}})"
    rows = f'printf "{query}" $labels.cluster | query | sortByLabel "{label}"'
    return (
        f"{{{{ range $i, $s := {rows} }}}}"
        f"{{{{ if $i }}}}, {{{{ end }}}}{{{{ $s.Labels.{label} }}}}{{{{ end }}}}"
    )


#: The annotations every status alert carries: the last failure's reasons, their classes,
#: and the exporter replicas (``instance``) whose last probe of the cluster failed.
REASON_ANNOTATIONS: dict[str, str] = {
    "reason": _listed("reason"),
    "reason_class": _listed("class"),
    "seen_by": _listed("instance"),
}


def counted_failures(s: RuleSettings) -> str:
    """Per replica: the consecutive failures that count toward OFFLINE."""
    if s.count_rejected:
        return CLUSTER_PROBE_CONSECUTIVE_FAILURES
    return (
        f"({CLUSTER_PROBE_CONSECUTIVE_FAILURES} - {CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES})"
    )


def refusals_block_online(s: RuleSettings) -> str:
    """A factor of the ONLINE term of the replica's status: 1, or (not counting refusals)
    0 while a refusal happened since the last success, so the replica reads UNKNOWN."""
    if s.count_rejected:
        return ""
    return f"        * ({CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES} == bool 0)\n"


def credentials_rule(s: RuleSettings, stalled: str) -> Rule:
    """``FleetClusterCredentialsRejected``; ``stalled``: the stalled replicas' expression."""
    n = s.failure_threshold
    cluster = "{{ $labels.cluster }}"
    refused = f'{CLUSTER_PROBE_LAST_FAILURE_REASON}{{class="credentials"}}'
    # 1 for a replica whose last probe was refused, 0 for one that succeeded or failed
    # otherwise; min by cluster: every vantage point with a verdict agrees.
    expr = (
        "min by (cluster) (\n"
        "  (\n"
        f"      max without (reason, class) ({refused})\n"
        f"    or 0 * {CLUSTER_PROBE_SUCCESS}\n"
        "  )\n"
        "  unless on (job, instance) (\n" + indent(stalled, "    ") + "  )\n"
        ") == 1\n"
    )
    if s.count_rejected:
        consequence = (
            f"These failures count toward OFFLINE: after {n} in a row the cluster turns "
            "OFFLINE, its apps are marked DEGRADED, its Flux and Argo CD objects are paused "
            "and deployments to it are refused (409). Fix the credential before that."
        )
    else:
        consequence = (
            "These rules do not count refusals toward OFFLINE (fleetwatch rules "
            "--no-failure.count-rejected): while they last the cluster reads UNKNOWN, nothing "
            "is paused and deployments are allowed, so an outage behind them goes unseen."
        )
    return Rule(
        why=(
            "The API server answered and refused fleetwatch's credential (401, 403), or TLS\n"
            "verification failed (unknown authority, wrong name, expired), on every replica\n"
            "that probes the cluster. No `for:`: a person should fix the credential before the\n"
            "failure threshold turns the cluster OFFLINE (when refusals count), and one refused\n"
            "probe already says the credential is wrong."
        ),
        body={
            "alert": CREDENTIALS_ALERT,
            "expr": expr,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"fleetwatch's credential for cluster {cluster} is refused",
                "description": (
                    f"The API server of {cluster} answered fleetwatch's probe with 401 or 403, "
                    "or its certificate (or fleetwatch's) failed TLS verification, on every "
                    "exporter replica that probes it. The cluster may be healthy; fleetwatch "
                    f"cannot tell. {consequence} Check: the token or client certificate of the "
                    "cluster's kubeconfig or Secret (revoked, expired, rotated), the RBAC that "
                    "lets it get /readyz, and the CA and server name (reason tls)."
                ),
                **REASON_ANNOTATIONS,
            },
        },
    )
