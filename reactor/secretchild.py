"""The reactor's discovery process: the management cluster's Secrets listed, watched and
read in a process of their own, their slim fleet sent to the reactor as differences.

Why a process: at 20,000 Secrets the list, the decoding and the reading of each Secret
are seconds of Python, and in the reactor's process every second of it is a second its
requests share the interpreter with (bench/RESULTS.md). Here they share
nothing but the machine's cores.

``python -m reactor.secretchild``, started by ``reactor.secretlink``, never by hand:

- **stdin**: one frame, a :class:`ChildStart` (the discovery settings, the start-up file
  scan without proxy URLs, the log settings); then nothing. Its end (the reactor gone,
  however it went) ends this process.
- **stdout**: frames only (anything else written to it goes to stderr): a diff in pieces
  (``("entries", [...])``, then ``("end", DiffEnd)``: ``reactor.secretfleet``) whenever the
  Secrets changed (a burst gathered for ``debounce_s``), and ``("health", Health)`` when
  the list+watch's health changed (its metrics are the reactor's), and at least every
  :data:`HEARTBEAT_S` (a heartbeat: the reactor kills a process silent for a minute).
- **stderr**: its log lines, in the reactor's format. Nothing read from a Secret is
  logged, as in the reactor.

It runs at :data:`NICE` above the reactor: background work.

A frame is a 4-byte big-endian length and a pickle: both ends are this program, of the
same version, through a pipe only they hold.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from fleetwatch.common.logs import setup_logging
from fleetwatch.discovery import Discovery
from fleetwatch.discovery.apimetrics import count_kinds
from fleetwatch.discovery.apisource import KubernetesDiscovery, build_informer
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.kubeauth import KubeAuthError
from fleetwatch.kube.objects import KubeObject
from reactor.secretfleet import FleetDiff, FleetReader

log = logging.getLogger(__name__)

#: Entries per frame: about a millisecond of the reactor's interpreter to decode.
ENTRIES_PER_FRAME = 200

#: Seconds between two looks at the list+watch's health.
HEALTH_EVERY_S = 0.5

#: The health is sent at least this often, changed or not: the reactor takes a process
#: that sends nothing for much longer as hung (``reactor.secretlink.SILENT_S``).
HEARTBEAT_S = 5.0

_LENGTH = struct.Struct(">I")

#: The discovery process's niceness above the reactor's. Its work is background work: when
#: both want a core, the kernel gives it to the reactor's threads first. Being a process of
#: its own it holds nothing a request waits for, unlike a thread of the reactor's at a lower
#: priority, which holds the interpreter while it waits for a core (the idle scheduling
#: class, rejected for that in bench/RESULTS.md): with a busy neighbour, discovery slows
#: down, requests do not. Measured there: the first list within 2x quiet in 3 of 7 runs
#: against 1 of 7 at the reactor's own niceness, the relist in 7 of 7 against 5 of 7.
NICE = 10

#: Exit status when the management cluster's credentials cannot be read: starting again
#: would not help (the reactor checked them at start, so they changed since).
EXIT_CREDENTIALS = 3


@dataclass(frozen=True)
class ChildStart:
    """What the discovery process needs, sent on its stdin."""

    settings: KubernetesDiscovery
    files: Discovery
    debounce_s: float
    log_level: str = "info"
    log_format: str = "logfmt"
    #: seconds between two heartbeats at most (:data:`HEARTBEAT_S`)
    heartbeat_s: float = HEARTBEAT_S
    #: niceness added to the reactor's (:data:`NICE`)
    nice: int = NICE


@dataclass(frozen=True)
class Health:
    """The list+watch's health, as ``fleetwatch.discovery.apimetrics`` exports it."""

    up: bool = False
    last_sync: float = 0.0
    restarts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    #: Secrets held by kind (argocd, cluster-api, labelled)
    kinds: Mapping[str, int] = field(default_factory=dict)


class Writes(Protocol):
    """Where a frame is written: a binary file or an asyncio stream writer."""

    def write(self, data: bytes, /) -> object: ...


def write_frame(out: Writes, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(body)) + body)


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame of a blocking stream; EOFError at its end."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    body = stream.read(_LENGTH.unpack(head)[0])
    return pickle.loads(body)


