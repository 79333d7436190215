"""The CD actuator's metrics, on the reactor's registry, e.g.::

    fleetwatch_reactor_cd_objects{source="flux",state="paused_by_outage"} 12
    fleetwatch_reactor_cd_unresolved_objects 1
    fleetwatch_reactor_cd_actions_total{action="pause",result="applied"} 12
    fleetwatch_reactor_cd_failures_total{reason="server_error"} 2
    fleetwatch_reactor_cd_pending_actions 0
    fleetwatch_reactor_cd_oldest_pending_action_age_seconds 0
    fleetwatch_reactor_cd_last_resync_timestamp_seconds 1.7e9
    fleetwatch_reactor_cd_orphans_resumed_total 0

Label values come from fixed sets (sources, states, verbs, results, the management API's
error reasons): never from an object's name.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from common import metricnames

#: What an object is, as the objects gauge counts it.
STATES = ("running", "paused_by_outage", "paused")
#: What became of an action.
RESULTS = ("applied", "dry_run", "conflict", "gone", "failed")


class CdMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.objects = Gauge(
            metricnames.REACTOR_CD_OBJECTS,
            "Flux and Argo CD objects mirrored as apps, by source and state (paused_by_outage: "
            "paused with fleetwatch's mark).",
            ["source", "state"],
            registry=registry,
        )
        self.unresolved = Gauge(
            metricnames.REACTOR_CD_UNRESOLVED,
            "Objects of the watched kinds that name no cluster of the store (not mirrored).",
            registry=registry,
        )
        self.actions = Counter(
            metricnames.REACTOR_CD_ACTIONS,
            "Actions on CD objects, by action and result (conflict: the object changed since "
            "the decision, decided again; gone: deleted; failed: retried).",
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
        self.last_resync = Gauge(
            metricnames.REACTOR_CD_LAST_RESYNC,
            "When the last full check of every object against the store ended (Unix time).",
            registry=registry,
        )
        self.orphans_resumed = Counter(
            metricnames.REACTOR_CD_ORPHANS_RESUMED,
            "Objects fleetwatch paused and then resumed because no cluster of the store "
            "holds them any more (reactor.cd.orphans).",
            registry=registry,
        )
