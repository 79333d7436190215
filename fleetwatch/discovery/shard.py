"""Which exporter probes which cluster: a stable hash of the cluster's name, modulo the shards.

A big fleet is split over ``--shard.count`` exporters the way kube-state-metrics splits
its objects: each cluster belongs to the shard ``hash(name) mod count``, so the shards are
disjoint and together cover the fleet. The hash is the first 8 bytes of the SHA-256 of the
UTF-8 name, never Python's ``hash()`` (salted per process: a restart would move every
cluster). Only the name counts, so a cluster stays on its shard when others come and go,
and every replica of a shard, on any machine, computes the same set.

A StatefulSet gives each pod a name ending in its ordinal (``fleetwatch-exporter-2``):
``--shard.index-from-hostname`` takes the index from there, so one manifest runs every
shard.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

_ORDINAL = re.compile(r"-([0-9]+)$")


class ShardError(ValueError):
    """A shard setting we refuse; the message names the flag and why."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the clusters whose name hashes to ``index``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ShardError(f"--shard.count {self.count}: must be at least 1")
        if not 0 <= self.index < self.count:
            raise ShardError(
                f"--shard.index {self.index}: must be between 0 and {self.count - 1} "
                f"(--shard.count {self.count})"
            )

    def owns(self, name: str) -> bool:
        """Whether the cluster called ``name`` is probed by this shard."""
        return self.count == 1 or shard_of(name, self.count) == self.index

    def __str__(self) -> str:
        return f"shard {self.index} of {self.count}"


def shard_pair(shard: Shard | None) -> tuple[int, int]:
    """``(index, count)`` as the exposition labels it: ``(0, 1)`` when unsharded."""
    return (shard.index, shard.count) if shard is not None else (0, 1)


def shard_of(name: str, count: int) -> int:
    """The shard of a cluster name among ``count`` shards (0 ≤ result < count)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def ordinal_from_hostname(hostname: str) -> int:
    """The StatefulSet ordinal ending a pod name: ``fleetwatch-exporter-2`` -> 2."""
    host = hostname.split(".", 1)[0]  # a fully qualified name: the pod name is the first label
    match = _ORDINAL.search(host)
    if match is None:
        raise ShardError(
            f"--shard.index-from-hostname: host name {host!r} does not end in '-<ordinal>' "
            "as a StatefulSet pod's does (e.g. fleetwatch-exporter-2)"
        )
    return int(match.group(1))


def current_hostname(env: Mapping[str, str] | None = None) -> str:
    """``$HOSTNAME`` (set in every pod) or, when unset, the kernel's host name."""
    env = os.environ if env is None else env
    return env.get("HOSTNAME") or socket.gethostname()


def resolve_shard(
    count: int | None,
    index: int | None,
    *,
    index_from_hostname: bool = False,
    hostname: str | None = None,
) -> Shard | None:
    """The shard from the flags; None when unsharded (no ``--shard.count``)."""
    if index is not None and index_from_hostname:
        raise ShardError("--shard.index and --shard.index-from-hostname: give one, not both")
    if count is None:
        if index is not None or index_from_hostname:
            raise ShardError("--shard.index needs --shard.count")
        return None
    if index_from_hostname:
        index = ordinal_from_hostname(hostname if hostname is not None else current_hostname())
    if index is None:
        if count != 1:
            raise ShardError(
                f"--shard.count {count} needs --shard.index (or --shard.index-from-hostname)"
            )
        index = 0
    return Shard(index, count)
