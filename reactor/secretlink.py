"""Where the reactor's Secret clusters come from: its discovery process, or an informer of
its own.

:class:`SecretsProcess` (the default of ``fleetwatch reactor``): ``reactor.secretchild``
lists, watches and reads the Secrets in a process of its own and sends the slim fleet's
differences (``reactor.secretfleet``); this side decodes them in small pieces on the event
loop and hands each whole diff to ``reactor.apidiscovery``. A process that ends or hangs
is started again (``reactor.childproc``); its first diff is whole, and the reactor
publishes it only once it is synced (``ApiDiscovery``), so what it holds never shrinks to
a half-listed fleet. The list+watch's health (``fleetwatch.discovery.apimetrics``) is the
process's last report, ``up`` 0 while no process runs; its counters go on across restarts.

:class:`InlineSecrets`: the informer in the reactor's own process, its reads in a worker
thread (``--no-discovery.kubernetes.process``, and tests that read its log lines).

I/O (a child process, the informer).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.discovery import Discovery
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.objects import KubeObject
from reactor.childproc import HEARTBEAT_S, SILENT_S, Supervised, after_burst, log_settings
from reactor.secretchild import ChildStart, Health
from reactor.secretfleet import DiffBuilder, FleetDiff, FleetReader, files_for_reader

log = logging.getLogger(__name__)

__all__ = ["HEARTBEAT_S", "SILENT_S", "FleetSource", "InlineSecrets", "SecretsProcess"]


class FleetSource(Protocol):
    """What ``reactor.apidiscovery.ApiDiscovery`` reads its Secret clusters from."""

    #: the start-up file scan, merged first (set before the source is entered)
    files: Discovery

    async def __aenter__(self) -> FleetSource: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def next(self) -> FleetDiff:
        """The next difference (the first one whole), once the Secrets changed."""
        ...


class InlineSecrets:
    """The informer in this process; each burst of changes read in a worker thread."""

    def __init__(
        self, informer: Informer[KubeObject], settings: KubernetesDiscovery, debounce_s: float
    ) -> None:
        self.informer = informer
        self.settings = settings
        self.debounce_s = debounce_s
        self.files = Discovery((), ())
        self._reader: FleetReader | None = None
        self._seen = 0

    def __repr__(self) -> str:
        return f"InlineSecrets({self.informer!r})"

    async def __aenter__(self) -> InlineSecrets:
        await self.informer.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.informer.__aexit__(*exc)

    async def next(self) -> FleetDiff:
        self._seen = await after_burst(self.informer, self._seen, self.debounce_s)
        synced = self.informer.synced
        if self._reader is None:
            self._reader = FleetReader(self.settings, self.files)
        return await in_background(self._reader.read, self.informer.objects(), synced)


class ProcessHealth:
    """The discovery process's list+watch health, for ``InformerCollector``."""

    def __init__(self) -> None:
        self.report = Health()
        self.running = False
        #: the counters of the processes that ended, so the exported ones never go back
        self._restarts_before: Counter[str] = Counter()
        self._errors_before: Counter[str] = Counter()

    @property
    def up(self) -> bool:
        return self.running and self.report.up

    @property
    def last_sync(self) -> float:
        return self.report.last_sync

    def restarts(self) -> Counter[str]:
        return self._restarts_before + self.report.restarts

    def errors(self) -> Counter[str]:
        return self._errors_before + self.report.errors

    def kinds(self) -> Mapping[str, int]:
        return self.report.kinds

    def ended(self) -> None:
        """The process ended: its counters are kept, its report is not."""
        self.running = False
        self._restarts_before += self.report.restarts
        self._errors_before += self.report.errors
        self.report = Health(last_sync=self.report.last_sync, kinds=self.report.kinds)


class SecretsProcess(Supervised):
    """The discovery process, started, read, and started again (module docstring)."""

    module = "reactor.secretchild"
    label = "clusters from Secrets: the discovery process"

    def __init__(self, settings: KubernetesDiscovery, debounce_s: float) -> None:
        super().__init__()
        self.settings = settings
        self.debounce_s = debounce_s
        self.files = Discovery((), ())
        self.health = ProcessHealth()
        self.silent_s = SILENT_S
        self.heartbeat_s = HEARTBEAT_S
        self._diffs: asyncio.Queue[FleetDiff] = asyncio.Queue()
        self._builder = DiffBuilder()

    async def next(self) -> FleetDiff:
        return await self._diffs.get()

    def start_frame(self) -> ChildStart:
        self._builder = DiffBuilder()
        self.health.running = True
        level, fmt = log_settings()
        files = files_for_reader(self.files)
        return ChildStart(
            settings=self.settings,
            files=files,
            debounce_s=self.debounce_s,
            log_level=level,
            log_format=fmt,
            heartbeat_s=self.heartbeat_s,
        )

    def received(self, what: str, body: Any) -> None:
        if what == "entries":
            self._builder.add(body)
        elif what == "end":
            self._diffs.put_nowait(self._builder.build(body))
        elif what == "health":
            self.health.report = body

    def ended(self) -> None:
        super().ended()
        self.health.ended()
