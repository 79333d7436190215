"""The management cluster's Secrets, kept current by list+watch as client-go's informers do.

One :class:`Reflector` per :class:`WatchSpec` (a selector, in one namespace or
cluster-wide): the three kinds of ``discovery.secrets`` each have their own, because no
one label selector finds them all — Argo CD's (``argocd.argoproj.io/secret-type=cluster``),
Cluster API's (label ``cluster.x-k8s.io/cluster-name``, field ``type=cluster.x-k8s.io/secret``)
and the user's (``--discovery.kubernetes.label-selector``) — times each namespace given
(none: cluster-wide). :class:`Informer` runs them as its own named tasks and merges their
objects by ``uid``; any :class:`Watched` collection is read alike (``reactor.cd.watch``).

A reflector's loop:

1. **list** with ``limit``/``continue`` paging; the objects replace the reflector's store
   at once (nothing is published half-listed), and the list's ``resourceVersion`` is
   where the watch starts. A ``continue`` token that expired (410) lists again from the
   start.
2. **watch** from the last ``resourceVersion`` seen, ``allowWatchBookmarks=true``, with a
   ``timeoutSeconds`` jittered in :attr:`InformerSettings.watch_seconds` (so thousands of
   exporters' watches do not end together). ``ADDED``/``MODIFIED`` store the object,
   ``DELETED`` drops it (with a label selector it may mean "no longer matches": either way
   it is no longer ours), ``BOOKMARK`` only moves the ``resourceVersion``.
3. a **clean close** (the server's timeout, a restart) watches again from that
   ``resourceVersion``: no list. An ``ERROR`` event holding a 410 ``Status``, or an HTTP
   410, means the history is gone: list again (1).
4. any other **error** is counted by reason (``kubeapi.KubeApiError.reason``) and retried after
   an exponential backoff with full jitter (:attr:`InformerSettings.backoff_initial` to
   ``backoff_max``), or the server's ``Retry-After`` on a 429; from the watch when there
   is a ``resourceVersion``, from the list otherwise. The store is kept meanwhile: the
   clusters last seen stay published while the API fails.

:attr:`Informer.synced` is true once every reflector completed a first list (the
exporter's ``/-/ready``); :attr:`Informer.up` while none is failing. Problems (a namespace
forbidden, a bad token) are readable as :meth:`Informer.problems` and logged once when
they appear, at WARNING; nothing of a Secret's data is ever logged.

I/O (asyncio): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from discovery.kubeapi import KubeApiError, status_reason
from discovery.secrets import ARGOCD_CLUSTER, ARGOCD_LABEL, CAPI_LABEL, CAPI_TYPE, Kind

log = logging.getLogger(__name__)

Secret = dict[str, Any]

#: ``kubectl apply``'s copy of the whole object, ``data`` included.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Secret) -> Secret:
    """The object as stored: without ``metadata.managedFields`` (server-side apply's
    bookkeeping, 2.5 KiB of a typical Secret) nor ``kubectl apply``'s last-applied copy
    (the data a second time, credentials included), as client-go's informers drop them
    with a transform. Nothing read from a Secret needs them; measured by
    ``bench/secret_discovery.py``, they were the exporter's memory per cluster above the
    same clusters from files (1.16x at 1,000)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and (
        "managedFields" in metadata or LAST_APPLIED in (metadata.get("annotations") or {})
    ):
        metadata = dict(metadata)
        metadata.pop("managedFields", None)
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            metadata["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        obj = {**obj, "metadata": metadata}
    return obj


class Api(Protocol):
    """What a reflector needs of the API (``discovery.kubeapi.KubeApi``)."""

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
    #: first retry delay after an error, doubled per failure up to ``backoff_max`` (s)
    backoff_initial: float = 0.8
    backoff_max: float = 30.0


class Watched(Protocol):  # what a reflector lists and watches: a WatchSpec, or any collection
    @property
    def kind(self) -> str: ...  # a short name, for logs and task names
    @property
    def path(self) -> str: ...
    @property
    def label_selector(self) -> str: ...
    @property
    def field_selector(self) -> str: ...


@dataclass(frozen=True)
class WatchSpec:
    """One list+watch: a kind's selectors, in one namespace or cluster-wide (None)."""

    kind: Kind
    label_selector: str
    field_selector: str = ""
    namespace: str | None = None

    @property
    def path(self) -> str:
        if self.namespace is None:
            return "/api/v1/secrets"
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    def __str__(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        selectors = ", ".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.kind} Secrets ({selectors}) in {where}"


def watch_specs(label_selector: str, namespaces: Sequence[str] = ()) -> list[WatchSpec]:
    """The three kinds' list+watches, per namespace given, or cluster-wide."""
    specs = []
    where: list[str | None] = [*dict.fromkeys(namespaces)] or [None]
    for ns in where:
        specs.append(WatchSpec("argocd", f"{ARGOCD_LABEL}={ARGOCD_CLUSTER}", "", ns))
        specs.append(WatchSpec("cluster-api", CAPI_LABEL, f"type={CAPI_TYPE}", ns))
        specs.append(WatchSpec("labelled", label_selector, "", ns))
    return specs


class _Expired(Exception):
    """The watch's history is gone (410): list again."""


class Reflector:
    """One :class:`WatchSpec`'s objects, kept by list+watch (module docstring)."""

    def __init__(
        self,
        api: Api,
        spec: Watched,
        settings: InformerSettings,
        *,
        on_change: Callable[[], None] = lambda: None,
        rng: random.Random | None = None,
        transform: Callable[[Secret], Secret] = slim,
    ) -> None:
        self.api = api
        self.spec = spec
        self.settings = settings
        self.transform = transform  # what is kept of an object (client-go's SetTransform)
        self.on_change = on_change
        self._rng = rng or random.Random()
        #: uid -> the Secret as the API last sent it
        self.store: dict[str, Secret] = {}
        self.resource_version: str | None = None
        self.synced = False  #: a first list completed
        self.up = False  #: the last request succeeded
        self.problem: str | None = None  #: the current error, in words
        self.last_sync = 0.0  #: unix time of the last complete list or watch event
        self.errors: Counter[str] = Counter()
        self.restarts: Counter[str] = Counter()  #: closed, expired, error
        self.lists = 0
        self._failures = 0

    def __repr__(self) -> str:
        return f"Reflector({self.spec}, {len(self.store)} objects, rv={self.resource_version})"

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
                self.restarts["closed"] += 1
                log.debug("watch of %s closed by the server: resuming", self.spec)
            except _Expired:
                self.restarts["expired"] += 1
                self.resource_version = None
                log.debug("watch of %s expired: listing again", self.spec)
            except KubeApiError as exc:
                if exc.status == 410:
                    self.restarts["expired"] += 1
                    self.resource_version = None
                    continue
                self.restarts["error"] += 1
                await asyncio.sleep(self._failed(exc))
            except Exception as exc:  # a bug or a surprise: counted, retried, never fatal
                log.exception("management cluster API: %s: unexpected error", self.spec)
                self.restarts["error"] += 1
                await asyncio.sleep(self._failed(KubeApiError(0, "internal", type(exc).__name__)))

    @property
    def failures(self) -> int:
        """Requests failed in a row (0 after a good answer)."""
        return self._failures

    def _failed(self, exc: KubeApiError) -> float:
        """Count the error, say it once, and how long to wait."""
        self.errors[exc.reason] += 1
        self.up = False
        problem = f"{self.spec}: {exc}"
        if problem != self.problem:
            log.warning("management cluster API: %s", problem)
        self.problem = problem
        self._failures += 1
        ceiling = min(
            self.settings.backoff_max,
            self.settings.backoff_initial * 2 ** min(self._failures - 1, 30),
        )
        delay = self._rng.uniform(ceiling / 2, ceiling)
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
        items: dict[str, Secret] = {}
        token = ""
        while True:
            params = {**self._params(), "limit": str(self.settings.page_size)}
            if token:
                params["continue"] = token
            try:
                page = await self.api.list(self.spec.path, params)
            except KubeApiError as exc:
                if exc.status == 410 and token:  # the continue token expired: start again
                    items, token = {}, ""
                    continue
                raise
            for item in page["items"]:
                uid = _uid(item)
                if uid:
                    items[uid] = self.transform(item)
            metadata = page.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                break
        self.lists += 1
        self.store = items
        self.resource_version = str(metadata.get("resourceVersion") or "") or None
        self.synced = True
        self._ok()
        self.on_change()

    async def _watch(self) -> None:
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
        events = self.api.watch(self.spec.path, params, timeout)
        async with contextlib.aclosing(events):
            first = True
            async for event in events:
                self._event(event)
                if first:  # the watch answered (an ERROR event raised above)
                    self._ok()
                    first = False

    def _event(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Expired()
            message = str(obj.get("message", ""))[:300]
            status = code if isinstance(code, int) else 0
            raise KubeApiError(status, status_reason(status), message)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            uid = _uid(obj)
            if uid:
                self.store[uid] = self.transform(obj)
                self.on_change()
        elif kind == "DELETED":
            if self.store.pop(_uid(obj), None) is not None:
                self.on_change()
        elif kind != "BOOKMARK":
            raise KubeApiError(200, "bad_response", f"unknown watch event type {str(kind)[:40]!r}")
        if rv:
            self.resource_version = str(rv)
        self.last_sync = time.time()


def _uid(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) else ""


class Informer:
    """Every :class:`WatchSpec`'s reflector, run as owned tasks, merged by ``uid``.

    ``async with`` starts them, leaving cancels and awaits them (or :meth:`run` until
    cancelled). :meth:`objects` is what the exporter reads each cycle.
    """

    def __init__(
        self,
        api: Api,
        specs: Iterable[Watched],
        settings: InformerSettings = InformerSettings(),
        *,
        rng: random.Random | None = None,
        transform: Callable[[Secret], Secret] = slim,
    ) -> None:
        self.settings = settings
        self.reflectors = [
            Reflector(api, spec, settings, on_change=self._changed, rng=rng, transform=transform)
            for spec in specs
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self._generation = 0
        self._merged: tuple[int, dict[str, Secret]] = (-1, {})
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

    def objects(self) -> dict[str, Secret]:
        """Every Secret any reflector holds, by ``uid`` (rebuilt only after a change)."""
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

    async def __aenter__(self) -> Informer:
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
