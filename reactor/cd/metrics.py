"""The CD actuator's metrics, on the reactor's registry, e.g.::

    fleetwatch_reactor_cd_objects{cluster="prod-1",source="flux",state="paused_by_outage"} 12
    fleetwatch_reactor_cd_cluster_secrets{state="paused_by_outage"} 1
    fleetwatch_reactor_cd_unresolved_objects 1
    fleetwatch_reactor_cd_unwatched_objects{kind="Application",state="paused_by_outage"} 2
    fleetwatch_reactor_cd_actions_total{action="pause",result="applied"} 12
    fleetwatch_reactor_cd_failures_total{reason="server_error"} 2
    fleetwatch_reactor_cd_pending_actions 0
    fleetwatch_reactor_cd_oldest_pending_action_age_seconds 0
    fleetwatch_reactor_cd_last_resync_timestamp_seconds 1.7e9
    fleetwatch_reactor_cd_resync_interval_seconds 60
    fleetwatch_reactor_cd_info{argocd_pause="application",dry_run="false"} 1
    fleetwatch_reactor_cd_orphans_resumed_total 0
    fleetwatch_reactor_cd_fenced_writes_total{reason="lease"} 0
    fleetwatch_reactor_cd_events_total{result="created"} 24

``objects`` is per cluster: what an outage of that cluster paused, and what someone else
did (``paused``: paused without fleetwatch's mark, never resumed by fleetwatch). An
Application whose cluster Secret carries the pause counts as the Secret does. Each
(cluster, source) with objects has its three states, zeros included; a cluster whose
last object went away drops out (a collector, not a labelled gauge that would keep it).
``unwatched_objects`` counts the mirrored apps of kinds this replica does not watch, left
as they are (``reactor.cd.unwatched``), by what was last seen of their objects; each kind
with such rows has its three states.

The interval and ``info`` are for the alert on pending actions (``alerts.cd``):
an action is retried at every pass, the resync at the latest, so "pending for longer
than two intervals" needs the interval the reactor runs with; and a dry run keeps every
action pending by design.

Label values come from fixed sets (sources, states, verbs, results, the management API's
error reasons) and the store's cluster names (the fleet's, as on every fleetwatch
series): never from an object's name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric

from fleetwatch.common import metricnames
from fleetwatch.common.foreground import Paced
from fleetwatch.common.prerendered import Prerendered

#: What an object is, as the objects gauge counts it.
STATES = ("running", "paused_by_outage", "paused")
#: What became of an action.
RESULTS = ("applied", "dry_run", "conflict", "gone", "failed", "fenced")
#: Why the fence kept a write (``reactor.cd.fence``).
FENCE_REASONS = ("lease", "outage_closed")
#: What became of an Event (``reactor.cd.events``).
EVENT_RESULTS = ("created", "exists", "failed", "fenced")


class ObjectsCollector(Prerendered):
    """``fleetwatch_reactor_cd_objects`` and ``_cluster_secrets``, from the last pass.

    Rendered once per change of the counts (:mod:`fleetwatch.common.prerendered`): three
    series per (cluster, source), 6,000 at 1,000 clusters with Flux and Argo CD objects,
    0.5 MB and 40-90 ms of CPU to format, and a pass in a steady fleet finds the same
    counts.
    """

    def __init__(self) -> None:
        super().__init__()
        self.objects: Mapping[tuple[str, str, str], int] = {}
        self.secrets: Mapping[str, int] | None = None
        self.unwatched: Mapping[tuple[str, str], int] = {}

    def set_counts(
        self,
        objects: Mapping[tuple[str, str, str], int],
        secrets: Mapping[str, int] | None,
    ) -> None:
        if objects != self.objects or secrets != self.secrets:
            self.objects, self.secrets = dict(objects), None if secrets is None else dict(secrets)
            self.changed()

    def set_unwatched(self, counts: Mapping[tuple[str, str], int]) -> None:
        if counts != self.unwatched:
            self.unwatched = dict(counts)
            self.changed()

    def families(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily(
            metricnames.REACTOR_CD_OBJECTS,
            "Flux and Argo CD objects mirrored as apps, by cluster, source and state "
            "(paused_by_outage: paused with fleetwatch's mark; paused: by someone else).",
            labels=["cluster", "source", "state"],
        )
        counts = self.objects
        for cluster, source in sorted({(c, s) for c, s, _ in counts}):
            for state in STATES:
                count = counts.get((cluster, source, state), 0)
                objects.add_metric([cluster, source, state], count)
        # Formatted in a scrape's thread, as background work that gives way to requests
        # between samples (``reactor.api.handlers.get_metrics``).
        objects.samples = Paced(objects.samples)
        yield objects
        secrets_by_state = self.secrets
        if secrets_by_state is not None:
            secrets = GaugeMetricFamily(
                metricnames.REACTOR_CD_CLUSTER_SECRETS,
                "Argo CD cluster Secrets of the store's clusters, by state "
                "(--cd.argocd.pause cluster-secret).",
                labels=["state"],
            )
            for state in STATES:
                secrets.add_metric([state], secrets_by_state.get(state, 0))
            yield secrets
        unwatched = GaugeMetricFamily(
            metricnames.REACTOR_CD_UNWATCHED,
            "Mirrored apps of kinds this replica does not watch, left as they are, by kind "
            "and by what was last seen of the object (paused_by_outage: nothing resumes it).",
            labels=["kind", "state"],
        )
        by_kind = self.unwatched
        for kind in sorted({k for k, _ in by_kind}):
            for state in STATES:
                unwatched.add_metric([kind, state], by_kind.get((kind, state), 0))
        yield unwatched


class CdMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.collector = ObjectsCollector()
        registry.register(self.collector)
        self.unresolved = Gauge(
            metricnames.REACTOR_CD_UNRESOLVED,
            "Objects of the watched kinds that name no cluster of the store (not mirrored).",
            registry=registry,
        )
        self.actions = Counter(
            metricnames.REACTOR_CD_ACTIONS,
            "Actions on CD objects, by action and result (conflict: the object changed since "
            "the decision, decided again; gone: deleted; failed: retried; fenced: not sent, "
            "pending).",
            ["action", "result"],
            registry=registry,
        )
        self.failures = Counter(
            metricnames.REACTOR_CD_FAILURES,
            "Patches the management cluster's API refused or did not answer, by reason.",
            ["reason"],
            registry=registry,
        )
        self.pending = Gauge(
            metricnames.REACTOR_CD_PENDING,
            "Actions decided and not done yet (failed, or in a dry run).",
            registry=registry,
        )
        self.pending_age = Gauge(
            metricnames.REACTOR_CD_PENDING_AGE,
            "Seconds the oldest pending action has waited; 0 when none.",
            registry=registry,
        )
        self.watch_up = Gauge(
            metricnames.REACTOR_CD_WATCH_UP,
            "1 while the list+watch of the objects answers (and its process runs), else 0.",
            registry=registry,
        )
        self.last_resync = Gauge(
            metricnames.REACTOR_CD_LAST_RESYNC,
            "When the last full check of every object against the store ended (Unix time).",
            registry=registry,
        )
        self.resync_interval = Gauge(
            metricnames.REACTOR_CD_RESYNC_INTERVAL,
            "Seconds between two full checks (--cd.resync-interval).",
            registry=registry,
        )
        self.info = Gauge(
            metricnames.REACTOR_CD_INFO,
            "1, with how the CD integration runs (--cd.argocd.pause, --cd.dry-run).",
            ["argocd_pause", "dry_run"],
            registry=registry,
        )
        self.orphans_resumed = Counter(
            metricnames.REACTOR_CD_ORPHANS_RESUMED,
            "Objects fleetwatch paused and then resumed because no cluster of the store "
            "holds them any more (reactor.cd.orphans).",
            registry=registry,
        )
        self.fenced = Counter(
            metricnames.REACTOR_CD_FENCED,
            "Writes to CD objects kept from leaving at the last moment, by reason (lease: "
            "this replica's Lease may have expired; outage_closed: a pause whose outage "
            "closed meanwhile); the action stays pending for the replica that acts.",
            ["reason"],
            registry=registry,
        )
        for reason in FENCE_REASONS:
            self.fenced.labels(reason)
        self.events = Counter(
            metricnames.REACTOR_CD_EVENTS,
            "Kubernetes Events written after a pause or a resume, by result (exists: the "
            "same Event was sent twice and kept once; failed: not written, the pause or "
            "resume stands; fenced: not sent, this replica's Lease may have expired).",
            ["result"],
            registry=registry,
        )
        for result in EVENT_RESULTS:
            self.events.labels(result)

    def describe_settings(self, resync_interval_s: float, argocd_pause: str, dry_run: bool) -> None:
        self.resync_interval.set(resync_interval_s)
        self.info.labels(argocd_pause, "true" if dry_run else "false").set(1)

    def set_objects(
        self, objects: Mapping[tuple[str, str, str], int], secrets: Mapping[str, int] | None
    ) -> None:
        """The counts of the last pass: (cluster, source, state) -> objects, and the
        cluster Secrets by state (None: Argo CD is not paused on Secrets)."""
        self.collector.set_counts(objects, secrets)

    def set_unwatched(self, counts: Mapping[tuple[str, str], int]) -> None:
        """(kind, state) -> mirrored apps of kinds this replica does not watch."""
        self.collector.set_unwatched(counts)
