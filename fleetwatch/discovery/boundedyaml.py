"""YAML of untrusted kubeconfigs, parsed within bounds.

YAML aliases let 752 bytes stand for a billion nodes (the "billion laughs"): libyaml
builds the shared structure in microseconds, but whatever walks it later (serialising a
user entry to hash it, copying it, the kubernetes client) pays for every expanded node,
past a gigabyte of memory. Aliases are not refused outright: kubectl's YAML library
accepts them, and a hand-written kubeconfig may share a user entry through an anchor.
What is refused is what the same library refuses as "excessive aliasing": a document
whose expanded size exceeds :data:`MAX_NODES`, and an alias to a node that contains it
(a cycle, infinite once expanded).

Dense documents cost memory too without any alias: libyaml's node objects take about 350
bytes each (a 2 MB list of a million one-letter items needs 350 MB and 9 s), so the same
node bound applies to every document, whatever its size in bytes.

The check is a first pass over libyaml's events (C parsing, Python counting: a fraction
of the load itself), which counts every node, and every alias as the size of the node it
names; it stops at the first node over the bound, so a bomb costs microseconds. Only a
document that passed is loaded.

Loading streams the long lists (:func:`load_streaming`): a kubeconfig of thousands of
contexts is three long lists (``clusters``, ``users``, ``contexts``), and building the
whole document at once (``yaml.load`` with ``yaml.CSafeLoader``) would hold every node of
the file and then every object, embedded certificates included, at the same time, and
spend the time of building the node graph and of the garbage collector walking it. Each
item of those lists is composed and constructed on its own (libyaml's events, PyYAML's
own composer, resolver and safe constructor, so every value is what ``yaml.safe_load``
makes of it) and handed to the caller, which keeps what it needs and drops the rest: no
peak above the caller's own data (figures: docs/exporter.md, "Kubeconfig sources"). A
document of any other shape (a merge key or an anchor on a list at the top, a list named
twice, several documents, anything libyaml or the constructor refuses) is loaded whole
instead, so that its result or its error is exactly ``yaml.load``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.resolver import Resolver

#: Nodes a kubeconfig may hold once its aliases are expanded. A context with its cluster
#: and user is 25 to 40 nodes, so this is 25,000 or more contexts in one file; the worst
#: document under it (a million one-letter items) parses in about 9 s and 350 MB, off the
#: event loop, once per change.
MAX_NODES = 1_000_000


class YamlLimitError(ValueError):
    """A document over the bounds; the message is the problem's reason (no content)."""


class _NodeCounter:
    """Counts the nodes of the events it is fed, aliases expanded; raises past the limit."""

    def __init__(self, limit: int | None) -> None:
        # MAX_NODES read at each parse, so tests may lower it
        self.limit = MAX_NODES if limit is None else limit
        self.total = 0
        self.sizes: dict[str, int] = {}  # anchor -> expanded size of the node it names
        self.open_nodes: list[tuple[str | None, int]] = []  # (anchor, total when it started)
        self.open_anchors: set[str] = set()  # anchors of the collections being read
        self.aliases = 0

    def feed(self, events: Iterable[yaml.Event | None]) -> None:
        # One loop over locals: it runs once per event of every kubeconfig read.
        total, limit, sizes = self.total, self.limit, self.sizes
        open_nodes, open_anchors = self.open_nodes, self.open_anchors
        try:
            for event in events:
                if isinstance(event, yaml.AliasEvent):
                    anchor = event.anchor or ""
                    if anchor in open_anchors:
                        raise YamlLimitError(f"alias *{_short(anchor)} inside the node it names")
                    total += sizes.get(anchor, 1)  # an unknown anchor: the loader says so
                    self.aliases += 1
                elif isinstance(event, yaml.ScalarEvent):
                    total += 1
                    if event.anchor is not None:
                        sizes[event.anchor] = 1
                elif isinstance(event, yaml.CollectionStartEvent):
                    total += 1
                    open_nodes.append((event.anchor, total - 1))
                    if event.anchor is not None:
                        open_anchors.add(event.anchor)
                elif isinstance(event, yaml.CollectionEndEvent):
                    named, start = open_nodes.pop()
                    if named is not None:
                        sizes[named] = total - start
                        open_anchors.discard(named)
                else:
                    continue
                if total > limit:
                    what = f" ({self.aliases} aliases)" if self.aliases else ""
                    raise YamlLimitError(
                        f"too many YAML nodes{what}: more than {limit} once expanded"
                    )
        finally:
            self.total = total


def count_nodes(data: bytes | str, limit: int | None = None) -> int:
    """Nodes of every document in ``data`` with aliases expanded; raises past ``limit``.

    ``limit`` defaults to :data:`MAX_NODES` (read at each call, so tests may lower it).

    Raises :class:`YamlLimitError` for a document over ``limit`` or an alias to a node
    that contains it, and ``yaml.YAMLError`` for what libyaml cannot parse.
    """
    counter = _NodeCounter(limit)
    counter.feed(yaml.parse(data, Loader=yaml.CSafeLoader))
    return counter.total


