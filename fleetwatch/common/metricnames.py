"""Every metric name fleetwatch writes and reads, spelled once.

The exporter and the reactor write these series; the rules (``fleetwatch rules``) and the
dashboards (``python -m dashboards``) read them. A name changed here changes every side at
once, and ``tests/test_metricnames.py`` fails when a ``fleetwatch_*`` name is spelled
anywhere else in the product code. Names follow ``fleetwatch_<subsystem>_<name>_<unit>``:
base units, ``_total`` for counters, ``_info`` with value 1 for metadata. The recording
rules' names are in ``fleetwatch.common.contract`` with the statuses they carry.

Each constant's comment gives its labels besides ``cluster`` (the exporter adds
``cluster`` to every per-cluster series).
"""

from __future__ import annotations

from typing import Final

# --- the exporter: one series per discovered cluster (label ``cluster``) ---------------

#: 1 per cluster; labels ``endpoint``, ``source`` (the kubeconfig file)
CLUSTER_INFO: Final = "fleetwatch_cluster_info"
#: 1 per cluster while ``--metric-labels-allowlist`` is not empty; labels
#: ``label_<key>``, the allowlisted labels of its Secret or kubeconfig context
CLUSTER_LABELS: Final = "fleetwatch_cluster_labels"
#: 1 if the cluster's kubeconfig is a readable file (so it is probed), else 0
CLUSTER_PROBEABLE: Final = "fleetwatch_cluster_probeable"
#: 1 if the last probe answered 200, else 0; absent before the first probe
CLUSTER_PROBE_SUCCESS: Final = "fleetwatch_cluster_probe_success"
CLUSTER_PROBE_DURATION: Final = "fleetwatch_cluster_probe_duration_seconds"
CLUSTER_PROBE_CONSECUTIVE_FAILURES: Final = "fleetwatch_cluster_probe_consecutive_failures"
CLUSTER_PROBE_LAST_SUCCESS: Final = "fleetwatch_cluster_probe_last_success_timestamp_seconds"
#: counter; label ``reason``
CLUSTER_PROBE_FAILURES: Final = "fleetwatch_cluster_probe_failures_total"
#: 1 while the last probe failed, else absent; labels ``reason`` and ``class``
#: (``credentials`` or ``unreachable``): one series per failing cluster
CLUSTER_PROBE_LAST_FAILURE_REASON: Final = "fleetwatch_cluster_probe_last_failure_reason"
#: of the consecutive failures, those of the class ``credentials`` (reset by a success)
CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES: Final = (
    "fleetwatch_cluster_probe_consecutive_credential_failures"
)

# --- the exporter's own health (no ``cluster`` label) ---------------------------------

EXPORTER_CLUSTERS_DISCOVERED: Final = "fleetwatch_exporter_clusters_discovered"
EXPORTER_DISCOVERY_ERRORS: Final = "fleetwatch_exporter_discovery_errors_total"
EXPORTER_CYCLE_DURATION: Final = "fleetwatch_exporter_cycle_duration_seconds"
EXPORTER_CYCLES: Final = "fleetwatch_exporter_cycles_total"
EXPORTER_LAST_CYCLE: Final = "fleetwatch_exporter_last_cycle_timestamp_seconds"
EXPORTER_PROBE_INTERVAL: Final = "fleetwatch_exporter_probe_interval_seconds"
EXPORTER_PROBE_TIMEOUT: Final = "fleetwatch_exporter_probe_timeout_seconds"
#: summary (quantiles 0.5, 0.9, 0.99 and 1 over the last 5 minutes, ``_sum``, ``_count``):
#: how late a timer of the event loop fires, the wait a scrape arriving then would add
EXPORTER_EVENT_LOOP_LAG: Final = "fleetwatch_exporter_event_loop_lag_seconds"

# --- the exporter's list+watch of the management cluster's Secrets (no ``cluster``) -------

