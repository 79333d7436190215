"""HTTP handlers of the reactor API (documented in docs/reactor.md, "API").

Handlers parse and check their input at the edge (precise 400 messages), then run one
:class:`reactor.service.Service` operation on the store thread. The middleware turns the
service's errors into statuses: NotFound 404, Conflict/Gated 409, StoreUnavailable 503
(with ``Retry-After``: the only 5xx, because a retry can help); every error body is
``{"error": "..."}``, and every answer is written by ``reactor.api.responses``. Nothing
refused has changed anything: validation precedes the transaction; a refused one rolls back.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.foreground import FOREGROUND
from fleetwatch.common.prerendered import exposition
from fleetwatch.discovery import probeable
from reactor import fields, models
from reactor.alertmanager.signals import (
    PayloadError,
    clip,
    is_name,
    load_json_object,
    parse_webhook,
    status_signals,
)
from reactor.api.auth import TOKEN
from reactor.api.openapi import openapi_document
from reactor.api.responses import answer, app_json, cluster_json, error, list_response, outage_json
from reactor.apidiscovery import API_DISCOVERY, unprobeable_reason
from reactor.context import BACKEND, METRICS, SETTINGS
from reactor.service import Conflict, Gated, NotFound
from reactor.statemachine import AppStatus
from reactor.store import StoreUnavailable

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Methods that change state: they need the bearer token when one is configured.
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: Bodies above this size are parsed off the event loop.
PARSE_OFF_LOOP_BYTES = 64 * 1024

#: How long a scrape waits for the database's counts before it answers without them.
METRICS_DB_TIMEOUT_S = 2.0

#: True when ``--web.config.file`` has basic-auth users (the document then says so).
BASIC_AUTH = web.AppKey("basic_auth", bool)


class InvalidInput(ValueError):
    """Input the API cannot use; the message goes back with the 400."""


# -- middlewares ----------------------------------------------------------------------


@web.middleware
async def foreground_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Each request but a scrape counts in :data:`~fleetwatch.common.foreground.FOREGROUND`
    while it is answered: the background loops in worker threads (discovery's Secrets, the
    CD pass, a scrape's rendering) give way meanwhile (``fleetwatch.common.foreground``
    says why)."""
    if request.path == "/metrics":  # a scrape is background work (``get_metrics``)
        return await handler(request)
    FOREGROUND.inflight += 1
    try:
        return await handler(request)
    finally:
        FOREGROUND.inflight -= 1


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as JSON with the right status; 5xx only when a retry can help."""
    try:
        return await handler(request)
    except InvalidInput as exc:
        return error(400, str(exc))
    except NotFound as exc:
        return error(404, str(exc))
    except Gated as exc:
        refusal = exc.refusal
        return error(409, refusal.message, cluster=refusal.cluster, status=refusal.status.value)
    except Conflict as exc:
        return error(409, str(exc))
    except StoreUnavailable as exc:
        # The reason (host, file, driver error) goes to the log, not to whoever asked.
        request.app[BACKEND].unavailable.refused_call(f"{request.method} {request.path}", exc)
        return error(503, f"{exc.public}, retry later", {"Retry-After": "1"})
    except web.HTTPRequestEntityTooLarge:
        return error(413, too_large(request))
    except web.RequestPayloadError:
        return error(400, UNREADABLE)
    except web.HTTPException as exc:
        if exc.status >= 400:
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            return error(exc.status, exc.reason, headers)
        raise
    except Exception:
        # A bug, not bad input: say so, keep the traceback in the log, not in the answer.
        log.exception("internal error on %s %s", request.method, request.path)
        return error(500, "internal error (see the reactor's log)")


def too_large(request: web.Request) -> str:
    limit = request.app[SETTINGS].max_body_bytes
    return f"body too large: the limit is {limit} bytes (--web.max-body-bytes)"


#: The answer when aiohttp cannot read a body (a chunked transfer cut short or malformed).
UNREADABLE = "the body cannot be read: its transfer was cut short or malformed"


def auth_problem(header: str, token: str) -> str | None:
    """None when ``header`` carries ``token``, else why not (never echoing what was sent).

    aiohttp hands over header bytes that are not UTF-8 as surrogate escapes, which plain
    ``encode()`` refuses: ``surrogatepass`` makes them bytes that never equal a token.
    """
    if not header:
        return "no Authorization header"
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer":
        return "Authorization is not 'Bearer <token>'"
    sent = credentials.strip().encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(sent, token.encode("utf-8", "surrogatepass")):
        return "wrong bearer token"
    return None


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With a token configured, mutating calls need ``Authorization: Bearer <token>``.

    A refused notification is logged (the API's callers see the 401 themselves; Alertmanager
    only re-sends, so the reactor's log is where a stale credentials_file shows).
    """
    token = request.app[TOKEN].current() if request.method in MUTATING else None
    if token is not None:
        problem = auth_problem(request.headers.get("Authorization", ""), token)
        if problem is not None:
            if request.path == "/alerts":
                request.app[METRICS].notifications.labels("unauthorized").inc()
                log.warning(
                    "POST /alerts refused (401): %s; check the webhook's "
                    "http_config.authorization in Alertmanager",
                    problem,
                )
            return error(
                401,
                "missing or wrong bearer token",
                {"WWW-Authenticate": 'Bearer realm="fleetwatch"'},
            )
    return await handler(request)


