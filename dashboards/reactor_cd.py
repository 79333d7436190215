"""The reactor dashboard's CD row: Flux and Argo CD objects paused and resumed with outages.

Only a reactor started with ``--cd.flux`` or ``--cd.argocd`` exports these series; without
them the row says "CD integration off". The questions it answers, in order: how many
objects are paused now, by whom (an outage, or someone else); is anything waiting (the
alert ``FleetwatchCDActionsPending`` fires on the same numbers); does one replica act, and
does what it acts on come in (its list+watch: ``FleetwatchCDWatchDown``); what was done
and what failed, and why; which clusters' objects are paused.
"""

from __future__ import annotations

from typing import Any

from dashboards.frame import ANY_CLUSTER
from dashboards.panels import (
    Board,
    Json,
    bool_mappings,
    color_override,
    stat,
    target,
    thresholds,
    timeseries,
)
from dashboards.status import COLOR_FAILING, COLOR_OFFLINE, COLOR_ONLINE
from fleetwatch.common.metricnames import (
    REACTOR_CD_ACTIONS,
    REACTOR_CD_FAILURES,
    REACTOR_CD_LAST_RESYNC,
    REACTOR_CD_LEADER,
    REACTOR_CD_OBJECTS,
    REACTOR_CD_PENDING,
    REACTOR_CD_PENDING_AGE,
    REACTOR_CD_RESYNC_INTERVAL,
    REACTOR_CD_UNRESOLVED,
    REACTOR_CD_WATCH_UP,
    total,
)

OFF = "CD integration off"
STATE_COLORS = {
    "running": COLOR_ONLINE,
    "paused_by_outage": COLOR_OFFLINE,
    "paused": COLOR_FAILING,
}


def _objects(state: str) -> str:
    return f'sum({REACTOR_CD_OBJECTS}{{{ANY_CLUSTER}, state="{state}"}})'


def _number(title: str, description: str, expr: str, legend: str, **options: Any) -> Json:
    """One of the row's numbers: ``expr``'s last value, whole unless ``decimals`` says
    otherwise, and "CD integration off" when the reactor exports none."""
    options.setdefault("decimals", 0)
    return stat(title, description, [target(expr, legend, instant=True)], no_value=OFF, **options)


def cd(b: Board, y: int) -> int:
    """The row: a line of numbers, then what happened over time."""
    b.row("Flux and Argo CD objects (--cd.flux, --cd.argocd)", y)
    y += 1
    numbers = [
        _number(
            "Paused by outages",
            "Flux and Argo CD objects of the selected clusters that fleetwatch paused (they "
            "carry its mark fleetwatch.io/paused-by-outage): resumed when their outage ends.",
            _objects("paused_by_outage"),
            "paused",
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_OFFLINE)),
        ),
        _number(
            "Paused by someone else",
            "Objects paused without fleetwatch's mark (a person, a pipeline): fleetwatch "
            "never resumes them.",
            _objects("paused"),
            "paused",
            color_mode="value",
        ),
        _number(
            "Actions pending",
            "Pauses, resumes and marks decided and not done yet: retried at every pass. "
            "Above 0 for long: see the failures below (a dry run keeps them all pending).",
            f"sum({REACTOR_CD_PENDING})",
            "pending",
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        _number(
            "Oldest pending, in resync intervals",
            "How long the oldest pending action has waited, in resync intervals "
            "(--cd.resync-interval): each interval is one more retry. FleetwatchCDActionsPending "
            "fires after 2 for 5 minutes.",
            f"max({REACTOR_CD_PENDING_AGE} / {REACTOR_CD_RESYNC_INTERVAL})",
            "intervals",
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING), (2, COLOR_OFFLINE)),
            decimals=1,
        ),
        _number(
            "Since last resync",
            "Time since the last full check of every object against the store; it should "
            "stay under the resync interval (60 s by default). Growing: the first list of "
            "the objects has not completed (RBAC, the management API) or the store fails.",
            f"time() - max({REACTOR_CD_LAST_RESYNC} > 0)",
            "since",
            unit="s",
            color_mode="value",
        ),
        _number(
            "Objects naming no cluster",
            "Objects of the watched kinds whose destination is no cluster of the store "
            "(not mirrored; the reactor logs why once): a Secret discovery does not read, "
            "a kubeconfig with several contexts, an Application with both name and server.",
            f"max({REACTOR_CD_UNRESOLVED})",
            "unresolved",
            steps=thresholds((None, "text"), (1, COLOR_FAILING)),
            color_mode="value",
        ),
        stat(
            "Acting replicas",
            "Replicas holding the Lease, the one that pauses and resumes: 1. Zero for "
            "longer than a lease duration: nobody acts (the Lease's failures are in the "
            "log); never more than one. No Lease without --cd.leader-election or with "
            "--cd.dry-run.",
            [target(f"sum({REACTOR_CD_LEADER})", "acting", instant=True)],
            steps=thresholds((None, COLOR_OFFLINE), (1, COLOR_ONLINE), (2, COLOR_OFFLINE)),
            decimals=0,
            no_value="no Lease",
        ),
        stat(
            "Objects' list+watch",
            "Whether every replica's list+watch of the Flux and Argo CD objects answers (and, "
            "with --cd.process, its objects process runs): DOWN, the passes act on the "
            "objects last seen; FleetwatchCDWatchDown fires after 10 minutes.",
            [target(f"min({REACTOR_CD_WATCH_UP})", "watch", instant=True)],
            mappings=bool_mappings("up", "DOWN", COLOR_ONLINE, COLOR_OFFLINE),
            no_value=OFF,
        ),
    ]
    for i, panel in enumerate(numbers):
        b.add(panel, at=(3 * i, y, 3, 4))
    y += 4
    b.add(
        timeseries(
            "Objects by state",
            "Mirrored Flux and Argo CD objects of the selected clusters: running, paused by "
            "an outage, paused by someone else (an Application counts as its cluster Secret "
            "with --cd.argocd.pause cluster-secret).",
            [
                target(
                    f"sum by (state) ({REACTOR_CD_OBJECTS}{{{ANY_CLUSTER}}})",
                    "{{state}}",
                )
            ],
            unit="none",
            stack=True,
            interpolation="stepAfter",
            overrides=[color_override(s, c) for s, c in STATE_COLORS.items()],
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Pauses and resumes",
            "Patches sent, by action and result: applied; conflict (the object changed since "
            "the decision: decided again on the new version); gone (deleted); failed (retried, "
            "by reason on the right); dry_run (--cd.dry-run: counted, not sent).",
            [
                target(
                    "sum by (action, result) "
                    f"(increase({total(REACTOR_CD_ACTIONS)}[$__rate_interval]))",
                    "{{action}} {{result}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(12, y, 12, 8),
    )
    y += 8
    b.add(
        timeseries(
            "Paused by outages, per cluster",
            "Objects fleetwatch paused, by the cluster whose outage paused them.",
            [
                target(
                    "sum by (cluster) "
                    f'({REACTOR_CD_OBJECTS}{{{ANY_CLUSTER}, state="paused_by_outage"}}) > 0',
                    "{{cluster}}",
                )
            ],
            unit="none",
            interpolation="stepAfter",
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Failures by reason",
            "Patches the management cluster's API refused or did not answer: forbidden (the "
            "service account lacks patch: deploy/'s cd-* components), unauthorized, network, "
            "timeout, throttled, server_error, bad_request (a webhook or the schema refuses the "
            "patch). Each is retried at the next pass.",
            [
                target(
                    f"sum by (reason) (increase({total(REACTOR_CD_FAILURES)}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(12, y, 12, 8),
    )
    return y + 8
