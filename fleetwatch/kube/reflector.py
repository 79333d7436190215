"""One list+watch kept current as client-go's reflector keeps it: the generic half of
``fleetwatch.kube.informer`` (which runs one per :class:`Watched` collection and merges them).

A reflector's loop (client-go's ``ListAndWatch`` in ``tools/cache/reflector.go``):

1. **list** with ``limit``/``continue`` paging; the objects replace the reflector's store
   at once (nothing is published half-listed), and the list's ``resourceVersion`` is
   where the watch starts. A ``continue`` token that expired (410) lists again from the
   start, once; a second 410 is a failed round (4).
2. **watch** from the last ``resourceVersion`` seen, ``allowWatchBookmarks=true``, with a
   ``timeoutSeconds`` jittered in :attr:`InformerSettings.watch_seconds` (so thousands of
   exporters' watches do not end together). ``ADDED``/``MODIFIED`` store the object,
   ``DELETED`` drops it (with a label selector it may mean "no longer matches": either way
   it is no longer ours), ``BOOKMARK`` only moves the ``resourceVersion``. An event older
   than the object stored (:func:`older`) is ignored and counted (``stale_event``).
3. a watch the server **closed normally** (its timeout, after a second or with events)
   watches again at once from that ``resourceVersion``, no list, and resets the backoff.
4. anything else is a **failed round**, followed by a wait of
:class:`fleetwatch.kube.backoff.Backoff`
   (client-go's: 0.8 s doubling to 30 s, each wait up to twice its base, so [30, 60) s at
   the cap; back to 0.8 s after a normal watch or 2 minutes without a failure), or the
   server's ``Retry-After`` when longer: a ``410`` (an ``ERROR`` event or the HTTP status:
   the history is gone, the next round lists), so that an API answering 410 to every watch
   is listed at most once per wait, not in a loop; a watch **closed within a second with no
   event** (``short``); any other error (an ``ERROR`` event, an HTTP error, a line that is
   not JSON, the network), counted by reason (``kubeapi.KubeApiError.reason``) and resumed
   from the watch when there is a ``resourceVersion``, from the list otherwise. The store is
   kept meanwhile: the clusters last seen stay published while the API fails.

Events already received come out of the stream without a suspension, so a burst (every
Secret rewritten at once) would be decoded and stored in one callback of the event loop:
the watch gives the loop a turn every :attr:`InformerSettings.events_per_slice` events, and
a list every as many items of a page (a relist lists every kind at once), or transforms the
page in a worker thread (:attr:`InformerSettings.transform_off_loop`).

I/O (asyncio): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.foreground import paced
from fleetwatch.kube.backoff import Backoff, BackoffSettings
from fleetwatch.kube.kubeapi import KubeApiError, status_reason
from fleetwatch.kube.objects import KubeObject, Stored, as_sent

log = logging.getLogger(__name__)


class Api(Protocol):
    """What a reflector needs of the API (``fleetwatch.kube.kubeapi.KubeApi``)."""

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]: ...

    def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,
    ) -> AsyncGenerator[dict[str, Any], None]: ...


@dataclass(frozen=True)
class InformerSettings:
    """How the reflectors pace themselves."""

    #: items per list page: small enough that a page of 1 MiB Secrets stays bounded
    page_size: int = 500
    #: a watch's ``timeoutSeconds``, drawn in this range (client-go: 5-10 minutes)
    watch_seconds: tuple[float, float] = (300.0, 600.0)
    #: seconds past ``timeoutSeconds`` a silent watch is given before it counts as broken
    watch_grace: float = 60.0
    #: the backoff's first base delay after a failed round, doubled per failure up to
    #: ``backoff_max``; each wait is up to twice its base (``fleetwatch.kube.backoff``) (s)
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    #: no failure for this long: the backoff starts again from ``backoff_initial`` (s)
    backoff_reset: float = 120.0
    #: a watch closed sooner than this with no event is a failed round (client-go: 1 s)
    short_watch: float = 1.0
    #: events handled in a row before the loop is given a turn: a stream that arrived
    #: while the loop was busy (every Secret rewritten at once: 20,000 events buffered)
    #: is otherwise decoded and stored in one callback, and scrapes wait for all of it;
    #: the items of a list page too
    events_per_slice: int = 100
    #: between two pages of a list, a pause of this many times what the last page took
    #: (its request, decode and transforms): 0 reads the pages back to back, as client-go
    #: does; ``BESIDE_REQUESTS`` (``fleetwatch.kube.informer``) says why a process would not
    list_pause: float = 0.0
    #: a list page's transforms run in a worker thread, as background work
    #: (``fleetwatch.common.foreground``), instead of on the loop in slices
    transform_off_loop: bool = False

    def backoff(self) -> BackoffSettings:
        return BackoffSettings(
            self.backoff_initial, self.backoff_max, reset_after=self.backoff_reset
        )


class Watched(Protocol):  # what a reflector lists and watches: a discovery WatchSpec, a CdWatch
    @property
    def kind(self) -> str: ...  # a short name, for logs and task names
    @property
    def path(self) -> str: ...
    @property
    def label_selector(self) -> str: ...
    @property
    def field_selector(self) -> str: ...


class _Expired(Exception):
    """The watch's history is gone (410): list again."""