# -- input ----------------------------------------------------------------------------


async def read_object(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object (what it is then is the model's to say)."""
    try:
        return load_json_object(await read_body(request))
    except PayloadError as exc:
        raise InvalidInput(str(exc)) from None


def check(model: Any, doc: dict[str, Any]) -> Any:
    """``doc`` as one of reactor.models' request models, else a 400 saying why."""
    try:
        return models.validate(model, doc)
    except fields.Problem as exc:
        raise InvalidInput(str(exc)) from None


async def read_body(request: web.Request) -> bytes:
    """The body, decoded as its Content-Encoding says; :class:`PayloadError` if it cannot be.

    The decoded size is held to ``--web.max-body-bytes`` too (413), so a small gzip bomb
    cannot grow into gigabytes.
    """
    try:
        raw = await request.read()
    except web.RequestPayloadError:
        raise PayloadError(UNREADABLE) from None
    coding = request.headers.get("Content-Encoding", "").strip().lower()
    if coding in ("", "identity"):
        return raw
    if coding not in DECODERS:
        raise PayloadError(
            f"Content-Encoding {clip(coding, 20)!r} is not supported: gzip, deflate or none"
        )
    limit = request.app[SETTINGS].max_body_bytes
    if len(raw) > PARSE_OFF_LOOP_BYTES:
        return await asyncio.to_thread(decode, raw, coding, limit)
    return decode(raw, coding, limit)


#: Content codings :func:`read_body` decodes, and zlib's window bits for each.
DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def decode(raw: bytes, coding: str, limit: int) -> bytes:
    """``raw`` decoded from ``coding``; at most ``limit`` bytes (else 413)."""
    decoder = zlib.decompressobj(DECODERS[coding])
    try:
        body = decoder.decompress(raw, limit + 1)
    except zlib.error:
        raise PayloadError(f"the body is not {coding} data as its Content-Encoding says") from None
    if len(body) > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=len(body))
    if not decoder.eof:
        raise PayloadError(f"the body is {coding} data cut short")
    return body


def path_name(request: web.Request, what: str) -> str:
    """The ``{name}`` of the path; one that no cluster or app can have is a 404 at once.

    Checked here, not by the database: PostgreSQL refuses a NUL in a text parameter
    (psycopg.DataError), which would answer ``GET /clusters/%00`` with a 500.
    """
    name = request.match_info["name"]
    if not is_name(name):
        raise NotFound(f"{what} {clip(name)!r} not found")
    return name


# -- handlers -------------------------------------------------------------------------


async def post_alerts(request: web.Request) -> web.Response:
    metrics = request.app[METRICS]
    try:
        body = await read_body(request)
        if len(body) > PARSE_OFF_LOOP_BYTES:
            webhook = await asyncio.to_thread(parse_webhook, body)
        else:
            webhook = parse_webhook(body)
    except PayloadError as exc:
        metrics.notifications.labels("rejected").inc()
        log.warning("POST /alerts refused (400): %s", exc)
        return error(400, str(exc))
    except web.HTTPRequestEntityTooLarge:
        metrics.notifications.labels("rejected").inc()
        log.warning("POST /alerts refused (413): %s", too_large(request))
        raise
    found = status_signals(webhook, max_future_skew_s=request.app[SETTINGS].max_future_skew_s)
    if found.skipped:
        shown = "; ".join(found.skipped[:3])
        more = f" (and {len(found.skipped) - 3} more)" if len(found.skipped) > 3 else ""
        log.info("notification: skipped %d alert(s): %s%s", len(found.skipped), shown, more)
    try:
        result = await request.app[BACKEND].run(lambda s: s.apply_signals(found.signals))
    except StoreUnavailable:
        metrics.notifications.labels("error").inc()
        raise
    if result.outages_moved:
        request.app[BACKEND].changed()  # the CD actuator pauses or resumes now
    metrics.notifications.labels("applied").inc()
    metrics.last_notification.set(time.time())
    return answer(
        "NotificationResult",
        {
            "applied": len(found.signals),
            "skipped": len(found.skipped),
            "clusters_changed": len(result.clusters_changed),
            "outages_opened": result.outages_opened,
            "outages_closed": result.outages_closed,
            "apps_degraded": result.apps_degraded,
            "apps_restored": result.apps_restored,
        },
    )


async def get_clusters(request: web.Request) -> web.Response:
    clusters = await request.app[BACKEND].read(lambda s: s.clusters())
    return await list_response("Cluster", [cluster_json(c) for c in clusters])


async def get_cluster(request: web.Request) -> web.Response:
    """The cluster, with its latest outages (as many as ``--db.retention`` has kept) and its
    apps, each with its source (the API, or the Flux or Argo CD object it mirrors)."""
    name = path_name(request, "cluster")
    cluster, outages, apps = await request.app[BACKEND].read(lambda s: s.cluster_history(name))
    body = {
        **cluster_json(cluster),
        "outages": [outage_json(o) for o in outages],
        "apps": [app_json(a) for a in apps],
    }
    return answer("ClusterDetail", body)


async def post_clusters(request: web.Request) -> web.Response:
    new = check(models.NewCluster, await read_object(request))
    name, endpoint, ref = new.name, new.endpoint, new.kubeconfig_secret_ref
    backend = request.app[BACKEND]
    cluster = await backend.run(lambda s: s.add_cluster(name, endpoint, ref))
    backend.changed()  # the CD objects naming it are mirrored now, not at the next resync
    # A readable kubeconfig file, or a Secret of the management cluster that discovery
    # reads and can probe (--discovery.kubernetes): else it stays UNKNOWN, and the log says why.
    secrets = request.app[API_DISCOVERY]
    held = secrets.held if secrets is not None else frozenset()
    if not await asyncio.to_thread(probeable, ref, held):
        log.warning(
            "cluster %s: kubeconfig_secret_ref %r %s; it cannot be probed and stays UNKNOWN",
            name,
            ref,
            unprobeable_reason(ref, secrets),
        )
    return answer("Cluster", cluster_json(cluster), status=201)


async def delete_cluster(request: web.Request) -> web.Response:
    """Forget a decommissioned cluster; 409 while apps are on it, unless ``?force=true``."""
    name = path_name(request, "cluster")
    force = request.query.get("force", "false")
    if force not in ("true", "false"):
        raise InvalidInput('"force" must be "true" or "false"')
    backend = request.app[BACKEND]
    apps = await backend.run(lambda s: s.delete_cluster(name, force == "true"))
    backend.changed()  # its CD objects leave the mirror now
    return answer("DeletedCluster", {"deleted": name, "apps_deleted": apps})


async def delete_cluster_alerts(request: web.Request) -> web.Response:
    """Clear a cluster's alert state (UNKNOWN again; an open outage closed, its apps back)."""
    name = path_name(request, "cluster")
    result = await request.app[BACKEND].run(lambda s: s.reset_alerts(name))
    if result.outages_moved:
        request.app[BACKEND].changed()  # the CD actuator resumes its apps now
    return answer(
        "ClusterReset",
        {
            "cluster": cluster_json(result.cluster),
            "outages_closed": result.outages_closed,
            "apps_restored": result.apps_restored,
        },
    )


async def get_apps(request: web.Request) -> web.Response:
    apps = await request.app[BACKEND].read(lambda s: s.apps())
    return await list_response("App", [app_json(a) for a in apps])


async def get_app(request: web.Request) -> web.Response:
    name = path_name(request, "app")
    app = await request.app[BACKEND].read(lambda s: s.app(name))
    return answer("App", app_json(app))


async def post_apps(request: web.Request) -> web.Response:
    new = check(models.NewApp, await read_object(request))
    name, cluster = new.name, new.cluster
    app = await request.app[BACKEND].run(lambda s: s.add_app(name, cluster))
    return answer("App", app_json(app), status=201)


async def patch_app(request: web.Request) -> web.Response:
    """One of the shapes of ``models.AppPatch``, told apart by its keys."""
    name = path_name(request, "app")
    doc = await read_object(request)
    backend = request.app[BACKEND]
    if "cluster" in doc:
        if "status" in doc or "reason" in doc:
            raise InvalidInput('give either "cluster" (a reassignment) or "status", not both')
        target = check(models.Reassignment, doc).cluster
        app = await backend.run(lambda s: s.reassign(name, target))
        return answer("App", app_json(app))
    if "status" not in doc:
        raise InvalidInput('give "cluster" (a reassignment) or "status" (a health report)')
    if doc["status"] == AppStatus.DEGRADED.value:
        reason = check(models.DegradedReport, doc).reason
        app = await backend.run(lambda s: s.report(name, AppStatus.DEGRADED, reason))
    elif doc["status"] == AppStatus.DEPLOYED.value:
        check(models.DeployedReport, doc)
        app = await backend.run(lambda s: s.report(name, AppStatus.DEPLOYED, None))
    else:
        raise InvalidInput('"status" must be "DEGRADED" (with a "reason") or "DEPLOYED"')
    return answer("App", app_json(app))


async def post_deployments(request: web.Request) -> web.Response:
    doc = await read_object(request)
    try:
        name, cluster = models.deployment(doc)  # models.Deployment, its usual body faster
    except fields.Problem as exc:
        raise InvalidInput(str(exc)) from None
    app = await request.app[BACKEND].deploy(name, cluster)
    return answer("App", app_json(app), status=201)


async def get_healthz(request: web.Request) -> web.Response:
    return answer("Liveness", {"status": "ok"})


async def get_metrics(request: web.Request) -> web.Response:
    """From memory when the database cannot give its counts (``reactor.metrics``)."""
    metrics = request.app[METRICS]
    try:
        read = request.app[BACKEND].read(lambda s: s.counts())
        async with asyncio.timeout(METRICS_DB_TIMEOUT_S):  # not wait_for: common.waits
            metrics.status.counts = await read
    except (StoreUnavailable, TimeoutError) as exc:
        metrics.status.counts = None
        log.debug("/metrics without the database's counts: %s", exc or "timed out")
    # Off the event loop, as background work: with the CD objects' gauge per cluster (1,000
    # clusters with Flux and Argo CD objects: 6,000 series, 0.5 MB) a rendering takes 40-90
    # ms of CPU, which requests answered meanwhile would wait out (bench/reactor_lists). A
    # scrape can wait a few milliseconds; a webhook should not. That gauge is rendered
    # again only when a CD pass changed it (common.prerendered).
    body = await in_background(exposition, metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def get_openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document(basic=request.app[BASIC_AUTH]))


def add_routes(app: web.Application) -> None:
    app.router.add_post("/alerts", post_alerts)
    app.router.add_get("/clusters", get_clusters)
    app.router.add_post("/clusters", post_clusters)
    # A name holding "/" is sent percent-encoded (%2F), and routes match the path as sent:
    # so "/clusters/x/alerts" is only the alerts route (its 405 lists DELETE alone).
    app.router.add_delete("/clusters/{name:[^/]+}/alerts", delete_cluster_alerts)
    app.router.add_get("/clusters/{name:.+(?<!/alerts)}", get_cluster)
    app.router.add_delete("/clusters/{name:.+(?<!/alerts)}", delete_cluster)
    app.router.add_get("/apps", get_apps)
    app.router.add_post("/apps", post_apps)
    app.router.add_get("/apps/{name:.+}", get_app)
    app.router.add_patch("/apps/{name:.+}", patch_app)
    app.router.add_post("/deployments", post_deployments)
    app.router.add_get("/healthz", get_healthz)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/openapi.json", get_openapi)
