"""Garbage only the collector frees: a pair of objects in a reference cycle, for the tests
of the garbage-collector policies (``fleetwatch.common.gcpolicy``, ``reactor.collector``)."""

from __future__ import annotations

import weakref


class Node:
    """An object in a reference cycle (only the collector frees it)."""

    def __init__(self) -> None:
        self.other: Node | None = None


def garbage_cycle() -> weakref.ref[Node]:
    """A dropped pair in a cycle; the reference dies when the collector frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)
