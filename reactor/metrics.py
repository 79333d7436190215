"""The reactor's own metrics, on an injected registry (never the global one).

Sample of ``GET /metrics``::

    fleetwatch_reactor_apps{status="DEGRADED"} 12.0
    fleetwatch_reactor_clusters{status="OFFLINE"} 1.0
    fleetwatch_reactor_outages_opened_total 1.0
    fleetwatch_reactor_apps_degraded_total 12.0
    fleetwatch_reactor_deployments_refused_total 3.0
    fleetwatch_reactor_notifications_total{outcome="applied"} 40.0
    fleetwatch_reactor_last_notification_timestamp_seconds 1.7964e+09

The gauges of apps and clusters by status come from the store: the ``/metrics`` handler
reads the counts (one ``GROUP BY`` each, on the store thread) and hands them to
:class:`StatusCollector` just before rendering, so they are never out of step with the
database, whoever wrote it. The counters count what this process did since it started.

``/metrics`` answers while the database cannot: the reactor's own health matters most
then. A scrape whose read fails (or takes over ``reactor.api.handlers.METRICS_DB_TIMEOUT_S``)
renders what is in memory, ``fleetwatch_reactor_database_up 0``, and no gauge of apps or
clusters: absent, as Prometheus' own exporters leave out what they could not read, never
a stale or zero count that a dashboard or a rule would take for the truth.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.common.metricnames import (
    REACTOR_APPS,
    REACTOR_APPS_DEGRADED,
    REACTOR_APPS_RESTORED,
    REACTOR_CLUSTERS,
    REACTOR_DATABASE_UP,
    REACTOR_DEPLOYMENTS,
    REACTOR_DEPLOYMENTS_REFUSED,
    REACTOR_LAST_NOTIFICATION,
    REACTOR_NOTIFICATIONS,
    REACTOR_OUTAGES_CLOSED,
    REACTOR_OUTAGES_OPENED,
)
from reactor.store import StatusCounts

#: Outcomes of ``POST /alerts``: applied (200), rejected (400/413), unauthorized (401),
#: error (503: the store could not serve; Alertmanager retries).
OUTCOMES = ("applied", "rejected", "unauthorized", "error")


class StatusCollector(Collector):
    """Apps and clusters by status, from the counts the last scrape read from the store,
    and whether it could read them (``counts`` None: it could not)."""

    def __init__(self) -> None:
        self.counts: StatusCounts | None = None

    def collect(self) -> Iterator[Metric]:
        counts = self.counts
        yield GaugeMetricFamily(
            REACTOR_DATABASE_UP,
            "1 when this scrape read the counts from the database, 0 when it could not (the "
            "gauges of apps and clusters by status are then absent).",
            value=0 if counts is None else 1,
        )
        if counts is None:
            return
        apps = GaugeMetricFamily(
            REACTOR_APPS, "Apps known to the reactor, by status.", labels=["status"]
        )
        for app_status, count in counts.apps.items():
            apps.add_metric([app_status.value], count)
        yield apps
        clusters = GaugeMetricFamily(
            REACTOR_CLUSTERS,
            "Clusters known to the reactor, by status.",
            labels=["status"],
        )
        for cluster_status, count in counts.clusters.items():
            clusters.add_metric([cluster_status.value], count)
        yield clusters


class ReactorMetrics:
    """Every metric of the reactor, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.status = StatusCollector()
        registry.register(self.status)
        self.outages_opened = Counter(
            REACTOR_OUTAGES_OPENED,
            "Outages opened: a cluster seen ONLINE became OFFLINE (each one ran a cascade).",
            registry=registry,
        )
        self.outages_closed = Counter(
            REACTOR_OUTAGES_CLOSED,
            "Outages closed: the cluster was seen ONLINE again (each one ran a restore).",
            registry=registry,
        )
        self.apps_degraded = Counter(
            REACTOR_APPS_DEGRADED,
            "Apps set DEGRADED (cluster_offline) by a cascade.",
            registry=registry,
        )
        self.apps_restored = Counter(
            REACTOR_APPS_RESTORED,
            "Apps set DEPLOYED again when the outage that degraded them closed.",
            registry=registry,
        )
        self.deployments = Counter(
            REACTOR_DEPLOYMENTS,
            "Deployments accepted (POST /deployments answered 201).",
            registry=registry,
        )
        self.deployments_refused = Counter(
            REACTOR_DEPLOYMENTS_REFUSED,
            "Deployments and reassignments refused by the gate (target cluster OFFLINE).",
            registry=registry,
        )
        self.notifications = Counter(
            REACTOR_NOTIFICATIONS,
            "Alertmanager notifications received on POST /alerts, by outcome.",
            ["outcome"],
            registry=registry,
        )
        for outcome in OUTCOMES:
            self.notifications.labels(outcome)
        self.last_notification = Gauge(
            REACTOR_LAST_NOTIFICATION,
            "When the last notification was applied (Unix time); 0 before the first one.",
            registry=registry,
        )
