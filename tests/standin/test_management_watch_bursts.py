"""A watch under bursts of writes and slow readers: it delivers every event, or it ends.

kube-apiserver never leaves a watch silent with events to send: a watcher that keeps up
gets them all, one that falls too far behind is closed ("unresponsive watcher") and its
client resumes from the last ``resourceVersion`` it received. These tests hold the
stand-in to that with raw HTTPS reads, so they see the stream exactly as sent.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fleetwatch.procs import wait_until
from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster
from tests.helpers.standin_management import argocd_cluster_secret, secret

pytestmark = pytest.mark.live

SECRETS = "/api/v1/namespaces/argocd/secrets"
#: A burst well over what one bookmark period lets the server write.
BURST = 3000
#: A watch buffer of 100 events, so that a burst of a few hundred overflows it.
SMALL_BUFFER = ManagementSettings(bookmark_seconds=0.05, watch_buffer=100)


@pytest.fixture
def cluster_settings() -> ManagementSettings:
    """A bookmark every 0.05 s, so that an idle watch sends one well before a burst."""
    return ManagementSettings(bookmark_seconds=0.05)


@pytest.fixture
def cluster_seed() -> list[dict[str, Any]]:
    return [secret("first", "argocd")]


class Stream:
    """One watch read line by line; a read that waits over ``timeout`` s raises."""

    def __init__(self, cluster: ThreadedManagementCluster, query: str, timeout: float) -> None:
        port = int(cluster.url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
        headers = {"Authorization": f"Bearer {cluster.token}"}
        self.conn.request("GET", f"{SECRETS}?watch=1&{query}", headers=headers)
        self.response = self.conn.getresponse()
        assert self.response.status == 200

    def next(self) -> dict[str, Any] | None:
        """The next event, or None at the end of the stream."""
        line = self.response.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        self.response.close()
        self.conn.close()


@contextmanager
def _watching(
    cluster: ThreadedManagementCluster, revision: int, idle: bool = False
) -> Iterator[Stream]:
    """A watch from ``revision`` with bookmarks, closed on the way out. ``idle``: nothing
    is written yet, so its first event must be a bookmark (taken here)."""
    query = f"resourceVersion={revision}&allowWatchBookmarks=true&timeoutSeconds=60"
    stream = Stream(cluster, query, timeout=10)
    try:
        if idle:
            first = stream.next()
            assert first is not None and first["type"] == "BOOKMARK", first
        yield stream
    finally:
        stream.close()


def _read_objects(stream: Stream, wanted: int, seconds: float) -> list[dict[str, Any]]:
    """Non-bookmark events until ``wanted`` or the end of the stream, within ``seconds``."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while len(found) < wanted and time.monotonic() < deadline:
        try:
            event = stream.next()
        except TimeoutError:  # silent for the socket's timeout: stalled
            break
        if event is None:
            break
        if event["type"] != "BOOKMARK":
            found.append(event)
    return found


def _names(events: list[dict[str, Any]]) -> list[str]:
    return [e["object"]["metadata"]["name"] for e in events]


def _burst(count: int, prefix: str = "c") -> list[dict[str, Any]]:
    return [argocd_cluster_secret(f"{prefix}{i}", f"https://127.0.0.1:{i}") for i in range(count)]


def test_a_burst_of_writes_after_an_idle_spell_is_delivered_whole(
    cluster: ThreadedManagementCluster,
) -> None:
    # Idle: a bookmark is due, and sent, before any write.
    with _watching(cluster, cluster.revision, idle=True) as stream:
        cluster.seed(_burst(BURST))  # one turn of the server's loop: all queued at once
        events = _read_objects(stream, BURST, seconds=30)
        assert len(events) == BURST, f"the watch stalled after {len(events)} of {BURST} events"
        assert _names(events) == [f"cluster-c{i}" for i in range(BURST)]
        revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert revisions == sorted(revisions) and revisions[-1] == cluster.revision
        after = stream.next()  # idle again: bookmarks resume, at the latest revision
        assert after is not None and after["type"] == "BOOKMARK"
        assert after["object"]["metadata"]["resourceVersion"] == str(cluster.revision)


@pytest.mark.parametrize("cluster_settings", [SMALL_BUFFER])
def test_a_burst_larger_than_the_watch_buffer_ends_the_watch_and_resuming_loses_nothing(
    cluster: ThreadedManagementCluster,
) -> None:
    start = cluster.revision
    with _watching(cluster, start, idle=True) as stream:
        assert cluster.open_watches() == 1
        cluster.seed(_burst(300))
        assert cluster.open_watches() == 0  # terminated by the write that overflowed it
        assert _read_objects(stream, 300, seconds=10) == []  # then the stream's clean end
    with _watching(cluster, start) as resumed:  # from the last version received
        assert _names(_read_objects(resumed, 300, seconds=10)) == [
            f"cluster-c{i}" for i in range(300)
        ]


@pytest.mark.parametrize("cluster_settings", [SMALL_BUFFER])
def test_a_watcher_that_stops_reading_is_terminated_not_left_hanging(
    cluster: ThreadedManagementCluster,
) -> None:
    start = cluster.revision
    with _watching(cluster, start, idle=True) as stream:
        # ~20 MB the client does not read: more than the sockets hold, so the server's
        # writes block; then more events than the buffer while they do.
        big = "x" * 700_000
        cluster.seed([secret(f"big{i}", "argocd", string_data={"v": big}) for i in range(30)])
        cluster.seed(_burst(150))
        wait_until(lambda: cluster.open_watches() == 0, 10, what="the slow watch terminated")
        # Reading again: what was already on its way, then the end, never a silent stream.
        delivered = _read_objects(stream, 180, seconds=20)
        assert len(delivered) < 180
        assert stream.next() is None
    last = int(delivered[-1]["object"]["metadata"]["resourceVersion"]) if delivered else start
    with _watching(cluster, last) as resumed:
        rest = _read_objects(resumed, 180 - len(delivered), seconds=20)
        assert _names(delivered + rest) == [f"big{i}" for i in range(30)] + [
            f"cluster-c{i}" for i in range(150)
        ]
