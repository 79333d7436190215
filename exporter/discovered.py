"""What discovery finds: the clusters of the fleet, their minimal kubeconfigs, problems.

Plain data, shared by the scan (``exporter.discovery``), the parse of one kubeconfig
(``exporter.kubeconfig_parse``), the credentials, the probe cycle, the state and the
reactor (which reads them through ``exporter.discovery``, its one door into the
exporter). No I/O but :func:`probeable`'s look at one path.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.kubeconfig_files import FileVersion


@dataclass(frozen=True)
class Cluster:
    """One cluster of the fleet, as discovery found it."""

    name: str  #: the kubeconfig context name
    endpoint: str  #: that context's ``cluster.server``
    kubeconfig_secret_ref: str  #: path of the kubeconfig file that names the context
    context: str  #: context name inside that file (== name)
    #: that context's ``cluster.proxy-url``, if any; it may hold the proxy's password, so
    #: it stays out of ``repr`` (logs say ``exporter.proxy.Proxy.label``)
    proxy_url: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class DiscoveryProblem:
    """A file or context that was skipped, and why (a sentence, never a credential)."""

    source: str  #: file path
    context: str | None  #: None when the whole file is bad
    reason: str

    def __str__(self) -> str:
        where = self.source if self.context is None else f"{self.source} (context {self.context!r})"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Discovery:
    """Result of one scan."""

    clusters: tuple[Cluster, ...]
    problems: tuple[DiscoveryProblem, ...]
    #: problems not present in the previous scan of the same Discoverer: logged and counted
    #: once when they appear, not once per cycle
    new_problems: tuple[DiscoveryProblem, ...] = ()
    #: clusters of the whole fleet, before sharding (== len(clusters) when unsharded)
    fleet_size: int = 0


@dataclass(frozen=True)
class ContextConfig:
    """What credentials need to build one context: a minimal kubeconfig of that context.

    ``config`` holds only this context, its cluster and its user (so the kubernetes
    client never scans a list of thousands); it may hold credentials, so it is kept out
    of ``repr``.
    """

    source: str  #: kubeconfig file path
    context: str  #: context name
    #: the version of the file(s) it was read from (cache key for credentials)
    version: FileVersion
    config: Mapping[str, Any] = field(repr=False)
    base_path: str = ""  #: folder relative credential paths are resolved against


class PackedConfig(Mapping[str, Any]):
    """A minimal kubeconfig kept pickled until credentials are built from it.

    Discovery keeps every context's minimal kubeconfig for as long as its file is
    unchanged, but credentials are built once per file version: as Python dicts, 10,000
    contexts with embedded certificates held 140 MB (14 KiB each); pickled, 3 KiB each.
    Pickle keeps shared objects shared, so YAML aliases are not expanded here.
    Reading it unpickles a fresh copy each time (use :func:`unpack` to do it once).
    """

    __slots__ = ("_blob",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        # Our own parse of the file, never foreign bytes: pickle is safe and keeps types.
        self._blob = pickle.dumps(dict(config), protocol=pickle.HIGHEST_PROTOCOL)

    def load(self) -> dict[str, Any]:
        value: dict[str, Any] = pickle.loads(self._blob)  # our own bytes (see __init__)
        return value

    def __getitem__(self, key: str) -> Any:
        return self.load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def __repr__(self) -> str:  # never the content: it holds credentials
        return f"PackedConfig({len(self._blob)} bytes)"


def unpack(config: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh ``dict`` of a context's minimal kubeconfig, unpickled once."""
    return config.load() if isinstance(config, PackedConfig) else dict(config)


def probeable(ref: str) -> bool:
    """Whether a ``kubeconfig_secret_ref`` is a readable file (a Secret name is not)."""
    try:
        return os.path.isfile(ref) and os.access(ref, os.R_OK)
    except (OSError, ValueError):
        return False