def load(data: bytes | str, limit: int | None = None) -> Any:
    """The one document of ``data``, refused (:class:`YamlLimitError`) when over bounds."""
    return load_counted(data, limit)[0]


def load_counted(data: bytes | str, limit: int | None = None) -> tuple[Any, int]:
    """:func:`load`, and the document's nodes with aliases expanded."""
    total = count_nodes(data, limit)
    return yaml.load(data, Loader=yaml.CSafeLoader), total


_MAP_TAG = Resolver.DEFAULT_MAPPING_TAG

#: Bytes from which a document is streamed. A mounted Secret's kubeconfig (a few KiB) is
#: quicker to load whole; streaming is for big main kubeconfigs.
STREAM_FROM = 64 * 1024

#: An item of a streamed list: (the top-level key, its index in the list, its value).
ItemSink = Callable[[str, int, Any], None]


class NotStreamable(Exception):
    """The document is not of the shape :func:`load_streaming` streams: load it whole."""


def load_streaming(
    data: bytes | str, lists: Collection[str], each: ItemSink, limit: int | None = None
) -> dict[Any, Any]:
    """The top-level mapping of ``data``, the items of its ``lists`` handed to ``each``.

    Each item of a top-level list named in ``lists`` goes to ``each(key, index, item)``
    as soon as it is built, and the mapping holds ``None`` for that key (a value that is
    not a list stays as it is). The nodes are counted as the events are taken, and the
    document refused (:class:`YamlLimitError`) past the bounds, as :func:`load` refuses
    it. Raises :class:`NotStreamable` for a document of another shape, one that does not
    parse, or one under :data:`STREAM_FROM` bytes (whatever ``each`` was handed before is
    to be thrown away); :func:`load` then gives its value or its error.
    """
    if len(data) < STREAM_FROM:
        raise NotStreamable()  # whole: libyaml's own composer is quicker on small files
    loader = _StreamingLoader(data, _NodeCounter(limit))
    try:
        return loader.top(lists, each)
    except (NotStreamable, YamlLimitError):
        raise
    except Exception:  # libyaml's, the composer's and the constructor's own errors alike
        raise NotStreamable() from None
    finally:
        loader.dispose()


def hand_items(key: str, value: Any, each: ItemSink) -> Any:
    """``value``'s items to ``each`` if it is a list (then ``None``), else ``value``."""
    if not isinstance(value, list):
        return value
    for index, item in enumerate(value):
        each(key, index, item)
    return None


class _StreamingLoader(CParser, Composer, SafeConstructor, Resolver):
    """libyaml's parser (events in C), PyYAML's composer, resolver and safe constructor.

    ``yaml.CSafeLoader`` is the same parser, resolver and constructor with libyaml's own
    composer, which only composes whole documents; PyYAML's composer (``compose_node``)
    works from the same events one node at a time.
    """

    def __init__(self, data: bytes | str, counter: _NodeCounter) -> None:
        CParser.__init__(self, data)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._counter = counter

    def get_event(self) -> Any:
        """Each event is counted as it is taken: the bounds hold before a node is built."""
        event = super().get_event()
        self._counter.feed((event,))
        return event

    def _value(self, index: Any) -> Any:
        """The next node, composed and constructed as ``yaml.load`` constructs a document."""
        return self.construct_document(self.compose_node(None, index))

    def _expect(self, kind: type) -> Any:
        if not self.check_event(kind):
            raise NotStreamable()
        return self.get_event()

    def top(self, lists: Collection[str], each: ItemSink) -> dict[Any, Any]:
        self._expect(StreamStartEvent)
        self._expect(DocumentStartEvent)
        start = self._expect(MappingStartEvent)
        if start.anchor is not None or start.tag not in (None, "!", _MAP_TAG):
            raise NotStreamable()
        out: dict[Any, Any] = {}
        while not self.check_event(MappingEndEvent):
            event = self.peek_event()
            if isinstance(event, ScalarEvent) and event.value == "<<" and event.implicit[0]:
                raise NotStreamable()  # a merge key: the constructor's flattening applies
            key = self._value(None)
            if key in out and key in lists:
                raise NotStreamable()  # the later one wins in yaml.load: load it whole
            if key not in lists:
                out[key] = self._value(key)
            elif self._plain_sequence():
                self.get_event()
                index = 0
                while not self.check_event(SequenceEndEvent):
                    each(key, index, self._value(index))
                    index += 1
                self.get_event()
                out[key] = None
            else:  # another shape (a tagged list, a mapping, null): as yaml.load builds it
                out[key] = hand_items(key, self._value(key), each)
        self.get_event()
        self._expect(DocumentEndEvent)
        self._expect(StreamEndEvent)
        return out

    def _plain_sequence(self) -> bool:
        """Whether the next node is a sequence without anchor or explicit tag."""
        event = self.peek_event()
        return (
            isinstance(event, SequenceStartEvent)
            and event.anchor is None
            and (event.tag is None or event.tag == "!" or bool(event.implicit))
        )


def _short(anchor: str) -> str:
    return anchor if len(anchor) <= 40 else anchor[:40] + "..."
