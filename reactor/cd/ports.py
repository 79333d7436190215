"""What the CD actuator needs of the parts around it, as protocols (tests stand in for them;
the store's, ``StoreRunner``, is ``reactor.cd.storeops``'):

- :class:`ObjectSource`: the objects, from the CD objects process
  (``reactor.cd.objectlink``) or an informer (``fleetwatch.kube.informer``);
  :class:`WatchedObjects` adds what the setup around the actuator reads of either (the
  wait for a change, the list+watch's health);
- :class:`Patcher`: ``reactor.cd.kubewrite.KubeWriter``'s writes (a patch, an Event), each
  behind a guard;
- :class:`Leadership`: ``reactor.cd.election.LeaderElector``, asked whether this replica
  acts and, by the fence (``reactor.cd.fence``), whether a write may still leave.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from reactor.cd.kubewrite import Guard


class ObjectSource(Protocol):
    @property
    def synced(self) -> bool: ...
    @property
    def generation(self) -> int: ...  # grows whenever an object is stored or dropped
    def objects(self) -> dict[str, dict[str, Any]]: ...


class WatchedObjects(ObjectSource, Protocol):
    @property
    def up(self) -> bool: ...  # the list+watch answers (fleetwatch_reactor_cd_watch_up)
    async def changed(self, generation: int) -> int: ...  # the generation once it moved


class Patcher(Protocol):
    async def merge_patch(
        self,
        path: str,
        patch: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]: ...

    async def create(
        self,
        path: str,
        body: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]: ...


class Leadership(Protocol):
    def is_leader(self) -> bool: ...
    def may_write(self, timeout: float) -> bool: ...
    def renewed_ago(self) -> float | None: ...
    @property
    def request_timeout_s(self) -> float: ...