#: 1 while every list+watch answers, else 0
DISCOVERY_KUBERNETES_UP: Final = "fleetwatch_discovery_kubernetes_up"
#: Secrets held; label ``kind`` (argocd, cluster-api, labelled)
DISCOVERY_KUBERNETES_OBJECTS: Final = "fleetwatch_discovery_kubernetes_objects"
DISCOVERY_KUBERNETES_LAST_SYNC: Final = (
    "fleetwatch_discovery_kubernetes_last_sync_timestamp_seconds"
)
#: counter; label ``reason`` (closed, expired, error)
DISCOVERY_KUBERNETES_WATCH_RESTARTS: Final = "fleetwatch_discovery_kubernetes_watch_restarts_total"
#: counter; label ``reason`` (forbidden, unauthorized, throttled, server_error, network...)
DISCOVERY_KUBERNETES_ERRORS: Final = "fleetwatch_discovery_kubernetes_errors_total"
#: 1; labels ``index``, ``count``
EXPORTER_SHARD: Final = "fleetwatch_exporter_shard"
#: --shard.count as a number (1 unsharded), for the rules to compare the shards' counts
EXPORTER_SHARDS: Final = "fleetwatch_exporter_shards"
#: clusters of the whole fleet as this exporter's discovery sees it, before sharding
EXPORTER_FLEET_CLUSTERS: Final = "fleetwatch_exporter_fleet_clusters"
#: counter; label ``check``
EXPORTER_CHECK_ERRORS: Final = "fleetwatch_exporter_check_errors_total"

# --- the control-plane check (per cluster) --------------------------------------------

ETCD_MEMBERS: Final = "fleetwatch_etcd_members"
ETCD_MEMBERS_HEALTHY: Final = "fleetwatch_etcd_members_healthy"
ETCD_QUORUM_SIZE: Final = "fleetwatch_etcd_quorum_size"
ETCD_HAS_LEADER: Final = "fleetwatch_etcd_has_leader"
#: label ``member``
ETCD_MEMBER_HEALTHY: Final = "fleetwatch_etcd_member_healthy"
#: label ``member``
ETCD_DB_SIZE: Final = "fleetwatch_etcd_db_size_bytes"
ETCD_RAFT_TERM: Final = "fleetwatch_etcd_raft_term"
#: 1 on the current state, 0 on the others; label ``state``
ETCD_QUORUM_STATE: Final = "fleetwatch_etcd_quorum_state"
#: 1; label ``source`` (``apiserver`` or ``direct``)
ETCD_SOURCE_INFO: Final = "fleetwatch_etcd_source_info"
#: labels ``component``, ``node``
CONTROLPLANE_LOCALHOST_ONLY: Final = "fleetwatch_controlplane_localhost_only"
COREDNS_REPLICAS: Final = "fleetwatch_coredns_replicas"
COREDNS_NODES: Final = "fleetwatch_coredns_nodes"

# --- the reactor -----------------------------------------------------------------------
# prometheus_client names a counter without ``_total`` and exposes it with the suffix:
# the reactor registers the first name, the dashboards read the second.

