"""``--discovery.kubernetes``: the Secrets of a management cluster, as the exporter, the
reactor and ``fleetwatch discover`` all read them.

One set of flags (:func:`add_flags`, checked by :func:`from_args` into
:class:`KubernetesDiscovery`), one way to build the list+watch (:func:`build_informer`:
credentials read at once, so a bad kubeconfig fails at start-up, not at the first
request), and one way to turn what the informer holds into clusters
(:class:`SecretReads`: each Secret read with ``fleetwatch.discovery.read_secret`` once per ``uid``
and ``resourceVersion``, so an unchanged Secret costs a dict look-up, and one gone is
forgotten). Each caller then merges with its files (``fleetwatch.discovery.merge``): the exporter
every cycle with its shard, the reactor whenever the informer's objects change, ``discover``
once.

:func:`api_problems` turns the informer's current errors (a namespace forbidden, an API
that does not answer) into :class:`~fleetwatch.discovery.clusters.DiscoveryProblem` records, for
``discover``'s list of problems.

**Exec plugins are off by default** (``--discovery.kubernetes.exec-plugins``): whoever may
write a Secret the informer reads could otherwise run a command in the exporter's pod,
with its service account. The reactor and ``discover`` run no plugin, but take the flag
too, so that they call probeable what the exporter probes.

Part of discovery's I/O edge with ``fleetwatch.kube.informer``, ``fleetwatch.kube.kubeapi`` and
``fleetwatch.kube.kubeauth`` (through ``fleetwatch.discovery.kubecreds``), which it builds:
not re-exported by the package's face.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist
from fleetwatch.discovery.clusters import DiscoveryProblem
from fleetwatch.discovery.kubecreds import load_credentials
from fleetwatch.discovery.labels import LabelSelector, SelectorError
from fleetwatch.discovery.secrets import (
    DEFAULT_SELECTOR,
    SecretClusters,
    read_secret,
    with_last_good,
)
from fleetwatch.discovery.secretwatch import watch_specs
from fleetwatch.kube.informer import Informer, InformerSettings
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.kube.kubeauth import ApiCredentials, InClusterPaths
from fleetwatch.kube.objects import KubeObject, ReadOnce


@dataclass(frozen=True)
class KubernetesDiscovery:
    """``--discovery.kubernetes`` and its flags, checked."""

    #: kubeconfig of the management cluster; None: in-cluster, then ``KUBECONFIG``
    kubeconfig: str | None = None
    #: namespaces watched, each on its own; empty: cluster-wide
    namespaces: tuple[str, ...] = ()
    #: the user's label selector (Argo CD's and Cluster API's are always watched)
    label_selector: LabelSelector = DEFAULT_SELECTOR
    #: run exec plugins named in Secrets (off: anyone who can write one runs a command)
    exec_plugins: bool = False
    informer: InformerSettings = field(default_factory=InformerSettings)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The ``--discovery.kubernetes*`` flags (docs/exporter.md, "Clusters from Secrets")."""
    group = parser.add_argument_group("clusters from the management cluster's Secrets")
    group.add_argument(
        "--discovery.kubernetes",
        dest="discovery_kubernetes",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also read clusters from Secrets of a management cluster's API (list+watch)",
    )
    group.add_argument(
        "--discovery.kubernetes.kubeconfig",
        dest="discovery_kubernetes_kubeconfig",
        metavar="FILE",
        default=None,
        help="kubeconfig of the management cluster (default: in-cluster, then $KUBECONFIG)",
    )
    group.add_argument(
        "--discovery.kubernetes.namespace",
        dest="discovery_kubernetes_namespaces",
        metavar="NS",
        action="append",
        default=[],
        help="a namespace to watch, repeatable (default: all namespaces)",
    )
    group.add_argument(
        "--discovery.kubernetes.label-selector",
        dest="discovery_kubernetes_label_selector",
        metavar="SELECTOR",
        default=str(DEFAULT_SELECTOR),
        help=f"Secrets holding kubeconfigs (default: {DEFAULT_SELECTOR})",
    )
    group.add_argument(
        "--discovery.kubernetes.exec-plugins",
        dest="discovery_kubernetes_exec_plugins",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="run the exec plugins Secrets name (default: off: whoever can write a "
        "watched Secret would run a command in the exporter; the reactor and discover "
        "run none, and call such a cluster probeable only with this flag)",
    )


def from_args(args: argparse.Namespace) -> KubernetesDiscovery | None:
    """The checked settings, None without ``--discovery.kubernetes``; raises ValueError."""
    if not getattr(args, "discovery_kubernetes", False):
        return None
    try:
        selector = LabelSelector.parse(args.discovery_kubernetes_label_selector)
    except SelectorError as exc:
        raise ValueError(f"--discovery.kubernetes.label-selector: {exc}") from None
    return KubernetesDiscovery(
        kubeconfig=args.discovery_kubernetes_kubeconfig or None,
        namespaces=tuple(args.discovery_kubernetes_namespaces),
        label_selector=selector,
        exec_plugins=bool(args.discovery_kubernetes_exec_plugins),
    )