def older(version: str, than: str) -> bool:
    """Whether ``version`` is older than ``than``, both ``resourceVersion`` values.

    The API conventions make them opaque, but kube-apiserver's are etcd revisions, decimal
    integers its watch cache compares as numbers (``APIObjectVersioner``), and so are the
    stand-in's: compared as integers when both are, never otherwise (an opaque version is
    never called older, so its event is taken). A list or a bookmark sets the reflector's
    own ``resourceVersion`` whatever it is.
    """
    if not (version.isascii() and version.isdigit() and than.isascii() and than.isdigit()):
        return False
    return int(version) < int(than)


class Reflector(Generic[Stored]):
    """One :class:`Watched` collection's objects, kept by list+watch (module docstring)."""

    def __init__(
        self,
        api: Api,
        spec: Watched,
        settings: InformerSettings,
        *,
        on_change: Callable[[], None] = lambda: None,
        rng: random.Random | None = None,
        transform: Callable[[KubeObject], Stored] = as_sent,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.spec = spec
        self.settings = settings
        self.transform = transform  # what is kept of an object (client-go's SetTransform)
        self.on_change = on_change
        self._rng = rng or random.Random()
        self._clock, self._sleep = clock, sleep  # injected: the schedule tested without waiting
        self.backoff = Backoff(settings.backoff(), clock=clock, rng=self._rng)
        #: uid -> the object as the API last sent it (transformed)
        self.store: dict[str, Stored] = {}
        self.resource_version: str | None = None
        self.synced = False  #: a first list completed
        self.up = False  #: the last request succeeded
        self.problem: str | None = None  #: the current error, in words
        self.last_sync = 0.0  #: unix time of the last complete list or watch event
        self.errors: Counter[str] = Counter()
        self.restarts: Counter[str] = Counter()  #: closed, short, expired, error
        self.lists = 0
        self._failures = 0

    def __repr__(self) -> str:
        return f"Reflector({self.spec}, {len(self.store)} objects, rv={self.resource_version})"

    async def run(self) -> None:
        """List and watch until cancelled; wait the backoff after a failed round."""
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                if await self._watch():
                    self.restarts["closed"] += 1
                    self.backoff.reset()  # a watch that ran normally: the API is healthy
                    log.debug("watch of %s closed by the server: resuming", self.spec)
                    continue
                self.restarts["short"] += 1
                delay = self.backoff.next()
                log.debug("watch of %s closed at once: again in %.1f s", self.spec, delay)
            except _Expired:
                delay = self._expired()
            except KubeApiError as exc:
                if exc.status == 410:
                    delay = self._expired()
                else:
                    self.restarts["error"] += 1
                    delay = self._failed(exc)
            except Exception as exc:  # a bug or a surprise: counted, retried, never fatal
                log.exception("management cluster API: %s: unexpected error", self.spec)
                self.restarts["error"] += 1
                delay = self._failed(KubeApiError(0, "internal", type(exc).__name__))
            await self._sleep(delay)

    @property
    def failures(self) -> int:
        """Requests failed in a row (0 after a good answer)."""
        return self._failures

    def _expired(self) -> float:
        """A 410: the next round lists; routine (compaction), so no problem, but it waits
        the backoff like any failed round (an API that expires every watch is not listed
        in a loop)."""
        self.restarts["expired"] += 1
        self.resource_version = None
        delay = self.backoff.next()
        log.debug("watch of %s expired: listing again in %.1f s", self.spec, delay)
        return delay

    def _failed(self, exc: KubeApiError) -> float:
        """Count the error, say it once, and how long to wait."""
        self.errors[exc.reason] += 1
        self.up = False
        problem = f"{self.spec}: {exc}"
        if problem != self.problem:
            log.warning("management cluster API: %s", problem)
        self.problem = problem
        self._failures += 1
        delay = self.backoff.next()
        if exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return delay

    def _ok(self) -> None:
        if self.problem is not None:
            log.warning("management cluster API: %s: answering again", self.spec)
        self.up = True
        self.problem = None
        self._failures = 0
        self.last_sync = time.time()

    def _params(self) -> dict[str, str]:
        params = {"labelSelector": self.spec.label_selector}
        if self.spec.field_selector:
            params["fieldSelector"] = self.spec.field_selector
        return params

    async def _list(self) -> None:
        items: dict[str, Stored] = {}
        token = ""
        restarted = False
        while True:
            started = self._clock()
            params = {**self._params(), "limit": str(self.settings.page_size)}
            if token:
                params["continue"] = token
            try:
                page = await self.api.list(self.spec.path, params)
            except KubeApiError as exc:
                if exc.status == 410 and token and not restarted:  # the token expired
                    items, token, restarted = {}, "", True
                    continue
                raise
            found: list[KubeObject] = page["items"]
            if self.settings.transform_off_loop:
                kept = await in_background(self._kept, paced(found))
                items.update(kept)
            else:
                per_slice = max(1, self.settings.events_per_slice)
                for start in range(0, len(found), per_slice):
                    chunk = found[start : start + per_slice]
                    items.update(self._kept(chunk))
                    if len(chunk) == per_slice:
                        # A page of 500 is several milliseconds of transforms, and every
                        # reflector lists at once after a 410: the loop serves between
                        # slices.
                        await asyncio.sleep(0)
            metadata = page.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                break
            if self.settings.list_pause > 0:
                await self._sleep(self.settings.list_pause * (self._clock() - started))
        self.lists += 1
        self.store = items
        self.resource_version = str(metadata.get("resourceVersion") or "") or None
        self.synced = True
        self._ok()
        self.on_change()

    def _kept(self, found: Iterable[KubeObject]) -> dict[str, Stored]:
        """Listed objects by uid, transformed (pure: on the loop or in a worker thread)."""
        kept: dict[str, Stored] = {}
        for item in found:
            uid = _uid(item)
            if uid:
                kept[uid] = self.transform(item)
        return kept

    async def _watch(self) -> bool:
        """One watch to its end: True if it ended normally, False if the server closed it
        within :attr:`InformerSettings.short_watch` seconds with no event (client-go's
        "very short watch"); an ``ERROR`` event or a bad answer raises."""
        low, high = self.settings.watch_seconds
        seconds = int(self._rng.uniform(low, high))
        params = {
            **self._params(),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        if self.resource_version is not None:
            params["resourceVersion"] = self.resource_version
        timeout = seconds + self.settings.watch_grace
        started = self._clock()
        events = self.api.watch(self.spec.path, params, timeout)
        count = 0
        per_slice = max(1, self.settings.events_per_slice)
        async with contextlib.aclosing(events):
            async for event in events:
                self._event(event)
                if not count:  # the watch answered (an ERROR event raised above)
                    self._ok()
                count += 1
                if count % per_slice == 0:
                    # Events already buffered come without a suspension: yield, so the
                    # loop serves what waits (a scrape) between two slices.
                    await asyncio.sleep(0)
        return count > 0 or self._clock() - started >= self.settings.short_watch

    def _event(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Expired()
            message = str(obj.get("message", ""))[:300]
            status = code if isinstance(code, int) else 0
            raise KubeApiError(status, status_reason(status), message)
        rv = _version(obj)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            uid = _uid(obj)
            known = self.store.get(uid)
            if known is not None and older(rv, _version(known)):
                self.errors["stale_event"] += 1  # out of order: the newer object stays
                log.debug("%s: %s event older than the object held: ignored", self.spec, kind)
                return
            if kind == "DELETED":
                if self.store.pop(uid, None) is not None:
                    self.on_change()
            elif uid:
                self.store[uid] = self.transform(obj)
                self.on_change()
        elif kind != "BOOKMARK":
            raise KubeApiError(200, "bad_response", f"unknown watch event type {str(kind)[:40]!r}")
        if rv:
            self.resource_version = rv
        self.last_sync = time.time()


def _version(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("resourceVersion") or "") if isinstance(metadata, Mapping) else ""


def _uid(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) else ""
