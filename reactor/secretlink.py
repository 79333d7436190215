"""Where the reactor's Secret clusters come from: its discovery process, or an informer of
its own.

:class:`SecretsProcess` (the default of ``fleetwatch reactor``): ``reactor.secretchild``
lists, watches and reads the Secrets in a process of its own and sends the slim fleet's
differences (``reactor.secretfleet``); this side decodes them in small pieces on the event
loop and hands each whole diff to ``reactor.apidiscovery``. A process that ends (a bug,
the kernel's OOM killer) is started again, after 1 s and up to 30 s when it keeps ending;
its first diff is whole, and the reactor publishes it only once it is synced
(``ApiDiscovery``), so what it holds never shrinks to a half-listed fleet. One that sends
nothing, not even its heartbeat, for :data:`SILENT_S` is hung: killed, and started again.
The list+watch's health (``fleetwatch.discovery.apimetrics``) is the process's last
report, ``up`` 0 while no process runs; its counters go on across restarts.

:class:`InlineSecrets`: the informer in the reactor's own process, its reads in a worker
thread (``--no-discovery.kubernetes.process``, and tests that read its log lines).

I/O (a child process, the informer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.logs import JsonFormatter
from fleetwatch.discovery import Discovery
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.objects import KubeObject
from reactor.secretchild import (
    EXIT_CREDENTIALS,
    HEARTBEAT_S,
    ChildStart,
    Health,
    after_burst,
    read_frame_async,
    write_frame,
)
from reactor.secretfleet import DiffBuilder, FleetDiff, FleetReader, files_for_reader

log = logging.getLogger(__name__)

#: Seconds before a discovery process that ended is started again: doubled while it keeps
#: ending within :data:`STABLE_S`, up to :data:`RESTART_MAX_S`.
RESTART_S = 1.0
RESTART_MAX_S = 30.0
STABLE_S = 60.0

#: Seconds a discovery process is given to end once its stdin is closed, then killed.
STOP_S = 5.0

#: A discovery process that sends nothing for this long (it sends its health every few
#: seconds, ``reactor.secretchild.HEARTBEAT_S``) is hung: killed and started again. Long
#: enough for a read of 20,000 Secrets on a starved machine (1-3 s on a quiet one).
SILENT_S = 60.0


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


class SecretsProcess:
    """The discovery process, started, read, and started again (module docstring)."""

    def __init__(self, settings: KubernetesDiscovery, debounce_s: float) -> None:
        self.settings = settings
        self.debounce_s = debounce_s
        self.files = Discovery((), ())
        self.health = ProcessHealth()
        #: seconds of silence after which the process is taken as hung (:data:`SILENT_S`),
        #: and between two of its heartbeats at most
        self.silent_s = SILENT_S
        self.heartbeat_s = HEARTBEAT_S
        #: process ids of the discovery processes started (tests, and the log)
        self.pids: list[int] = []
        self._diffs: asyncio.Queue[FleetDiff] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None

    def __repr__(self) -> str:
        pid = self._proc.pid if self._proc is not None else None
        return f"SecretsProcess(pid={pid}, up={self.health.up})"

    async def __aenter__(self) -> SecretsProcess:
        self._task = asyncio.create_task(self._supervise(), name="fleetwatch-discovery-process")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def next(self) -> FleetDiff:
        return await self._diffs.get()

    async def _supervise(self) -> None:
        delay = RESTART_S
        while True:
            started = time.monotonic()
            try:
                code: int | str = await self._run_once()
            except Exception:  # a bug, or a process that wrote what is no frame: again
                log.exception("clusters from Secrets: the discovery process could not be read")
                code = "unreadable"
            self.health.ended()
            if time.monotonic() - started > STABLE_S:
                delay = RESTART_S
            if code == EXIT_CREDENTIALS:
                why = "the management cluster's credentials cannot be read"
            elif isinstance(code, int):
                why = f"exit status {code}"
            else:
                why = "killed: what it sent could not be read"
            log.warning(
                "clusters from Secrets: the discovery process ended (%s); starting it again in %gs",
                why,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_S)

    async def _run_once(self) -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "reactor.secretchild",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=_child_env(),
        )
        self._proc = proc
        self.pids.append(proc.pid)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            level, fmt = _log_settings()
            start = ChildStart(
                self.settings,
                files_for_reader(self.files),
                self.debounce_s,
                level,
                fmt,
                self.heartbeat_s,
            )
            write_frame(proc.stdin, start)
            await proc.stdin.drain()
            self.health.running = True
            builder = DiffBuilder()
            while True:
                try:
                    async with asyncio.timeout(self.silent_s):
                        what, body = await read_frame_async(proc.stdout)
                except asyncio.IncompleteReadError:
                    break
                except TimeoutError:
                    log.warning(
                        "clusters from Secrets: the discovery process (pid %d) sent nothing "
                        "for %gs; killing it",
                        proc.pid,
                        self.silent_s,
                    )
                    _kill(proc)
                    break
                if what == "entries":
                    builder.add(body)
                elif what == "end":
                    self._diffs.put_nowait(builder.build(body))
                elif what == "health":
                    self.health.report = body
            return await proc.wait()
        finally:
            await _stop(proc)
            self._proc = None


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End ``proc`` (its stdin closed, then killed after :data:`STOP_S`) and reap it."""
    if proc.returncode is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        async with asyncio.timeout(STOP_S):
            await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
    except asyncio.CancelledError:
        _kill(proc)
        await proc.wait()
        raise


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL, unless it has ended meanwhile."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _child_env() -> dict[str, str]:
    """This environment, with the directory this program runs from first on the path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _log_settings() -> tuple[str, str]:
    """The level and format of this process's log (the root logger's handler)."""
    root = logging.getLogger()
    level = logging.getLevelName(root.getEffectiveLevel()).lower()
    if level not in ("debug", "info", "warning", "error"):
        level = "info"
    json = any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)
    return level, "json" if json else "logfmt"
