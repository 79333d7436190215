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

The check is a first pass over libyaml's events (C parsing, Python counting: about 55 ms
for a 1,000-context, 5.7 MB kubeconfig, a quarter of the load itself), which counts every
node, and every alias as the size of the node it names; it stops at the first node over
the bound, so a bomb costs microseconds. Only a document that passed is loaded, with
``yaml.CSafeLoader`` (ten times the pure-Python loader on big files).
"""

from __future__ import annotations

from typing import Any

import yaml

#: Nodes a kubeconfig may hold once its aliases are expanded. A context with its cluster
#: and user is 25 to 40 nodes, so this is 25,000 or more contexts in one file; the worst
#: document under it (a million one-letter items) parses in about 9 s and 350 MB, off the
#: event loop, once per change.
MAX_NODES = 1_000_000


class YamlLimitError(ValueError):
    """A document over the bounds; the message is the problem's reason (no content)."""


def count_nodes(data: bytes | str, limit: int | None = None) -> int:
    """Nodes of every document in ``data`` with aliases expanded; raises past ``limit``.

    ``limit`` defaults to :data:`MAX_NODES` (read at each call, so tests may lower it).

    Raises :class:`YamlLimitError` for a document over ``limit`` or an alias to a node
    that contains it, and ``yaml.YAMLError`` for what libyaml cannot parse.
    """
    limit = MAX_NODES if limit is None else limit
    total = 0
    sizes: dict[str, int] = {}  # anchor -> expanded size of the node it names
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, total when it started)
    open_anchors: set[str] = set()  # anchors of the collections being read
    aliases = 0
    for event in yaml.parse(data, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor or ""
            if anchor in open_anchors:
                raise YamlLimitError(f"alias *{_short(anchor)} inside the node it names")
            total += sizes.get(anchor, 1)  # an unknown anchor: the loader will say so
            aliases += 1
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
            what = f" ({aliases} aliases)" if aliases else ""
            raise YamlLimitError(f"too many YAML nodes{what}: more than {limit} once expanded")
    return total


def load(data: bytes | str, limit: int | None = None) -> Any:
    """The one document of ``data``, refused (:class:`YamlLimitError`) when over bounds."""
    count_nodes(data, limit)
    return yaml.load(data, Loader=yaml.CSafeLoader)


def _short(anchor: str) -> str:
    return anchor if len(anchor) <= 40 else anchor[:40] + "..."
