"""How the reactor API writes its answers: records as the bodies of ``reactor.models``,
each written by its schema (the OpenAPI document's), and errors as ``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from reactor import models
from reactor.alertmanager.signals import format_time
from reactor.reasons import held_note, shown_hold
from reactor.store import AppRecord, ClusterRecord, OutageRecord

#: Lists longer than this are encoded to JSON off the event loop.
ENCODE_OFF_LOOP_ITEMS = 2000


def cluster_json(cluster: ClusterRecord) -> dict[str, Any]:
    state = cluster.state
    return {
        "name": cluster.name,
        "endpoint": cluster.endpoint,
        "kubeconfig_secret_ref": cluster.kubeconfig_secret_ref,
        "status": state.status.value,
        "status_since": format_time(state.status_since),
        "source": cluster.source,
        "outage_since": format_time(state.outage_since),
        "reason": cluster.reason,
        "reason_class": cluster.reason_class,
        "offline_held_by": shown_hold(state.status, cluster.offline_held),
        "note": held_note(state.status, cluster.offline_held),
    }


def app_json(app: AppRecord) -> dict[str, Any]:
    return {
        "name": app.name,
        "cluster": app.cluster,
        "status": app.status.value,
        "reason": app.reason,
        "source": app.source,
        "paused": paused_json(app),
    }


def paused_json(app: AppRecord) -> dict[str, str] | None:
    """Who paused a mirrored app's object, as the mirror last saw it: fleetwatch for an
    outage (its mark names the outage), or someone else (no mark: a person, as a rule),
    whom fleetwatch never resumes; None when it runs (or is an app of the API)."""
    if not app.paused:
        return None
    if app.mark is not None:
        return {"by": "outage", "outage": app.mark}
    return {"by": "person"}


def answer(
    schema: str, value: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """``value`` written by the model ``schema`` of reactor.models (the document's)."""
    return web.Response(
        body=models.encode(schema, value),
        status=status,
        headers=headers,
        content_type="application/json",
    )


async def list_response(schema: str, items: list[Any]) -> web.Response:
    """A JSON array; a long one is encoded off the loop, which it would hold up."""
    if len(items) <= ENCODE_OFF_LOOP_ITEMS:
        return answer(schema, items)
    body = await asyncio.to_thread(models.encode, schema, items)
    return web.Response(body=body, content_type="application/json")


def outage_json(outage: OutageRecord) -> dict[str, Any]:
    return {
        "started_at": format_time(outage.started_at),
        "closed_at": format_time(outage.closed_at),
        "apps_degraded": outage.apps_degraded,
        "apps_restored": outage.apps_restored,
    }


def error(
    code: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> web.Response:
    """``{"error": ...}`` (models.Error), or with the gate's ``cluster`` and ``status``
    (models.RefusalBody)."""
    return answer("Refusal" if extra else "Error", {"error": message, **extra}, code, headers)
