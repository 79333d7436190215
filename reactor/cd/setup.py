"""The CD integration in the reactor's app: its metrics, client, informer, election, actuator.

:func:`setup_cd` is called by ``reactor.app.create_app`` after the store's and the
reconciliation's ``cleanup_ctx``: the actuator starts once the store is open and is
cancelled (and awaited) before it closes. Inside, in order: the management cluster's
credentials (``--cd.kubeconfig``, else in-cluster, else ``KUBECONFIG``: an error here
stops the start with its reason), one client (:class:`~reactor.cd.kubewrite.KubeWriter`)
for the Lease and the patches, the objects of the kinds turned on (listed and watched by
the CD objects process, ``reactor.cd.objectlink``; with ``--no-cd.process`` by an
informer here, on that client), the leader elector (``--cd.leader-election``, not in a
dry run) and the actuator as named tasks, the actuator woken by the objects' changes (a
second task forwards them), by
the backend's writes that move apps in or out of an outage, and by a change of
leadership. On a clean stop the actuator stops first, then the Lease is released, so the
next replica takes over at its next try.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from fleetwatch.kube.informer import Informer
from reactor.apidiscovery import API_DISCOVERY
from reactor.cd.actuator import CdActuator
from reactor.cd.election import LeaderElector, LeaderMetrics, lease_namespace
from reactor.cd.kubewrite import KubeWriter
from reactor.cd.metrics import CdMetrics
from reactor.cd.objectlink import ObjectsProcess
from reactor.cd.ports import WatchedObjects
from reactor.cd.settings import CdSettings
from reactor.cd.watch import cd_watches, credentials_of, stored
from reactor.context import BACKEND, METRICS

log = logging.getLogger(__name__)

CD_ACTUATOR = web.AppKey("cd_actuator", CdActuator)


async def forward(informer: WatchedObjects, wake: asyncio.Event) -> None:
    """Wake the actuator whenever the informer stores or drops an object."""
    generation = informer.generation
    while True:
        generation = await informer.changed(generation)
        wake.set()


def setup_cd(app: web.Application, settings: CdSettings | None) -> None:
    """Register the CD integration when ``settings`` turn it on (module docstring)."""
    if settings is None or not settings.enabled:
        return
    metrics = CdMetrics(app[METRICS].registry)
    metrics.describe_settings(settings.resync_interval_s, settings.argocd_pause, settings.dry_run)
    election = None if settings.dry_run else settings.leader_election
    leader_metrics = LeaderMetrics(app[METRICS].registry) if election is not None else None

    async def cd(app: web.Application) -> AsyncIterator[None]:
        credentials = credentials_of(settings)
        backend = app[BACKEND]
        wake = asyncio.Event()
        api = KubeWriter(credentials, request_timeout=settings.request_timeout_s)
        async with api:
            informer: WatchedObjects
            if settings.process:
                informer = ObjectsProcess(settings)
            else:
                informer = Informer(api, cd_watches(settings), settings.informer, transform=stored)
            metrics.watch_up.set_function(lambda: 1.0 if informer.up else 0.0)
            elector = None
            if election is not None and leader_metrics is not None:
                namespace = lease_namespace(election)
                elector = LeaderElector(api, election, namespace, leader_metrics)
            secrets = app.get(API_DISCOVERY)
            actuator = CdActuator(
                backend.for_background(),  # its reads: a thread of their own
                informer,
                api,
                settings,
                metrics,
                wake,
                leader=elector,
                discovered=secrets.for_mirror if secrets is not None else lambda: ({}, {}),
                instance=elector.identity if elector is not None else None,
            )
            if elector is not None:
                elector.listeners.append(actuator.leadership_changed)
            app[CD_ACTUATOR] = actuator
            backend.outage_listeners.append(actuator.outages_moved)
            log.info(
                "cd: %s of %s (%s), resync every %gs%s%s%s",
                " and ".join(k.kind for k in settings.kinds),
                credentials.server,
                credentials.origin,
                settings.resync_interval_s,
                ", Argo CD paused on its cluster Secrets" if settings.pause_cluster_secrets else "",
                ", dry run: nothing is written" if settings.dry_run else "",
                f", one replica acts at a time ({elector.where})" if elector else "",
            )
            async with informer:
                tasks = [
                    asyncio.create_task(actuator.run(), name="fleetwatch-cd-actuator"),
                    asyncio.create_task(forward(informer, wake), name="fleetwatch-cd-changes"),
                ]
                if elector is not None:
                    tasks.append(asyncio.create_task(elector.run(), name="fleetwatch-cd-lease"))
                try:
                    yield
                finally:
                    backend.outage_listeners.remove(actuator.outages_moved)
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    if elector is not None:
                        await elector.release()

    app.cleanup_ctx.append(cd)
