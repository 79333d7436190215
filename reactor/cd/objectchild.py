"""The reactor's CD objects process: the Flux and Argo CD objects listed and watched in a
process of their own, what the informer keeps of each sent to the reactor as differences.

Why a process: 10,000 objects are seconds of a list read over TLS, decoded and slimmed,
and in the reactor's process each of those seconds is shared with its requests, which
waited for the interpreter meanwhile (bench/RESULTS.md). Here the reactor only
unpickles what changed, in small frames.

``python -m reactor.cd.objectchild``, started by ``reactor.cd.objectlink``, never by hand.
It speaks ``reactor.childproc``'s frames. On stdin, one :class:`ObjectsStart` (the CD
settings, the log settings). On stdout:

- once every kind is listed (:attr:`Informer.synced`: never half a list), the whole set,
  in pieces (``("objects", [(uid, object), ...])``, :data:`OBJECTS_PER_FRAME` each), then
  ``("end", Sent(whole=True))``;
- after each burst of changes (gathered for :data:`DEBOUNCE_S`), what changed since: the
  objects whose ``resourceVersion`` moved (a relist that finds the same versions sends
  nothing), then ``("end", Sent(whole=False, removed=(uid, ...)))``;
- ``("health", up)`` when the list+watch's health changed (``Informer.up``: every kind's
  last request succeeded; ``fleetwatch_reactor_cd_watch_up``), and at least every
  ``HEARTBEAT_S`` (the reactor kills a child silent for a minute).

An object is what ``reactor.cd.watch.stored`` keeps, in the reactor's own process too
(``--no-cd.process``): no ``managedFields`` but the pause field's owners, no credential
of a cluster Secret. Its log lines (a kind that cannot be listed, the backoff) go to
stderr in the reactor's format.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, replace
from typing import IO

from fleetwatch.kube.informer import Informer
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.kube.kubeauth import KubeAuthError
from fleetwatch.kube.objects import KubeObject
from reactor.cd.settings import CdSettings
from reactor.cd.watch import cd_watches, credentials_of, stored
from reactor.childproc import (
    EXIT_CREDENTIALS,
    HealthReports,
    Start,
    after_burst,
    child_main,
    serve_until_closed,
    write_frame,
)

log = logging.getLogger(__name__)

#: Objects per frame: about a millisecond of the reactor's interpreter to unpickle.
OBJECTS_PER_FRAME = 100

#: Seconds a burst of changes is gathered for before it is sent: a relist's pages, a
#: parent Kustomization's children applied at once.
DEBOUNCE_S = 0.1


@dataclass(frozen=True)
class ObjectsStart(Start):
    """What the CD objects process needs, sent on its stdin."""

    settings: CdSettings


@dataclass(frozen=True)
class Sent:
    """The end of a difference: the objects sent before it are the whole set
    (``whole``), or changed ones, and ``removed`` were dropped."""

    whole: bool
    removed: tuple[str, ...] = ()


def version(obj: KubeObject) -> str | None:
    metadata = obj.get("metadata")
    rv = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return rv if isinstance(rv, str) and rv else None


class Differ:
    """What changed in the informer's objects since the last difference sent. Pure."""

    def __init__(self) -> None:
        #: uid -> resourceVersion of what the reactor holds (None: resent at every change)
        self.sent: dict[str, str | None] = {}
        self.whole_sent = False

    def diff(self, objects: dict[str, KubeObject]) -> tuple[list[tuple[str, KubeObject]], Sent]:
        """The objects to send and the end to send after them; the books say they went."""
        changed = [
            (uid, obj)
            for uid, obj in objects.items()
            if (rv := version(obj)) is None or self.sent.get(uid, "") != rv
        ]
        removed = tuple(uid for uid in self.sent if uid not in objects)
        whole = not self.whole_sent
        if whole:
            changed = list(objects.items())
        self.sent = {uid: version(obj) for uid, obj in objects.items()}
        self.whole_sent = True
        return changed, Sent(whole, () if whole else removed)


def send(out: IO[bytes], changed: list[tuple[str, KubeObject]], end: Sent) -> None:
    """``changed`` in frames of :data:`OBJECTS_PER_FRAME`, then ``end``; flushed."""
    for start in range(0, len(changed), OBJECTS_PER_FRAME):
        write_frame(out, ("objects", changed[start : start + OBJECTS_PER_FRAME]))
    write_frame(out, ("end", end))
    out.flush()


async def serve(start: ObjectsStart, out: IO[bytes]) -> int:
    """List and watch until stdin ends; the exit status."""
    settings = start.settings
    try:
        credentials = credentials_of(settings)
    except KubeAuthError as exc:
        log.error("cd: the management cluster's credentials: %s", exc)
        return EXIT_CREDENTIALS
    # No request shares this interpreter: the pages are read back to back, as client-go
    # does, and transformed on the loop (``fleetwatch.kube.informer.BESIDE_REQUESTS``
    # paces the reactor's own informer).
    pace = replace(settings.informer, list_pause=0.0, transform_off_loop=False)
    api = KubeApi(credentials, request_timeout=settings.request_timeout_s)
    informer: Informer[KubeObject] = Informer(api, cd_watches(settings), pace, transform=stored)
    differ = Differ()

    reports = HealthReports(out, start.heartbeat_s)

    async def diffs() -> None:
        seen = 0
        while True:
            seen = await after_burst(informer, seen, DEBOUNCE_S)
            if informer.synced:
                changed, end = differ.diff(informer.objects())
                if changed or end.removed or end.whole:
                    # the health is current when the reactor takes the objects
                    reports.report(informer.up)
                    send(out, changed, end)

    async with api, informer:
        await serve_until_closed(
            {
                "fleetwatch-cd-health": reports.every(lambda: informer.up),
                "fleetwatch-cd-diffs": diffs(),
            }
        )
    return 0


def main() -> int:
    return child_main("reactor.cd.objectchild", ObjectsStart, serve, "cd: the objects process")


if __name__ == "__main__":
    # Run as the module it is imported as, so the frames' classes are the reactor's.
    from reactor.cd import objectchild

    sys.exit(objectchild.main())