def build_informer(
    settings: KubernetesDiscovery,
    env: Mapping[str, str] | None = None,
    paths: InClusterPaths | None = None,
) -> tuple[KubeApi, Informer[KubeObject]]:
    """The informer over the management cluster, and its client (to enter before the
    informer); the credentials are read now, so their errors (``KubeAuthError``) show at
    start."""
    credentials = read_credentials(settings, env, paths)
    specs = watch_specs(str(settings.label_selector), settings.namespaces)
    api = KubeApi(credentials)
    return api, Informer(api, specs, settings.informer)


def read_credentials(
    settings: KubernetesDiscovery,
    env: Mapping[str, str] | None = None,
    paths: InClusterPaths | None = None,
) -> ApiCredentials:
    """The management cluster's credentials (``KubeAuthError`` when they cannot be read):
    :func:`build_informer`'s, and the reactor's check at start when another process lists."""
    env = os.environ if env is None else env
    return load_credentials(settings.kubeconfig, env, paths or InClusterPaths())


#: What a released Secret's ``data`` becomes (:class:`SecretReads`): no key, one shared
#: object; read again, it would be a Secret with no keys.
RELEASED: Mapping[str, Any] = MappingProxyType({})


class SecretReads:
    """What each Secret names, read once per ``uid`` and ``resourceVersion``.

    **No settle time** (``fleetwatch.discovery.settle`` holds a changed file back until it has held
    still): a Secret is one API object, written whole by one request and served whole at
    each ``resourceVersion``, so no read ever sees one half written, and waiting would only
    delay a credential rotation. What a writer stored badly stays stored until it writes
    again, so no wait repairs it either: a version whose kubeconfig cannot be read at all
    (empty, not YAML, not a kubeconfig: say a pipeline that made it from a file caught
    mid-write) keeps the clusters of the last version that could be read
    (``fleetwatch.discovery.secrets.with_last_good``), as a file does; one cut short that still
    parses is taken, since nothing tells it from a smaller fleet.

    Not thread-safe: one caller at a time (the exporter's scan thread, the reactor's
    merge in a worker thread, one after the other).

    **Release** (``release=True``, the exporter's): once a version is read, its ``data``
    is dropped from the object the informer holds. What the probe needs is in the read
    (each cluster's ``ContextConfig``: the decoded CA, certificate, token), and the
    ``data`` beside it (base64 of the config JSON, itself holding the certificates in
    base64) was a second copy of every credential, about a tenth of the exporter's memory
    per cluster. A version is read once (a new version comes as a new object,
    whole), so nothing reads a released object again; only the reader that owns the
    informer may release (a second reader would find no data).
    """

    def __init__(
        self,
        settings: KubernetesDiscovery,
        allowlist: Allowlist = NO_LABELS,
        *,
        release: bool = False,
    ) -> None:
        """``allowlist``: the labels each cluster keeps (``fleetwatch.discovery.clusterlabels``);
        ``release``: drop each Secret's data once read (above)."""
        self.settings = settings
        self.allowlist = allowlist
        self.release = release
        #: objects whose data the last :meth:`read` released
        self.released = 0
        self._reads: ReadOnce[SecretClusters | None] = ReadOnce()

    def __len__(self) -> int:
        return len(self._reads)

    def read(self, objects: Mapping[str, Mapping[str, Any]]) -> list[SecretClusters]:
        """The Secrets of ``objects`` (``Informer.objects``: by uid) that are ours, read."""
        self.released = 0
        return [read for read in self._reads.update(objects, self._read) if read is not None]

    def _read(self, obj: Mapping[str, Any], last: SecretClusters | None) -> SecretClusters | None:
        read = read_secret(
            obj,
            self.settings.label_selector,
            exec_plugins=self.settings.exec_plugins,
            allowlist=self.allowlist,
        )
        if self.release and isinstance(obj, dict) and "data" in obj:
            # One item assignment: atomic for the loop that may read this object
            # (its metadata and labels, never its data) while this runs in a thread.
            obj["data"] = RELEASED
            self.released += 1
        if read is not None and last is not None and read.kind == last.kind:
            read = with_last_good(read, last)
        return read


def api_problems(problems: Iterable[str], server: str) -> list[DiscoveryProblem]:
    """The informer's current errors (``Informer.problems``) as discovery problems whose
    source is the management cluster's API server (never a credential: the informer's
    problems name a watch and an HTTP status or error type)."""
    return [DiscoveryProblem(f"management cluster API {server}", None, p) for p in problems]
