"""What discovery finds: the clusters of the fleet, their minimal kubeconfigs, problems.

Plain data, made by the scan (``discovery.scan``) and the parse of one kubeconfig
(``discovery.kubeconfig``), and read by the exporter (its credentials, probe cycle and
state) and the reactor, both through the package's face (``discovery``). No I/O but
:func:`probeable`'s look at one path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from discovery.contextauth import ContextAuth
from discovery.files import FileVersion


@dataclass(frozen=True, slots=True)
class Cluster:
    """One cluster of the fleet, as discovery found it."""

    name: str  #: the kubeconfig context name
    endpoint: str  #: that context's ``cluster.server``
    kubeconfig_secret_ref: str  #: path of the kubeconfig file that names the context
    context: str  #: context name inside that file (== name)
    #: that context's ``cluster.proxy-url``, if any; it may hold the proxy's password, so
    #: it stays out of ``repr`` (logs say ``exporter.net.proxy.Proxy.label``)
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


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """What credentials need to build one context, kept while its file is unchanged.

    ``auth`` is what resolving the context's credentials needs, made once per file change
    (``discovery.contextauth``: decoded data, absolute paths, a few values); it may
    hold credentials, so it is kept out of ``repr``. Hundreds of bytes, not a copy of the
    context's kubeconfig entries: an exporter keeps one per context for as long as it runs.
    """

    source: str  #: kubeconfig file path
    context: str  #: context name
    #: the version of the file(s) it was read from (cache key for credentials)
    version: FileVersion
    auth: ContextAuth = field(repr=False)
    base_path: str = ""  #: folder relative credential paths are resolved against


def probeable(ref: str) -> bool:
    """Whether a ``kubeconfig_secret_ref`` is a readable file (a Secret name is not)."""
    try:
        return os.path.isfile(ref) and os.access(ref, os.R_OK)
    except (OSError, ValueError):
        return False
