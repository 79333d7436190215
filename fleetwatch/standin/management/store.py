"""The management cluster's objects, one global revision, and the event history watches read.

As in etcd, every write anywhere takes the next revision, which becomes the written
object's ``metadata.resourceVersion``, and a list's ``resourceVersion`` is the revision it
was read at. The history keeps the last ``window`` events (as the watch cache does); a
watch starts from any revision still in it, and one older gets ``410 Expired``. A test
compacts the history at will (:meth:`ObjectStore.compact`) to reach that case without writing
thousands of objects. Writes that change nothing take no revision and send no event, as
kube-apiserver skips a write whose bytes are unchanged.

Everything runs on the server's event loop, so the store takes no locks. Each watcher has
a bounded buffer (:class:`WatchStream`): a watcher that falls further behind than its
capacity is terminated, as kube-apiserver's cacher forces an unresponsive watcher closed,
so a watch either delivers every event or ends, and its client resumes from the last
``resourceVersion`` it saw (the history replays the rest, or answers 410).

Long because reads at a revision, writes, the history and the watches are one state
(the tables, the revision counter, the key order kept for pages): apart, each part would
reach into the others' private fields.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from fleetwatch.standin.management import objects
from fleetwatch.standin.management.fields import Ownership
from fleetwatch.standin.management.kinds import KINDS, NAMESPACES, Kind
from fleetwatch.standin.management.status import (
    MODIFIED,
    ApiError,
    FieldCause,
    already_exists,
    conflict,
    invalid,
    not_found,
)

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Predicate = Callable[[Obj], bool]

#: Namespaces a new cluster has, as a kubeadm cluster has them.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True)
class Event:
    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    kind: Kind
    obj: Obj
    old: Obj | None


#: Events a watcher may have waiting before it is terminated as too slow. As large as the
#: default history: writes here land in bursts (a seed of thousands of objects is one turn
#: of the event loop, where kube-apiserver's writes arrive one request at a time while its
#: watchers drain), and any burst the history can replay is delivered live too.
WATCH_BUFFER = 10_000


@dataclass(eq=False)
class WatchStream:
    """One open watch: its filter, and the events the store gave it that are not sent yet.

    The store :meth:`offer`\\ s events; the serving side :meth:`take`\\ s them and
    :meth:`wait`\\ s when there is none. :meth:`close` ends the watch after what is
    waiting (the control API, the server stopping); :meth:`terminate` ends it at once,
    what is waiting dropped (a watcher more than ``capacity`` events behind).
    """

    kind: Kind
    namespace: str
    predicate: Predicate
    capacity: int = WATCH_BUFFER
    pending: deque[tuple[str, Obj]] = field(default_factory=deque)
    #: No event will be added: end once ``pending`` is sent.
    closed: bool = False
    #: Dropped as too slow: end now.
    terminated: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, event: Event) -> bool:
        """Queue what this watcher sees of ``event``; False if that terminated it."""
        seen = self.translate(event)
        if seen is None or self.closed:
            return not self.terminated
        if len(self.pending) >= self.capacity:
            self.terminate()
            return False
        self.pending.append(seen)
        self._wake.set()
        return True

    def take(self) -> tuple[str, Obj] | None:
        """The next event to send, if one is waiting."""
        return self.pending.popleft() if self.pending else None

    @property
    def ended(self) -> bool:
        """Nothing more will be sent."""
        return self.terminated or (self.closed and not self.pending)

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for an event or the end; False if none came."""
        if self.pending or self.closed:
            return True
        self._wake.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    def terminate(self) -> None:
        self.terminated = self.closed = True
        self.pending.clear()
        self._wake.set()

    def translate(self, event: Event) -> tuple[str, Obj] | None:
        """The event this watcher sees, as the watch cache filters: an object that starts
        matching arrives as ADDED, one that stops matching leaves as DELETED."""
        if event.kind is not self.kind:
            return None
        if self.namespace and event.obj["metadata"].get("namespace") != self.namespace:
            return None
        now = event.type != "DELETED" and self.predicate(event.obj)
        before = event.old is not None and self.predicate(event.old)
        if event.type == "DELETED":
            return ("DELETED", event.obj) if before else None
        if now and before:
            return ("MODIFIED", event.obj)
        if now:
            return ("ADDED", event.obj)
        if before:
            return ("DELETED", event.obj)
        return None


