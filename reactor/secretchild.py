"""The reactor's discovery process: the management cluster's Secrets listed, watched and
read in a process of their own, their slim fleet sent to the reactor as differences.

Why a process: at 20,000 Secrets the list, the decoding and the reading of each Secret
are seconds of Python, and in the reactor's process every second of it is a second its
requests share the interpreter with (bench/RESULTS.md). Here they share
nothing but the machine's cores.

``python -m reactor.secretchild``, started by ``reactor.secretlink``, never by hand. What
it speaks (``reactor.childproc``): on stdin, one frame, a :class:`ChildStart` (the
discovery settings, the start-up file scan without proxy URLs, the log settings); on
stdout, a diff in pieces (``("entries", [...])``, then ``("end", DiffEnd)``:
``reactor.secretfleet``) whenever the Secrets changed (a burst gathered for
``debounce_s``), and ``("health", Health)`` when the list+watch's health changed (its
metrics are the reactor's), and at least every ``HEARTBEAT_S``. Nothing read from a
Secret is logged, as in the reactor.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from fleetwatch.discovery import Discovery
from fleetwatch.discovery.apimetrics import count_kinds
from fleetwatch.discovery.apisource import KubernetesDiscovery, build_informer
from fleetwatch.kube.kubeauth import KubeAuthError
from reactor.childproc import (
    EXIT_CREDENTIALS,
    HealthReports,
    Start,
    after_burst,
    child_main,
    serve_until_closed,
    write_frame,
)
from reactor.secretfleet import FleetDiff, FleetReader

log = logging.getLogger(__name__)

#: Entries per frame: about a millisecond of the reactor's interpreter to decode.
ENTRIES_PER_FRAME = 200


@dataclass(frozen=True)
class ChildStart(Start):
    """What the discovery process needs, sent on its stdin."""

    settings: KubernetesDiscovery
    files: Discovery
    debounce_s: float


@dataclass(frozen=True)
class Health:
    """The list+watch's health, as ``fleetwatch.discovery.apimetrics`` exports it."""

    up: bool = False
    last_sync: float = 0.0
    restarts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    #: Secrets held by kind (argocd, cluster-api, labelled)
    kinds: Mapping[str, int] = field(default_factory=dict)


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


async def serve(start: ChildStart, out: IO[bytes]) -> int:
    """List and watch until stdin ends; the exit status."""
    try:
        api, informer = build_informer(start.settings)
    except KubeAuthError as exc:
        log.error("clusters from Secrets: the management cluster's credentials: %s", exc)
        return EXIT_CREDENTIALS
    reader = FleetReader(start.settings, start.files, release=True)
    selector = start.settings.label_selector

    reports = HealthReports(out, start.heartbeat_s)
    counted: tuple[int, dict[str, int]] = (-1, {})

    def health() -> Health:
        """The list+watch's health as it is now."""
        nonlocal counted
        if counted[0] != informer.generation:  # 20,000 Secrets: 20 ms to count
            counted = (informer.generation, count_kinds(informer.objects().values(), selector))
        return Health(
            informer.up, informer.last_sync, informer.restarts(), informer.errors(), counted[1]
        )

    async def diffs() -> None:
        seen = 0
        while True:
            seen = await after_burst(informer, seen, start.debounce_s)
            found = reader.read(informer.objects(), informer.synced)
            reports.report(health())  # the metrics are current when it takes the diff
            send_diff(out, found)

    async with api, informer:
        await serve_until_closed(
            {
                "fleetwatch-discovery-health": reports.every(health),
                "fleetwatch-discovery-diffs": diffs(),
            }
        )
    return 0


def main() -> int:
    return child_main(
        "reactor.secretchild", ChildStart, serve, "clusters from Secrets: the discovery process"
    )


if __name__ == "__main__":
    # Run as the module it is imported as, so the frames' classes are the reactor's.
    from reactor import secretchild

    sys.exit(secretchild.main())
