"""What discovery finds: the clusters of the fleet, their minimal kubeconfigs, problems.

Plain data, made by the scan (``fleetwatch.discovery.scan``), the parse of one kubeconfig
(``fleetwatch.discovery.kubeconfig``) and the read of one Secret (``fleetwatch.discovery.secrets``),
and read by
the exporter (its credentials, probe cycle and state) and the reactor, both through the
package's face (``discovery``). No I/O but :func:`probeable`'s look at one path.
"""

from __future__ import annotations

import os
from collections.abc import Container
from dataclasses import dataclass, field

from fleetwatch.common.names import escaped
from fleetwatch.discovery.contextauth import ContextAuth
from fleetwatch.discovery.files import FileVersion


@dataclass(frozen=True, slots=True)
class Cluster:
    """One cluster of the fleet, as discovery found it."""

    name: str  #: the kubeconfig context name
    endpoint: str  #: that context's ``cluster.server``
    #: path of the kubeconfig file that names the context, or the Secret read through the
    #: API that does (``secret://NAMESPACE/NAME`` and ``#KEY``: ``fleetwatch.discovery.secrets``)
    kubeconfig_secret_ref: str
    context: str  #: context name inside that file (== name, but for Cluster API Secrets)
    #: that context's ``cluster.proxy-url``, if any; it may hold the proxy's password, so
    #: it stays out of ``repr`` (logs say ``exporter.net.proxy.Proxy.label``)
    proxy_url: str | None = field(default=None, repr=False)
    #: why it cannot be probed though listed, when discovery knows (a Secret's auth form
    #: fleetwatch does not run: ``awsAuthConfig``); never a value. Files: always None,
    #: their probeability is :func:`probeable`'s look at the file.
    not_probeable: str | None = None
    #: its allowlisted labels, ``(key, value, ...)`` sorted by key
    #: (``fleetwatch.discovery.clusterlabels``): the Secret's and the context's; () by default
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiscoveryProblem:
    """A file or context that was skipped, and why (a sentence, never a credential).

    The fields hold what was found, as found (a context's name may be the very problem:
    ``fleetwatch.common.names``); ``str`` shows each escaped, so a log line or a terminal never
    receives a control character from a kubeconfig or a Secret.
    """

    source: str  #: file path
    context: str | None  #: None when the whole file is bad
    reason: str

    def __str__(self) -> str:
        where = escaped(self.source)
        if self.context is not None:
            where = f"{where} (context {self.context!r})"
        return f"{where}: {escaped(self.reason)}"


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
    #: seconds after which a file this scan found changing may have settled: scan again
    #: then to take it (``fleetwatch.discovery.settle``); None when no change waits
    rescan_in: float | None = None


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """What credentials need to build one context, kept while its file is unchanged.

    ``auth`` is what resolving the context's credentials needs, made once per file change
    (``fleetwatch.discovery.contextauth``: decoded data, absolute paths, a few values); it may
    hold credentials, so it is kept out of ``repr``. Hundreds of bytes, not a copy of the
    context's kubeconfig entries: an exporter keeps one per context for as long as it runs.
    """

    source: str  #: kubeconfig file path
    context: str  #: context name
    #: the version of the file(s) it was read from (cache key for credentials)
    version: FileVersion
    auth: ContextAuth = field(repr=False)
    base_path: str = ""  #: folder relative credential paths are resolved against


#: How a ``kubeconfig_secret_ref`` names a Secret read through the API
# (``fleetwatch.discovery.secrets``).
SECRET_SCHEME = "secret://"


def probeable(ref: str, held: Container[str] = frozenset()) -> bool:
    """Whether a ``kubeconfig_secret_ref`` can be probed: a readable file, or a Secret the
    API source holds.

    ``held``: the ``secret://`` refs whose clusters discovery read through the management
    cluster's API and can probe (``fleetwatch.discovery.merge.Merged.held``); empty without that
    source. A ``secret://`` ref is never looked up as a file, and a bare Secret name given
    to the reactor is neither. A Secret ref shared by several contexts (a labelled
    Secret's key) is held when one of them can be probed: a cluster whose
    :attr:`Cluster.not_probeable` says why is not, whatever its ref.
    """
    if ref.startswith(SECRET_SCHEME):
        return ref in held
    try:
        return os.path.isfile(ref) and os.access(ref, os.R_OK)
    except (OSError, ValueError):
        return False