class ObjectStore:
    """Objects by kind, the revision counter, the history window and the open watches."""

    def __init__(self, window: int = 10_000) -> None:
        self.revision = 0
        self.compacted = 0
        self.window = window
        self._objects: dict[str, dict[Key, Obj]] = {k.key: {} for k in KINDS}
        self._owners: dict[tuple[str, Key], Ownership] = {}
        self._history: deque[Event] = deque()
        #: each kind's keys in etcd's order (:meth:`_key_order`), while no key comes or goes
        self._orders: dict[str, list[tuple[str, Key]]] = {}
        self.watchers: set[WatchStream] = set()
        self._advanced = asyncio.Event()
        for name in INITIAL_NAMESPACES:
            self.create(NAMESPACES, "", {"metadata": {"name": name}}, "kube-apiserver")

    def scratch(self) -> ObjectStore:
        """A copy for a dry-run write (``?dryRun=All``): the same objects, owners and revision,
        no history and no watchers, so nothing done to it is seen or kept."""
        copied = ObjectStore.__new__(ObjectStore)
        copied.revision, copied.compacted, copied.window = self.revision, self.compacted, 0
        # Stored objects are never changed in place (writes store new dicts): shallow is enough.
        copied._objects = {key: dict(table) for key, table in self._objects.items()}
        copied._owners = copy.deepcopy(self._owners)
        copied._history = deque()
        copied._orders = {}
        copied.watchers = set()
        copied._advanced = asyncio.Event()
        return copied

    # --- reads ------------------------------------------------------------------------

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        obj = self._objects[kind.key].get((namespace, name))
        if obj is None:
            raise not_found(kind.resource, name)
        return copy.deepcopy(obj)

    def exists(self, kind: Kind, namespace: str, name: str) -> bool:
        return (namespace, name) in self._objects[kind.key]

    def items(self, kind: Kind, namespace: str, predicate: Predicate, at: int = 0) -> list[Obj]:
        """Every matching object (:meth:`page` without paging)."""
        return self.page(kind, namespace, predicate, at)[0]

    def page(
        self,
        kind: Kind,
        namespace: str,
        predicate: Predicate,
        at: int = 0,
        after: str = "",
        limit: int = 0,
        count_more: bool = True,
    ) -> tuple[list[Obj], int]:
        """Matching objects in etcd's key order (``NAMESPACE/NAME``), at revision ``at`` (0:
        now; older ones rebuilt from the history, which must still hold them), those whose
        key sorts after ``after``, ``limit`` at most (0: all); and how many more match
        (``count_more`` false: 1 if any does: the API server counts them only for a list
        without selectors). A page costs about its own size, as an API server's does: the
        key order is kept between pages, and only the page is copied.
        """
        table, order = self._objects[kind.key], self._key_order(kind)
        later = [e for e in self._events_after(at) if e.kind is kind] if at else []
        if later:
            table = dict(table)
            for event in later:  # newest first: each key ends as it was at ``at``
                if event.old is None:
                    table.pop(_key(event.obj), None)
                else:
                    table[_key(event.obj)] = event.old
            order = sorted((_etcd_key(key), key) for key in table)
        start = bisect.bisect_right(order, after, key=itemgetter(0)) if after else 0
        prefix = f"{namespace}/"
        if namespace:  # a namespace's keys are together in this order
            start = max(start, bisect.bisect_left(order, prefix, key=itemgetter(0)))
        chosen: list[Obj] = []
        more = 0
        for at_key, key in order[start:]:
            if namespace and not at_key.startswith(prefix):
                break
            if not predicate(table[key]):
                continue
            if limit and len(chosen) >= limit:
                more += 1
                if not count_more:
                    break
            else:
                chosen.append(table[key])
        return _copy_json(chosen), more

    def _events_after(self, revision: int) -> Iterator[Event]:
        """The history's events after ``revision``, newest first (only those are read)."""
        for event in reversed(self._history):
            if event.revision <= revision:
                return
            yield event

    def _key_order(self, kind: Kind) -> list[tuple[str, Key]]:
        """The kind's (etcd key, key) in order; kept until a key comes or goes."""
        order = self._orders.get(kind.key)
        if order is None:
            order = sorted((_etcd_key(key), key) for key in self._objects[kind.key])
            self._orders[kind.key] = order
        return order

    # --- writes -----------------------------------------------------------------------

    def create(self, kind: Kind, namespace: str, obj: Obj, manager: str) -> Obj:
        obj = objects.check_identity(kind, namespace, None, obj)
        name = obj["metadata"].get("name", "")
        self._namespace_exists(kind, namespace)
        if (namespace, name) in self._objects[kind.key]:
            raise already_exists(kind.resource, name)
        new = objects.prepare(kind, obj, None)
        owners = Ownership()
        owners.record_update(None, new, manager, kind.api_version)
        return self._commit(kind, None, new, owners)

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        obj: Obj,
        manager: str,
        *,
        subresource: str = "",
        require_version: bool | None = None,
    ) -> Obj:
        """PUT: the object replaced, if its ``resourceVersion`` (when given) is the current one.

        Custom resources need the resourceVersion (``AllowUnconditionalUpdate`` is false for
        them); ``require_version`` overrides that for patches, which carry none.
        """
        obj = objects.check_identity(kind, namespace, name, obj)
        old = self.get(kind, namespace, name)
        given = obj["metadata"].get("resourceVersion")
        if given:
            if given != old["metadata"]["resourceVersion"]:
                raise conflict(kind.resource, name, MODIFIED)
        elif require_version if require_version is not None else kind.custom:
            raise invalid(
                kind.resource,
                name,
                [
                    FieldCause(
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )
        new = objects.prepare(kind, obj, old, subresource=subresource)
        if objects.same(new, old):
            return old
        owners = self._owners.setdefault((kind.key, (namespace, name)), Ownership())
        owners.record_update(old, new, manager, kind.api_version, subresource)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(kind, old, new)
        return self._commit(kind, old, new, owners)

    def apply(
        self, kind: Kind, namespace: str, name: str, applied: Obj, manager: str, force: bool
    ) -> Obj:
        """Server-side apply: create the object, or merge the manager's configuration in."""
        applied = objects.check_identity(kind, namespace, name, applied)
        for server_owned in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            applied["metadata"].pop(server_owned, None)
        current = self._objects[kind.key].get((namespace, name))
        if current is None:
            self._namespace_exists(kind, namespace)
            owners = Ownership()
            merged = owners.apply(None, applied, manager, force)
            return self._commit(kind, None, objects.prepare(kind, merged, None), owners)
        old = copy.deepcopy(current)
        owners = self._owners.setdefault((kind.key, (namespace, name)), Ownership())
        trial = copy.deepcopy(owners)
        merged = trial.apply(old, applied, manager, force)
        new = objects.prepare(kind, merged, old)
        if objects.same(new, old):
            return old
        self._owners[(kind.key, (namespace, name))] = trial
        return self._commit(kind, old, new, trial)

    def delete(
        self, kind: Kind, namespace: str, name: str, preconditions: dict[str, str] | None = None
    ) -> tuple[Obj, bool]:
        """The object deleted (True), or marked for deletion while finalizers remain (False)."""
        old = self.get(kind, namespace, name)
        meta = old["metadata"]
        for field_name, value in (preconditions or {}).items():
            if value and meta.get(field_name) != value:
                label = "UID" if field_name == "uid" else "ResourceVersion"
                why = (
                    f"Precondition failed: {label} in precondition: {value}, "
                    f"{label} in object meta: {meta.get(field_name)}"
                )
                raise conflict(kind.resource, name, why)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old, False
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = objects.now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            owners = self._owners.setdefault((kind.key, (namespace, name)), Ownership())
            return self._commit(kind, old, new, owners), False
        if kind is NAMESPACES:
            # The namespace controller empties a deleted namespace; here it happens at once.
            for other in KINDS:
                if other.namespaced:
                    for key in [k for k in self._objects[other.key] if k[0] == name]:
                        self._remove(other, self._objects[other.key][key], None)
        return self._remove(kind, old, None), True

    def _namespace_exists(self, kind: Kind, namespace: str) -> None:
        if kind.namespaced and ("", namespace) not in self._objects[NAMESPACES.key]:
            raise not_found(NAMESPACES.resource, namespace)

    def _commit(self, kind: Kind, old: Obj | None, new: Obj, owners: Ownership) -> Obj:
        self.revision += 1
        new["metadata"]["resourceVersion"] = str(self.revision)
        new["metadata"]["managedFields"] = owners.render()
        key = _key(new)
        if key not in self._objects[kind.key]:
            self._orders.pop(kind.key, None)
        self._objects[kind.key][key] = new
        self._owners[(kind.key, key)] = owners
        self._record(Event(self.revision, "MODIFIED" if old else "ADDED", kind, new, old))
        return copy.deepcopy(new)

    def _remove(self, kind: Kind, old: Obj, last: Obj | None) -> Obj:
        self.revision += 1
        key = _key(old)
        del self._objects[kind.key][key]
        self._orders.pop(kind.key, None)
        self._owners.pop((kind.key, key), None)
        gone = copy.deepcopy(last or old)
        # A deleted object is delivered with the revision of its deletion.
        gone["metadata"]["resourceVersion"] = str(self.revision)
        self._record(Event(self.revision, "DELETED", kind, gone, old))
        return copy.deepcopy(gone)

    def _record(self, event: Event) -> None:
        self._history.append(event)
        while len(self._history) > self.window:
            self.compacted = self._history.popleft().revision
        too_slow = []
        for watcher in self.watchers:
            if not watcher.offer(event):  # terminated: too far behind
                too_slow.append(watcher)
        self.watchers.difference_update(too_slow)
        self._advanced.set()
        self._advanced = asyncio.Event()

    # --- history and watches -----------------------------------------------------------

    def compact(self) -> int:
        """Forget the history up to now (as an etcd compaction): older watches get 410."""
        self._history.clear()
        self.compacted = self.revision
        return self.compacted

    def events_since(self, revision: int) -> Iterator[Event]:
        """Events after ``revision``; the caller checked ``revision >= compacted``."""
        return (e for e in list(self._history) if e.revision > revision)

    async def wait_for(self, revision: int, seconds: float) -> bool:
        """Wait until the store reached ``revision`` (a client ahead of this server)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self.revision < revision:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):  # not wait_for: fleetwatch.common.waits
                    await self._advanced.wait()
            except TimeoutError:
                return False
        return True

    def close_watches(self) -> int:
        """End every open watch now (as an API server restart or a load balancer would)."""
        count = len(self.watchers)
        for watcher in self.watchers:
            watcher.close()
        self.watchers.clear()
        return count


def _key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _copy_json(value: list[Obj]) -> list[Obj]:
    """A deep copy of stored objects (only what JSON holds), several times faster through
    the C codec than :func:`copy.deepcopy`."""
    copied: list[Obj] = json.loads(json.dumps(value))
    return copied


def _etcd_key(key: Key) -> str:
    """Where etcd keeps the object, less the resource's prefix: lists and continue tokens
    follow this order (``a-b/x`` sorts before ``a/x``, unlike the pair)."""
    return f"{key[0]}/{key[1]}"


__all__ = ["ApiError", "Event", "ObjectStore", "WatchStream"]
