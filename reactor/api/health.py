"""``/-/healthy`` and ``/-/ready``: what an orchestrator and a load balancer ask the reactor.

As Prometheus' own servers: ``/-/healthy`` answers 200 while the process serves (a restart
cannot help otherwise), ``/-/ready`` answers 503 while the database cannot answer a query
(why is logged, not answered: neither path needs a credential), so a load balancer sends
the calls to a replica that can serve them, and, with ``--discovery.kubernetes``, until
the management cluster's Secrets were listed once (before that a ``secret://`` reference
looks unknown to ``POST /clusters``); with ``--cd.flux`` or ``--cd.argocd``, until the Flux
and Argo CD objects were listed once (before that ``GET /apps`` lacks them, and a rolling
update would hand the work to a replica that knows none of them). An API that fails later
does not make the reactor unready: it keeps what it has. Whether this replica acts on the
objects (leader election) is no part of readiness: every replica serves the API. Both are
GETs, so the bearer token never guards them.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from fleetwatch.common.landing import landing_page
from reactor.apidiscovery import API_DISCOVERY
from reactor.cd.setup import CD_ACTUATOR
from reactor.context import BACKEND
from reactor.service import Service
from reactor.store import StoreUnavailable

log = logging.getLogger(__name__)

#: How long ``/-/ready`` waits for the database before it says "not ready".
READY_TIMEOUT_S = 2.0


async def get_healthy(request: web.Request) -> web.Response:
    return web.Response(text="fleetwatch reactor is healthy.\n")


async def get_ready(request: web.Request) -> web.Response:
    backend = request.app[BACKEND]
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):  # not wait_for: fleetwatch.common.waits
            await backend.read(ping)
    except StoreUnavailable as exc:
        # The reason (host, file, driver error) goes to the log, once per outage.
        backend.unavailable.refused_call("GET /-/ready", exc)
        return _not_ready(f"{exc.public}.")
    except TimeoutError:
        return _not_ready(f"the database did not answer within {READY_TIMEOUT_S:g}s.")
    secrets = request.app[API_DISCOVERY]
    if secrets is not None and not secrets.listed:
        return _not_ready("the first list of the management cluster's Secrets has not completed.")
    cd = request.app.get(CD_ACTUATOR)
    if cd is not None and not cd.informer.synced:
        return _not_ready("the first list of the Flux and Argo CD objects has not completed.")
    return web.Response(text="fleetwatch reactor is ready.\n")


def _not_ready(why: str) -> web.Response:
    return web.Response(
        status=503,
        text=f"fleetwatch reactor is not ready: {why}\n",
        headers={"Retry-After": "1"},
    )


def ping(service: Service) -> None:
    """One trivial query, on the thread that owns the store handle."""
    service.store.ping()


_INDEX = landing_page(
    "fleetwatch reactor",
    "Degrades and restores the apps of clusters that go down, from Alertmanager's "
    "notifications, and gates deployments to them.",
    [
        ("/clusters", "clusters, their status and open outage"),
        ("/apps", "apps and their status"),
        ("/openapi.json", "the API's OpenAPI document"),
        ("/metrics", "the reactor's own metrics"),
        ("/-/healthy", "200 while the process serves"),
        ("/-/ready", "200 while the database answers"),
    ],
)


async def get_index(request: web.Request) -> web.Response:
    return web.Response(body=_INDEX, content_type="text/html")


def add_health_routes(app: web.Application) -> None:
    app.router.add_get("/", get_index)
    app.router.add_get("/-/healthy", get_healthy)
    app.router.add_get("/-/ready", get_ready)
