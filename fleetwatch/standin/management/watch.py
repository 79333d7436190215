"""Watches as kube-apiserver streams them: chunked, one JSON event per line.

Each line is ``{"type": ..., "object": ...}`` followed by a newline. Where a watch starts:

- ``resourceVersion`` unset or ``"0"``: a synthetic ``ADDED`` for every object that
  matches, then what happens next (the watch cache's "get state and start at most recent");
- ``resourceVersion=N``: every change after ``N`` (replayed from the history window),
  then what happens next; ``N`` older than the window gives one ``ERROR`` event holding a
  ``410 Expired`` ``Status`` and the end of the stream, as the watch cache answers;
  ``N`` ahead of the server waits up to 3 s, then 504, as ``waitUntilFreshAndBlock``;
- ``sendInitialEvents=true`` (the WatchList protocol, with ``resourceVersionMatch=
  NotOlderThan`` and bookmarks): the current objects as ``ADDED``, then a ``BOOKMARK``
  annotated ``k8s.io/initial-events-end: "true"``.

With ``allowWatchBookmarks=true`` a ``BOOKMARK`` (an object of the kind holding only
``metadata.resourceVersion``, the server's latest revision) is sent every bookmark period,
at a moment when no event is waiting (kube-apiserver: about a minute; configurable here so
tests need not wait). The stream ends cleanly after ``timeoutSeconds`` (unset: a random
time between the minimum request timeout and twice it, 30-60 minutes, as kube-apiserver),
when the control API closes all watches, when the server stops, or when the watcher falls
more than its buffer behind (``store.WatchStream``): kube-apiserver's cacher forces such a
watcher closed ("unresponsive") rather than let it stall or grow without bound, and its
client resumes from the last ``resourceVersion`` it received. A watch never stalls: it
delivers, or it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from fleetwatch.standin.management.kinds import Kind
from fleetwatch.standin.management.requests import Target, truthy
from fleetwatch.standin.management.selectors import Predicate
from fleetwatch.standin.management.status import (
    ApiError,
    bad_request,
    expired,
    too_large_resource_version,
)
from fleetwatch.standin.management.store import WATCH_BUFFER, ObjectStore, WatchStream
from fleetwatch.standin.management.tables import TABLE_CONTENT_TYPE, table

#: kube-apiserver's ``--min-request-timeout`` default: watches last 1-2 times this.
MIN_REQUEST_TIMEOUT = 1800.0
#: How long a read ahead of the server waits for it (``blockTimeout`` of the cacher).
FRESHNESS_WAIT = 3.0
#: How often an idle watch checks that its client is still there.
_LIVENESS = 1.0


def bookmark(kind: Kind, revision: int, initial_end: bool = False) -> dict[str, Any]:
    """A BOOKMARK's object: the kind, and metadata holding only the resourceVersion."""
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if not kind.group:
        meta["creationTimestamp"] = None  # a typed object's encoding, as for core kinds
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return (json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n").encode()


def _encoder(kind: Kind, as_table: bool) -> Callable[[str, dict[str, Any]], bytes]:
    """Lines for a watch's object events: the objects, or one-row Tables whose column
    definitions only the first carries (kube-apiserver's ``NoHeaders`` after it)."""
    if not as_table:
        return _line
    sent_headers = False

    def encode(event_type: str, obj: dict[str, Any]) -> bytes:
        nonlocal sent_headers
        row = table(
            kind,
            [obj],
            {"resourceVersion": obj["metadata"]["resourceVersion"]},
            headers=not sent_headers,
        )
        sent_headers = True
        return _line(event_type, row)

    return encode


def _revision(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise bad_request(f'invalid resource version "{value}"') from None
    if number < 0:
        raise bad_request(f'invalid resource version "{value}"')
    return number


async def serve_watch(
    request: web.Request,
    store: ObjectStore,
    target: Target,
    predicate: Predicate,
    bookmark_seconds: float,
    *,
    capacity: int = WATCH_BUFFER,
    as_table: bool = False,
) -> web.StreamResponse:
    query = request.query
    encode = _encoder(target.kind, as_table)
    kind = target.kind
    rv = query.get("resourceVersion", "")
    with_bookmarks = truthy(query.get("allowWatchBookmarks"))
    initial_events = truthy(query.get("sendInitialEvents"))
    if initial_events and (
        query.get("resourceVersionMatch") != "NotOlderThan" or not with_bookmarks
    ):
        raise bad_request(
            "sendInitialEvents requires resourceVersionMatch=NotOlderThan and "
            "allowWatchBookmarks=true"
        )
    try:
        timeout = float(query.get("timeoutSeconds") or 0)
    except ValueError:
        raise bad_request(f"invalid timeoutSeconds {query['timeoutSeconds']!r}") from None
    if timeout <= 0:  # unset or 0: the server's own choice, as kube-apiserver's
        timeout = random.uniform(MIN_REQUEST_TIMEOUT, 2 * MIN_REQUEST_TIMEOUT)
    start = _revision(rv) if rv else 0
    if start > store.revision and not await store.wait_for(start, FRESHNESS_WAIT):
        raise too_large_resource_version(start, store.revision)

    # The events up to now are taken without an await, and the watcher is registered before
    # the next one: no write falls between the two.
    watcher = WatchStream(kind, target.namespace, predicate, capacity)
    first: list[bytes] = []
    too_old: bytes | None = None
    if initial_events or not start:
        first = [encode("ADDED", o) for o in store.items(kind, target.namespace, predicate)]
        if initial_events:
            first.append(_line("BOOKMARK", bookmark(kind, store.revision, initial_end=True)))
    elif start < store.compacted:
        error = expired(f"too old resource version: {start} ({store.compacted})")
        too_old = _line("ERROR", error.status())
    else:
        for event in store.events_since(start):
            seen = watcher.translate(event)
            if seen is not None:
                first.append(encode(*seen))
    content_type = TABLE_CONTENT_TYPE if as_table else "application/json"
    response = web.StreamResponse(headers={"Content-Type": content_type})
    response.enable_chunked_encoding()
    if too_old is not None:
        await response.prepare(request)
        await response.write(too_old)
        await response.write_eof()
        return response
    # Registered before the first await: a write while the answer's head is being sent
    # is queued for this watch, after the events taken above.
    store.watchers.add(watcher)
    try:
        await response.prepare(request)
        for line in first:
            await response.write(line)
        await _pump(
            request, response, store, watcher, timeout, with_bookmarks, bookmark_seconds, encode
        )
    finally:
        store.watchers.discard(watcher)
    with contextlib.suppress(ConnectionResetError):  # the client went away: nothing to end
        await response.write_eof()
    return response


#: what a ``watch_garbage`` fault sends: a proxy's error page where an event was due
GARBAGE = b"<html><head><title>502 Bad Gateway</title></head></html>\n"


async def serve_broken_watch(
    request: web.Request, fault: str, error: ApiError
) -> web.StreamResponse:
    """A watch answered 200 that breaks at once (the control API's watch faults): one
    ``ERROR`` event holding ``error``'s ``Status`` (``watch_error``), one line that is not
    JSON (``watch_garbage``), or nothing at all (``watch_close``); then the stream ends.
    What a client must not answer with a tight loop of new requests."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    if fault == "watch_error":
        await response.write(_line("ERROR", error.status()))
    elif fault == "watch_garbage":
        await response.write(GARBAGE)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


async def _pump(
    request: web.Request,
    response: web.StreamResponse,
    store: ObjectStore,
    watcher: WatchStream,
    lifetime: float,
    with_bookmarks: bool,
    bookmark_seconds: float,
    encode: Callable[[str, dict[str, Any]], bytes],
) -> None:
    """Send the watcher's events as they come, bookmarks when it is idle, until its end.

    Events waiting are always taken first: a bookmark comes due only when none is waiting,
    and the wait for the next event is never a zero-length one (Python 3.11's
    ``wait_for(queue.get(), 0)`` cancels the get before it runs, so a watch with events
    waiting once its bookmark was due would spin and send nothing).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lifetime
    next_bookmark = loop.time() + bookmark_seconds
    while not watcher.ended:
        now = loop.time()
        if now >= deadline:
            return
        item = watcher.take()
        if item is not None:
            await response.write(encode(*item))
            continue
        if with_bookmarks and now >= next_bookmark:
            # Every event given to this watch was written: the revision covers them all.
            await response.write(_line("BOOKMARK", bookmark(watcher.kind, store.revision)))
            next_bookmark = now + bookmark_seconds
            continue
        wake = min(deadline, next_bookmark if with_bookmarks else deadline, now + _LIVENESS)
        if not await watcher.wait(wake - now):
            transport = request.transport
            if transport is None or transport.is_closing():
                return  # the client went away


__all__ = ["ApiError", "bookmark", "serve_broken_watch", "serve_watch"]