async def read_frame_async(stream: asyncio.StreamReader) -> Any:
    """The next frame of ``stream``; ``asyncio.IncompleteReadError`` at its end."""
    head = await stream.readexactly(_LENGTH.size)
    return pickle.loads(await stream.readexactly(_LENGTH.unpack(head)[0]))


def send_diff(out: IO[bytes], found: FleetDiff) -> None:
    """``found`` in pieces of :data:`ENTRIES_PER_FRAME`, then its end; flushed."""
    piece: list[tuple[str, str, Any]] = []
    for entry in found.entries():
        piece.append(entry)
        if len(piece) == ENTRIES_PER_FRAME:
            write_frame(out, ("entries", piece))
            piece = []
    if piece:
        write_frame(out, ("entries", piece))
    write_frame(out, ("end", found.end()))
    out.flush()


async def after_burst(informer: Informer[KubeObject], seen: int, debounce_s: float) -> int:
    """Wait for the Secrets to change after generation ``seen``, then ``debounce_s`` more
    for the rest of the burst; the generation to read (here, and in the reactor's own
    process with ``reactor.secretlink.InlineSecrets``)."""
    await informer.changed(seen)
    await asyncio.sleep(debounce_s)
    return informer.generation


async def serve(start: ChildStart, out: IO[bytes]) -> int:
    """List and watch until stdin ends; the exit status."""
    try:
        api, informer = build_informer(start.settings)
    except KubeAuthError as exc:
        log.error("clusters from Secrets: the management cluster's credentials: %s", exc)
        return EXIT_CREDENTIALS
    reader = FleetReader(start.settings, start.files, release=True)
    selector = start.settings.label_selector
    stdin_closed = asyncio.ensure_future(_stdin_closed())

    sent: Health | None = None
    sent_at = 0.0
    counted: tuple[int, dict[str, int]] = (-1, {})

    def report() -> None:
        """The health as it is now, sent when it changed or a heartbeat is due."""
        nonlocal sent, sent_at, counted
        if counted[0] != informer.generation:  # 20,000 Secrets: 20 ms to count
            counted = (informer.generation, count_kinds(informer.objects().values(), selector))
        now = Health(
            informer.up, informer.last_sync, informer.restarts(), informer.errors(), counted[1]
        )
        if now != sent or time.monotonic() - sent_at > start.heartbeat_s:
            write_frame(out, ("health", now))
            out.flush()
            sent, sent_at = now, time.monotonic()

    async def health() -> None:
        while True:
            report()
            await asyncio.sleep(HEALTH_EVERY_S)

    async def diffs() -> None:
        seen = 0
        while True:
            seen = await after_burst(informer, seen, start.debounce_s)
            found = reader.read(informer.objects(), informer.synced)
            report()  # the metrics are current when the reactor takes the diff
            send_diff(out, found)

    async with api, informer:
        tasks = [
            asyncio.create_task(health(), name="fleetwatch-discovery-health"),
            asyncio.create_task(diffs(), name="fleetwatch-discovery-diffs"),
        ]
        try:
            done, _ = await asyncio.wait(
                [stdin_closed, *tasks], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not stdin_closed:
                    task.result()  # a bug: raised, logged by main
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return 0


async def _stdin_closed() -> None:
    """Returns once stdin ends: the reactor is gone. A daemon thread reads it, so an
    exit for another reason never waits for it."""
    loop = asyncio.get_running_loop()
    closed = asyncio.Event()

    def read() -> None:
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(closed.set)

    threading.Thread(target=read, name="fleetwatch-stdin", daemon=True).start()
    await closed.wait()


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not break a frame
    try:
        start = read_frame(sys.stdin.buffer)
    except EOFError:  # the reactor stopped before it sent anything
        return 0
    except Exception:  # anything but the reactor's frame is refused alike
        start = None
    if not isinstance(start, ChildStart):
        print("reactor.secretchild: started by the reactor only", file=sys.stderr)
        return 2
    setup_logging(start.log_level, start.log_format)
    if start.nice:
        os.nice(start.nice)  # lowering one's own priority needs no privilege
    try:
        return asyncio.run(serve(start, out))
    except BrokenPipeError:  # the reactor went while a frame was written
        return 0
    except Exception:
        log.exception("clusters from Secrets: the discovery process failed")
        return 1


if __name__ == "__main__":
    # Run as the module it is imported as, so the frames' classes are the reactor's.
    from reactor import secretchild

    sys.exit(secretchild.main())
