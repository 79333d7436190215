"""The CD actuator's objects, from the CD objects process (``reactor.cd.objectchild``, the
default of ``fleetwatch reactor``; ``--no-cd.process``: an informer in the reactor's own
process, ``reactor.cd.setup``).

:class:`ObjectsProcess` is what the actuator reads (``reactor.cd.ports.ObjectSource``): the
objects by ``uid``, whether every kind was listed once, a generation that grows at each
change, as the informer in the reactor's process answers them. It holds what the
process's differences said, each applied whole at its end: the actuator never reads half
a difference, and never half a list, as :attr:`synced` is true only from the first whole
set on. A process that ends or hangs is started again (``reactor.childproc``); until its
successor sends its whole set, the objects stay as the last one left them (as an
informer's stay while its watch is broken), then that set replaces them.

Each object dict is replaced, never changed in place: a pass reading the objects in a
worker thread reads them as they were when it began.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fleetwatch.kube.objects import KubeObject
from reactor.cd.objectchild import ObjectsStart, Sent
from reactor.cd.settings import CdSettings
from reactor.childproc import Supervised, log_settings


class ObjectsProcess(Supervised):
    """The CD objects process, started, read, and started again (module docstring)."""

    module = "reactor.cd.objectchild"
    label = "cd: the objects process"

    def __init__(self, settings: CdSettings) -> None:
        super().__init__()
        self.settings = settings
        self._objects: dict[str, KubeObject] = {}
        #: the objects of the difference being received, applied at its end
        self._staged: dict[str, KubeObject] = {}
        self._synced = False
        #: the list+watch answered, as the running process last said
        self._watch_up = False
        self._generation = 0
        self._change = asyncio.Event()

    @property
    def synced(self) -> bool:
        """A whole set was received once (every kind listed)."""
        return self._synced

    @property
    def up(self) -> bool:
        """A process runs and its list+watch answers (``fleetwatch_reactor_cd_watch_up``)."""
        return self.running and self._watch_up

    @property
    def generation(self) -> int:
        """Grows whenever an object is stored or dropped."""
        return self._generation

    def objects(self) -> dict[str, KubeObject]:
        """Every object, by ``uid`` (a dict never changed after it is returned)."""
        return self._objects

    async def changed(self, generation: int) -> int:
        """Wait until :attr:`generation` is no longer ``generation``, and return it."""
        while self._generation == generation:
            self._change.clear()
            await self._change.wait()
        return self._generation

    def start_frame(self) -> ObjectsStart:
        self._staged = {}
        level, fmt = log_settings()
        return ObjectsStart(
            settings=self.settings, log_level=level, log_format=fmt, heartbeat_s=self.heartbeat_s
        )

    def received(self, what: str, body: Any) -> None:
        if what == "objects":
            self._staged.update(body)
        elif what == "end":
            self._apply(body)
        elif what == "health":
            self._watch_up = bool(body)

    def ended(self) -> None:
        super().ended()
        self._staged = {}  # half a difference is never applied
        self._watch_up = False

    def _apply(self, end: Sent) -> None:
        staged, self._staged = self._staged, {}
        if end.whole:
            objects = staged
        else:
            objects = {**self._objects, **staged}
            for uid in end.removed:
                objects.pop(uid, None)
        self._objects = objects
        self._synced = True
        self._generation += 1
        self._change.set()
