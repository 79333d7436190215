"""The status contract between the rules, Alertmanager, the reactor and the dashboards.

A cluster is ONLINE, OFFLINE or UNKNOWN. The rules record it as a number in
``cluster:fleetwatch_status:code`` (the dashboards map the numbers back to words) and
signal it with two alerts, exactly one of which fires while the cluster is ONLINE or
OFFLINE; neither fires while it is UNKNOWN. The reactor folds those alerts' notifications
into the cluster's status. The storm guard (most of the fleet failing at once means the
watcher is the likely fault) has its defaults here because both the rules and the
dashboards' threshold lines show them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Status(StrEnum):
    """Status of a cluster."""

    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    UNKNOWN = "UNKNOWN"


#: Value of ``cluster:fleetwatch_status:code`` for each status (Grafana maps them back).
STATUS_CODES: Final[dict[Status, int]] = {
    Status.UNKNOWN: 0,
    Status.ONLINE: 1,
    Status.OFFLINE: 2,
}


class StatusAlert(StrEnum):
    """The two alerts that carry a cluster's status (label ``cluster``)."""

    ONLINE = "FleetClusterOnline"
    OFFLINE = "FleetClusterOffline"


#: The alert that fires when the status alert fires for a cluster: inverse of the above.
STATUS_OF_ALERT: Final[dict[StatusAlert, Status]] = {
    StatusAlert.ONLINE: Status.ONLINE,
    StatusAlert.OFFLINE: Status.OFFLINE,
}

#: The fleet-wide alert that inhibits ``FleetClusterOffline`` during a probe storm.
STORM_ALERT: Final = "FleetProbeStorm"

#: The heads-up while a cluster fails inside its grace period (the dashboards show it).
PROBE_FAILING_ALERT: Final = "FleetClusterProbeFailing"

#: The warning while every vantage point's last probe of a cluster was refused (401, 403,
#: TLS verification): fleetwatch's credential, not the cluster, is the likely fault.
CREDENTIALS_ALERT: Final = "FleetClusterCredentialsRejected"

#: Default share of the probeable clusters failing at once that means "the watcher is broken".
#: Consecutive failed probes before a cluster is OFFLINE, unless ``--failure.threshold``
#: (or ``CLUSTER_HEALTH_FAILURE_THRESHOLD``) says otherwise: written only here, read by the
#: rules' generator (``alerts/``), its flag's help and the demo.
FAILURE_THRESHOLD: Final = 2

STORM_FRACTION: Final = 0.5

#: Smallest probeable fleet where a storm is recognised: 1 failing of 2 is no storm.
STORM_MIN_CLUSTERS: Final = 3

# Recording rules: the rules write them, nothing else computes them; the dashboards read
# all but the first.

#: Per replica of the exporter (labels ``cluster``, ``job``, ``instance``): the status
#: that replica alone sees, before the replicas are combined by cluster.
REPLICA_STATUS_RECORD: Final = "cluster_instance:fleetwatch_status:code"

#: Per cluster: its status as a number of ``STATUS_CODES``.
STATUS_CODE_RECORD: Final = "cluster:fleetwatch_status:code"

#: Per status (label ``status``): how many clusters have it, 0 included.
CLUSTERS_COUNT_RECORD: Final = "fleet:fleetwatch_clusters:count"

#: Share of the probeable clusters whose last probe failed: what the storm guard compares.
FAILING_RATIO_RECORD: Final = "fleet:fleetwatch_clusters_probe_failing:ratio"
