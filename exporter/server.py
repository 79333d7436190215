"""The exporter's HTTP side: ``/metrics``, ``/healthz``, ``/sd/control-plane``.

``create_app`` builds the aiohttp application; the probe side (the Secrets' list+watch,
the monitor and its cycles) is owned by ``cleanup_ctx`` (started with the app, stopped
and awaited on shutdown, so SIGTERM ends cleanly), and runs on an event loop of its own
in a thread (``exporter.loopthread``): at fleet scale a turn of that loop (a thousand TLS
handshakes, a burst of watch events) can last hundreds of milliseconds, and a scrape on
the same loop waited for it. Handlers only send bytes that the last cycle rendered, handed
over as one reference (``RENDERED``, swapped whole by the probe side, read whole by the
handlers): a scrape never waits for a probe, and a failed probe is a sample, never an
HTTP error. The bodies are kept
gzipped only (``exporter.expose.render.Body``): a client that accepts gzip (Prometheus does)
gets those bytes, another one the plain text, decompressed as it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from exporter.checks import ClusterCheck
from exporter.cycle import DiscoverySource, Monitor
from exporter.expose.render import CONTENT_TYPE, Body, Rendered, render
from exporter.expose.snapshot import Snapshot
from exporter.looplag import LoopLag
from exporter.loopthread import LoopThread
from exporter.model import CycleSettings
from exporter.net import install_patches, remove_temp_files
from exporter.secretsource import SecretSource
from exporter.settings import ExporterSettings
from fleetwatch.common.landing import landing_page
from fleetwatch.common.version import register_process_metrics
from fleetwatch.common.webconfig import WebConfig
from fleetwatch.common.webguard import add_headers, guard_middlewares
from fleetwatch.discovery import Discoverer
from fleetwatch.discovery.apimetrics import InformerCollector
from fleetwatch.discovery.apisource import build_informer
from fleetwatch.discovery.settle import SETTLE_SECONDS
from fleetwatch.discovery.shard import shard_pair
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.kube.objects import KubeObject

log = logging.getLogger(__name__)

MONITOR: web.AppKey[Monitor] = web.AppKey("monitor", Monitor)
#: one slot holding what the last publication rendered: the probe side replaces
#: ``[0]`` whole (one reference stored, atomic between threads), the handlers read it once
RENDERED: web.AppKey[list[Rendered]] = web.AppKey("rendered", list)
#: the list+watch of the management cluster's Secrets (``--discovery.kubernetes``), or None
INFORMER: web.AppKey[Informer[KubeObject] | None] = web.AppKey("informer", Informer)
#: the probe side's event loop's lag timer (``fleetwatch_exporter_event_loop_lag_seconds``)
LOOP_LAG: web.AppKey[LoopLag] = web.AppKey("loop_lag", LoopLag)
#: How long the first cycle waits for the management cluster's first list.
FIRST_LIST_WAIT_S = 30.0
#: How long a stopping exporter waits for its probe side to close its connections and
#: kill its exec plugins; past it (its loop held) the process exits without.
PROBE_SIDE_STOP_S = 10.0

_INDEX = landing_page(
    "fleetwatch exporter",
    "Probes the API servers of a fleet of Kubernetes clusters and publishes their health.",
    [
        ("/metrics", "the fleet's health gauges and the exporter's own metrics"),
        ("/-/healthy", "200 while the process serves"),
        ("/-/ready", "200 once the first probe cycle has ended"),
        ("/sd/control-plane", "control-plane scrape targets (Prometheus HTTP SD)"),
    ],
)


def create_app(
    settings: ExporterSettings,
    *,
    checks: Sequence[ClusterCheck] = (),
    routes: Sequence[web.AbstractRouteDef] = (),
    discovery: DiscoverySource | None = None,
    run_loop: bool = True,
    web_config: WebConfig | None = None,
    after_cycle: Callable[[], None] | None = None,
) -> web.Application:
    """The exporter application.

    ``checks`` run per cluster after each probe (the extension seam, ``exporter.checks``);
    ``routes`` are mounted as given (extra endpoints of those checks). ``discovery``
    replaces the kubeconfig scan (tests); ``run_loop=False`` leaves cycles to the caller
    (``await app[MONITOR].run_cycle()``), for tests that want one cycle at a time.
    ``web_config``: ``--web.config.file``; its basic auth, allowed SANs and headers apply
    to every path (its TLS part is the server's: ``fleetwatch exporter`` hands it to
    aiohttp). ``after_cycle``: called when each cycle of the loop has ended (the process's
    collector policy).
    """
    install_patches()  # the kubernetes client's, once, before any credential is built
    app = web.Application(middlewares=guard_middlewares(web_config))
    add_headers(app, web_config)
    # Build info and the process collectors, on a registry of this app's own.
    process = register_process_metrics(CollectorRegistry())
    lag = LoopLag()
    process.register(lag)
    app[LOOP_LAG] = lag
    slot: list[Rendered] = [render_with(process, _empty(settings))]
    app[RENDERED] = slot

    shard = shard_pair(settings.shard)
    cluster_labels = not settings.metric_labels_allowlist.empty

    async def publish(snap: Snapshot) -> None:
        # Rendering 10k clusters takes tens of ms of CPU: keep it off the event loop.
        snap = dataclasses.replace(snap, shard=shard, cluster_labels=cluster_labels)
        slot[0] = await asyncio.to_thread(render_with, process, snap, slot[0])

    informer: Informer[KubeObject] | None = None
    kubeapi: KubeApi | None = None
    if discovery is None and settings.kubernetes is not None:
        # Files unsharded (fleet_size counts the whole fleet); the merge applies the shard.
        kubeapi, informer = build_informer(settings.kubernetes)
        files = Discoverer(
            settings.kubeconfig_path,
            settings.kubeconfig_dir,
            settle_s=SETTLE_SECONDS,
            allowlist=settings.metric_labels_allowlist,
        )

        def cycles_done() -> int:  # the monitor below, read at each scan
            return monitor.stats.cycles_total

        discovery = SecretSource(
            files,
            informer,
            settings.kubernetes,
            settings.shard,
            cycles_done=cycles_done,
            allowlist=settings.metric_labels_allowlist,
        )
        process.register(InformerCollector(informer, settings.kubernetes.label_selector))
    app[INFORMER] = informer
    monitor = Monitor(
        CycleSettings(
            settings.interval,
            settings.timeout,
            settings.concurrency,
            max_idle_connections=settings.max_idle_connections,
        ),
        discovery
        or Discoverer(
            settings.kubeconfig_path,
            settings.kubeconfig_dir,
            shard=settings.shard,
            settle_s=SETTLE_SECONDS,
            allowlist=settings.metric_labels_allowlist,
        ),
        publish,
        checks,
        after_cycle=after_cycle,
    )
    app[MONITOR] = monitor

    async def first_list_then_cycles() -> None:
        """The first cycle waits for the management cluster's first list (a while at
        most: the files' clusters are not held hostage by an API that is down); if it
        comes later, a cycle starts then rather than an interval later."""
        wake: asyncio.Task[None] | None = None
        if informer is not None and not await informer.wait_synced(FIRST_LIST_WAIT_S):
            log.warning(
                "the management cluster's Secrets are not listed after %gs: probing the "
                "files' clusters meanwhile",
                FIRST_LIST_WAIT_S,
            )

            async def wake_when_listed() -> None:
                await informer.wait_synced(float("inf"))
                monitor.wake()

            wake = asyncio.create_task(wake_when_listed(), name="fleetwatch first list")
        try:
            await monitor.run_forever()
        finally:
            if wake is not None:
                wake.cancel()

    @contextlib.asynccontextmanager
    async def probe_side() -> AsyncIterator[None]:
        """Everything that probes, on the loop it is entered on: the lag timer, the
        informer's session and reflector tasks, the monitor and (``run_loop``) its
        cycles; each stopped and awaited in the reverse order on exit."""
        timer = asyncio.create_task(lag.run(), name="fleetwatch event loop lag")
        try:
            async with contextlib.AsyncExitStack() as stack:
                if informer is not None and kubeapi is not None:
                    await stack.enter_async_context(kubeapi)
                    await stack.enter_async_context(informer)
                # the monitor's exit kills exec plugins in flight, with their children
                await stack.enter_async_context(monitor)
                task: asyncio.Task[None] | None = None
                if run_loop:
                    task = asyncio.create_task(
                        first_list_then_cycles(), name="fleetwatch probe loop"
                    )
                    task.add_done_callback(_log_crash)
                try:
                    yield
                finally:
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
            remove_temp_files()
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def probes(app: web.Application) -> AsyncIterator[None]:
        """The probe side, owned by the app. With ``run_loop`` on a loop of its own in a
        thread (``exporter.loopthread``): a scrape never waits for a probe, a watch event
        or a handshake, only for the interpreter's lock; stopped (and its connections
        closed) before the app's loop ends. Without, on the app's loop, for tests that
        run cycles themselves."""
        if not run_loop:
            async with probe_side():
                yield
            return
        thread = LoopThread(probe_side, "fleetwatch probes")
        await thread.start()
        try:
            yield
        finally:
            await thread.stop(PROBE_SIDE_STOP_S)

    app.cleanup_ctx.append(probes)
    app.router.add_get("/", _index)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/-/healthy", _healthz)
    app.router.add_get("/-/ready", _ready)
    app.router.add_get("/sd/control-plane", _sd_control_plane)
    app.router.add_routes(routes)
    return app


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the probe loop stopped: %r", task.exception())


def render_with(
    process: CollectorRegistry, snap: Snapshot, previous: Rendered | None = None
) -> Rendered:
    """One cycle's answers, the process collectors' samples of this moment appended;
    what did not change since ``previous`` is taken from it."""
    return render(snap, generate_latest(process), previous=previous)


def _empty(settings: ExporterSettings) -> Snapshot:
    return Snapshot(
        (), (), (), 0, 0, 0.0, 0.0, settings.interval, settings.timeout, shard_pair(settings.shard)
    )


async def _index(request: web.Request) -> web.Response:
    return web.Response(body=_INDEX, content_type="text/html")


async def _metrics(request: web.Request) -> web.StreamResponse:
    return await _send(request, request.app[RENDERED][0].metrics, CONTENT_TYPE)


async def _send(request: web.Request, body: Body, content_type: str) -> web.StreamResponse:
    """``body`` as kept (gzip) when the client accepts it, else decompressed as it is sent."""
    headers = {"Content-Type": content_type, "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return web.Response(body=body.gzip, headers=headers)
    response = web.StreamResponse(headers=headers)
    response.content_length = body.size
    await response.prepare(request)
    if request.method != "HEAD":
        # 256 KiB at a time (about half a millisecond each): the loop serves in between.
        for chunk in body.chunks():
            await response.write(chunk)
    await response.write_eof()
    return response


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


#: Probe intervals without a completed cycle after which the exporter reads as stalled.
STALL_INTERVALS = 3


def stalled_for(last_cycle_end: float, interval: float, now: float) -> float | None:
    """Seconds since the last cycle ended, when that is over ``STALL_INTERVALS`` intervals.

    A cycle ends about one timeout (at most one interval) after it starts, so three
    intervals without one means cycles stopped: ``/metrics`` would be serving old values.
    """
    age = now - last_cycle_end
    return age if last_cycle_end > 0 and age > STALL_INTERVALS * interval else None


async def _ready(request: web.Request) -> web.Response:
    """503 until the management cluster's Secrets were listed once (with
    ``--discovery.kubernetes``) and the first cycle is served (before it, /metrics holds no
    cluster), and while no cycle has completed for ``STALL_INTERVALS`` intervals (stalled).

    Both are read from the bodies ``/metrics`` serves, not from the cycle's own counters:
    a cycle is counted before its rendering (in a worker thread) is served, and a scraper
    told "ready" must find the cycle's results there."""
    monitor = request.app[MONITOR]
    informer = request.app[INFORMER]
    if informer is not None and not informer.synced:
        return web.Response(
            status=503,
            text="fleetwatch exporter is not ready: the first list of the management "
            "cluster's Secrets has not completed.\n",
            headers={"Retry-After": "1"},
        )
    served = request.app[RENDERED][0]
    source = request.app[MONITOR].discovery
    first = source.first_complete_cycle if isinstance(source, SecretSource) else 0
    if first is None or served.cycles_total < first:
        return web.Response(
            status=503,
            text="fleetwatch exporter is not ready: no cycle with the management cluster's "
            "Secrets has completed yet.\n",
            headers={"Retry-After": "1"},
        )
    if served.cycles_total == 0:
        return web.Response(
            status=503,
            text="fleetwatch exporter is not ready: the first probe cycle has not completed.\n",
            headers={"Retry-After": "1"},
        )
    stalled = stalled_for(served.last_cycle_end, monitor.settings.interval, time.time())
    if stalled is not None:
        return web.Response(
            status=503,
            text=(
                f"fleetwatch exporter is stalled: no probe cycle has completed for "
                f"{stalled:.0f}s ({STALL_INTERVALS} intervals of {monitor.settings.interval:g}s "
                "is the limit); /metrics holds old values.\n"
            ),
        )
    return web.Response(text="fleetwatch exporter is ready.\n")


async def _sd_control_plane(request: web.Request) -> web.StreamResponse:
    return await _send(request, request.app[RENDERED][0].sd_control_plane, "application/json")