#: gauge; label ``status``
REACTOR_APPS: Final = "fleetwatch_reactor_apps"
#: gauge; label ``status``
REACTOR_CLUSTERS: Final = "fleetwatch_reactor_clusters"
REACTOR_OUTAGES_OPENED: Final = "fleetwatch_reactor_outages_opened"
REACTOR_OUTAGES_CLOSED: Final = "fleetwatch_reactor_outages_closed"
REACTOR_APPS_DEGRADED: Final = "fleetwatch_reactor_apps_degraded"
REACTOR_APPS_RESTORED: Final = "fleetwatch_reactor_apps_restored"
REACTOR_DEPLOYMENTS: Final = "fleetwatch_reactor_deployments"
REACTOR_DEPLOYMENTS_REFUSED: Final = "fleetwatch_reactor_deployments_refused"
#: label ``outcome``
REACTOR_NOTIFICATIONS: Final = "fleetwatch_reactor_notifications"
REACTOR_LAST_NOTIFICATION: Final = "fleetwatch_reactor_last_notification_timestamp_seconds"
#: 1 when the scrape could read the counts from the database, else 0 (and the gauges of
#: apps and clusters by status are absent)
REACTOR_DATABASE_UP: Final = "fleetwatch_reactor_database_up"
#: counters of the reconciliation with Alertmanager; failures have label ``alertmanager``
REACTOR_RECONCILE_RUNS: Final = "fleetwatch_reactor_reconcile_runs"
REACTOR_RECONCILE_FAILURES: Final = "fleetwatch_reactor_reconcile_failures"
REACTOR_RECONCILE_CHANGES: Final = "fleetwatch_reactor_reconcile_changes"
REACTOR_RECONCILE_LAST_SUCCESS: Final = (
    "fleetwatch_reactor_reconcile_last_success_timestamp_seconds"
)
#: gauge: seconds between two reconciliations, 0 when there are none
REACTOR_RECONCILE_INTERVAL: Final = "fleetwatch_reactor_reconcile_interval_seconds"
#: the CD actuator (``reactor.cd``): gauge of mirrored objects, labels ``cluster``,
#: ``source``, ``state`` (running, paused_by_outage, paused)
REACTOR_CD_OBJECTS: Final = "fleetwatch_reactor_cd_objects"
#: gauge of Argo CD cluster Secrets (``--cd.argocd.pause cluster-secret``), label ``state``
REACTOR_CD_CLUSTER_SECRETS: Final = "fleetwatch_reactor_cd_cluster_secrets"
#: gauge: objects of the watched kinds that name no cluster of the store
REACTOR_CD_UNRESOLVED: Final = "fleetwatch_reactor_cd_unresolved_objects"
#: gauge: mirrored apps of kinds the replica does not watch, left as they are
#: (``reactor.cd.scope``); labels ``kind`` (Kustomization, HelmRelease, Application,
#: other) and ``state`` (as last seen: running, paused_by_outage, paused)
REACTOR_CD_UNWATCHED: Final = "fleetwatch_reactor_cd_unwatched_objects"
#: counter; labels ``action`` (pause, resume, drop_mark, remark), ``result`` (applied,
#: dry_run, conflict, gone, failed, fenced)
REACTOR_CD_ACTIONS: Final = "fleetwatch_reactor_cd_actions"
#: counter; label ``reason`` (the management API's error reasons)
REACTOR_CD_FAILURES: Final = "fleetwatch_reactor_cd_failures"
#: gauges: actions decided and not yet done, and how long the oldest has waited
REACTOR_CD_PENDING: Final = "fleetwatch_reactor_cd_pending_actions"
REACTOR_CD_PENDING_AGE: Final = "fleetwatch_reactor_cd_oldest_pending_action_age_seconds"
REACTOR_CD_LAST_RESYNC: Final = "fleetwatch_reactor_cd_last_resync_timestamp_seconds"
#: gauge: 1 while the list+watch of the CD objects answers (every kind's last request
#: succeeded) and, with ``--cd.process``, its process runs; 0 otherwise
REACTOR_CD_WATCH_UP: Final = "fleetwatch_reactor_cd_watch_up"
#: gauge: ``--cd.resync-interval``; and 1 with labels ``argocd_pause``, ``dry_run``
REACTOR_CD_RESYNC_INTERVAL: Final = "fleetwatch_reactor_cd_resync_interval_seconds"
REACTOR_CD_INFO: Final = "fleetwatch_reactor_cd_info"
#: counter: objects fleetwatch paused and resumed because no cluster of the store holds
#: them any more (their cluster was deleted, or their destination changed to none)
REACTOR_CD_ORPHANS_RESUMED: Final = "fleetwatch_reactor_cd_orphans_resumed"
#: counter: writes the fence kept from leaving at the last moment (``reactor.cd.fence``),
#: label ``reason`` (lease: this replica's Lease may have expired; outage_closed: a
#: pause whose outage closed meanwhile); the action stays pending
REACTOR_CD_FENCED: Final = "fleetwatch_reactor_cd_fenced_writes"
#: counter: the Kubernetes Events that follow a pause or a resume (``reactor.cd.events``),
#: label ``result`` (created; exists: sent twice, one kept; failed; fenced: not sent)
REACTOR_CD_EVENTS: Final = "fleetwatch_reactor_cd_events"
#: leader election among reactor replicas (``reactor.cd.election``): gauge 1 while this
#: replica acts; counter of the times it began to; counter of failed Lease requests,
#: label ``reason``
REACTOR_CD_LEADER: Final = "fleetwatch_reactor_cd_leader"
REACTOR_CD_LEADER_TRANSITIONS: Final = "fleetwatch_reactor_cd_leader_transitions"
REACTOR_CD_LEASE_FAILURES: Final = "fleetwatch_reactor_cd_lease_failures"


def total(counter: str) -> str:
    """The series name prometheus_client exposes for the counter named ``counter``."""
    return f"{counter}_total"


# --- every process -----------------------------------------------------------------------

#: 1; labels ``version``, ``revision``, ``python_version``
BUILD_INFO: Final = "fleetwatch_build_info"
