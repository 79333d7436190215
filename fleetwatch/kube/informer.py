"""Objects of any kind kept current by list+watch, as client-go's informers do.

One :class:`Reflector` per :class:`Watched` collection (a path and its selectors): the
Secrets of discovery's three kinds, one per namespace given (their specs are
``fleetwatch.discovery.secretwatch``'s, which knows the kinds), or the CD objects
(``reactor.cd.watch``). :class:`Informer` runs them as its own named tasks and merges
their objects by ``uid``; it knows no kind.

How each list+watch runs (paging, resume, relist on 410, the backoff after a failed round,
events out of order) is ``fleetwatch.kube.reflector``'s: one implementation for these Secrets and
the CD objects alike.

:attr:`Informer.synced` is true once every reflector completed a first list (the
exporter's ``/-/ready``); :attr:`Informer.up` while none is failing. Problems (a namespace
forbidden, a bad token) are readable as :meth:`Informer.problems` and logged once when
they appear, at WARNING; nothing of a Secret's data is ever logged.

I/O (asyncio): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Generic

from fleetwatch.kube.objects import KubeObject, Stored, slim
from fleetwatch.kube.reflector import Api, InformerSettings, Reflector, Watched

__all__ = ["BESIDE_REQUESTS", "Api", "Informer", "InformerSettings", "Reflector", "Watched"]

log = logging.getLogger(__name__)

#: client-go's pace (``fleetwatch.kube.reflector.InformerSettings``)
DEFAULTS = InformerSettings()

#: The pace of informers in a process that answers requests in the same interpreter (the
#: reactor). A list is background work: its pages are read at most a quarter of the time,
#: each followed by a pause three times as long as it took, and their transforms run in a
#: worker thread that gives way to requests, not on the loop in slices. An API server
#: answers a page of 500 Secrets in tens of milliseconds; read back to back, every
#: informer's pages (TLS reads, decodes, transforms) came at once with discovery's and the
#: CD mirror's work on them, and at 20,000 Secrets and 10,000 Flux and Argo CD objects the
#: reactor's webhooks and deployments waited 30-90 ms at p99 through its first list: 9-11
#: ms with the pause; the transforms off the loop took a relist's p99 from 8.7-11.1 to
#: 6.6-9.6 ms (bench/reactor_lists, bench/RESULTS.md). The first list takes longer (that
#: fleet ready in 13-19 s instead of 9), and the API server is spared the burst.
BESIDE_REQUESTS = InformerSettings(list_pause=3.0, transform_off_loop=True)

#: ``fleetwatch.kube.objects.slim`` as the default transform of an informer of any stored
#: type (discovery's Secrets: nothing read from them needs what it drops).
_SLIM: Callable[[KubeObject], Any] = slim


class Informer(Generic[Stored]):
    """Every :class:`Watched` collection's reflector, run as owned tasks, merged by ``uid``.

    ``async with`` starts them, leaving cancels and awaits them (or :meth:`run` until
    cancelled). :meth:`objects` is what the exporter reads each cycle.
    """

    def __init__(
        self,
        api: Api,
        specs: Iterable[Watched],
        settings: InformerSettings = DEFAULTS,
        *,
        rng: random.Random | None = None,
        transform: Callable[[KubeObject], Stored] = _SLIM,
    ) -> None:
        self.settings = settings
        self.reflectors = [
            Reflector(api, spec, settings, on_change=self._changed, rng=rng, transform=transform)
            for spec in specs
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self._generation = 0
        self._merged: tuple[int, dict[str, Stored]] = (-1, {})
        self._change = asyncio.Event()

    def __repr__(self) -> str:
        return f"Informer({len(self.reflectors)} reflectors, synced={self.synced})"

    def _changed(self) -> None:
        self._generation += 1
        self._change.set()

    @property
    def generation(self) -> int:
        """Grows whenever an object is stored or dropped (cheap change detection)."""
        return self._generation

    @property
    def synced(self) -> bool:
        """Every reflector completed a first list."""
        return all(r.synced for r in self.reflectors)

    @property
    def up(self) -> bool:
        """No reflector is failing now."""
        return all(r.up for r in self.reflectors)

    @property
    def last_sync(self) -> float:
        """The oldest reflector's last good contact (unix time; 0 before the first)."""
        return min((r.last_sync for r in self.reflectors), default=0.0)

    def problems(self) -> list[str]:
        return [r.problem for r in self.reflectors if r.problem is not None]

    def errors(self) -> Counter[str]:
        return sum((r.errors for r in self.reflectors), Counter())

    def restarts(self) -> Counter[str]:
        return sum((r.restarts for r in self.reflectors), Counter())

    def objects(self) -> dict[str, Stored]:
        """Every object any reflector holds, by ``uid`` (rebuilt only after a change)."""
        generation, merged = self._merged
        if generation != self._generation:
            merged = {}
            for reflector in self.reflectors:
                merged.update(reflector.store)
            self._merged = (self._generation, merged)
        return merged

    async def run(self) -> None:
        """Run every reflector until cancelled (a reflector never ends of itself)."""
        async with self:
            await asyncio.gather(*self._tasks)

    async def __aenter__(self) -> Informer[Stored]:
        for i, reflector in enumerate(self.reflectors):
            name = f"fleetwatch-informer-{i}-{reflector.spec.kind}"
            self._tasks.append(asyncio.create_task(reflector.run(), name=name))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def changed(self, generation: int) -> int:
        """Wait until :attr:`generation` is no longer ``generation``, and return it (the
        reactor's upserts wait here: no poll, no wake-up while nothing changes)."""
        while self._generation == generation:
            self._change.clear()
            await self._change.wait()
        return self._generation

    async def wait_synced(
        self,
        timeout: float,  # noqa: ASYNC109 (a poll's deadline)
        give_up_after: int | None = None,
    ) -> bool:
        """Poll until :attr:`synced`, up to ``timeout`` seconds (tests, start-up).

        ``give_up_after``: return (False) as soon as every reflector not synced yet has
        failed that many times in a row (``fleetwatch discover``: a 403 is not worth
        waiting out the timeout; one error followed by a good answer is).
        """
        deadline = time.monotonic() + timeout
        while not self.synced:
            if time.monotonic() > deadline:
                return False
            if give_up_after is not None and all(
                r.failures >= give_up_after for r in self.reflectors if not r.synced
            ):
                return False
            await asyncio.sleep(0.02)
        return True
