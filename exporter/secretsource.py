"""The exporter's fleet with the management cluster's Secrets: files + informer, merged.

``--discovery.kubernetes`` adds the Secrets of a management cluster (``discovery.informer``)
to the kubeconfig files. :class:`SecretSource` is then the cycle's discovery source
(``exporter.cycle.DiscoverySource``):

- :meth:`~SecretSource.scan` (in the cycle's worker thread) runs the file scan unsharded
  (so ``fleet_size`` counts the whole fleet), reads each Secret the informer holds with
  ``discovery.read_secret`` once per ``uid`` and ``resourceVersion`` (a Secret unchanged
  since the last cycle is not read again; one gone is dropped), and merges both
  (``discovery.merge``) with this exporter's shard;
- :meth:`~SecretSource.context_config`: a Secret cluster's config from that merge, else
  the file scan's;
- :meth:`~SecretSource.probeable`: a file that can be read, or a Secret cluster the merge
  holds a config for (``Cluster.not_probeable`` None).

A Secret changed is a new ``ContextConfig.version``: the credential cache builds the new
credentials and prunes the old ones, and ``FleetClient.forget`` closes the connections
made with them. A Secret deleted takes its clusters out in the next cycle.

**Exec plugins are off by default** (``--discovery.kubernetes.exec-plugins`` turns them
on): whoever may write a Secret the informer reads could otherwise run a command in the
exporter's pod, with its service account. A cluster that needs one is listed, not
probeable, and says why.

The informer's own health is exported by :class:`InformerCollector` (names in
``common.metricnames``), read at each publication.

The informer's objects are read from the scan's thread: :meth:`Informer.objects` copies
each reflector's store with one ``dict.update`` (a C call under the GIL, keys are ``str``),
so the loop's updates never interleave with a copy.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from common.metricnames import (
    DISCOVERY_KUBERNETES_ERRORS,
    DISCOVERY_KUBERNETES_LAST_SYNC,
    DISCOVERY_KUBERNETES_OBJECTS,
    DISCOVERY_KUBERNETES_UP,
    DISCOVERY_KUBERNETES_WATCH_RESTARTS,
)
from discovery import (
    DEFAULT_SELECTOR,
    Cluster,
    ContextConfig,
    Discoverer,
    Discovery,
    DiscoveryProblem,
    LabelSelector,
    Merged,
    SecretClusters,
    SelectorError,
    merge,
    probeable,
    read_secret,
)
from discovery.informer import Informer, InformerSettings, watch_specs
from discovery.kubeapi import KubeApi
from discovery.kubeauth import InClusterPaths, load_credentials
from discovery.secrets import kind_of
from discovery.shard import Shard


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
        "watched Secret would run a command in the exporter)",
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
) -> tuple[KubeApi, Informer]:
    """The informer over the management cluster, and its client (to enter before the
    informer); the credentials are read now, so their errors show at start."""
    env = os.environ if env is None else env
    credentials = load_credentials(settings.kubeconfig, env, paths or InClusterPaths())
    specs = watch_specs(str(settings.label_selector), settings.namespaces)
    api = KubeApi(credentials)
    return api, Informer(api, specs, settings.informer)


class SecretSource:
    """The file scan and the informer's Secrets, merged (module docstring)."""

    def __init__(
        self,
        files: Discoverer,
        informer: Informer,
        settings: KubernetesDiscovery,
        shard: Shard | None = None,
    ) -> None:
        self.files = files
        self.informer = informer
        self.settings = settings
        self.shard = shard
        #: uid -> (resourceVersion, what read_secret made of it)
        self._reads: dict[str, tuple[str, SecretClusters | None]] = {}
        self._merged = Merged(Discovery((), ()))
        self._problems: tuple[DiscoveryProblem, ...] = ()

    def __repr__(self) -> str:
        return f"SecretSource({len(self._reads)} Secrets, {self.informer!r})"

    def _read(self, objects: Mapping[str, dict[str, Any]]) -> list[SecretClusters]:
        reads: dict[str, tuple[str, SecretClusters | None]] = {}
        for uid, obj in objects.items():
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            known = self._reads.get(uid)
            if known is not None and known[0] == version:
                reads[uid] = known
                continue
            read = read_secret(
                obj, self.settings.label_selector, exec_plugins=self.settings.exec_plugins
            )
            reads[uid] = (version, read)
        self._reads = reads  # a Secret gone is dropped here
        return [read for _, read in reads.values() if read is not None]

    def scan(self) -> Discovery:
        files = self.files.scan()
        secrets = self._read(self.informer.objects())
        merged = merge(files, secrets, shard=self.shard, previous=self._problems)
        self._problems = merged.discovery.problems
        self._merged = merged
        return merged.discovery

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return self._merged.context_config(cluster) or self.files.context_config(cluster)

    def probeable(self, ref: str) -> bool:
        return probeable(ref, self._merged.held)


class InformerCollector(Collector):
    """The informer's health, e.g.::

    fleetwatch_discovery_kubernetes_up 1
    fleetwatch_discovery_kubernetes_objects{kind="argocd"} 5000
    fleetwatch_discovery_kubernetes_last_sync_timestamp_seconds 1.7e9
    fleetwatch_discovery_kubernetes_watch_restarts_total{reason="closed"} 3
    fleetwatch_discovery_kubernetes_errors_total{reason="forbidden"} 1
    """

    def __init__(self, informer: Informer, selector: LabelSelector = DEFAULT_SELECTOR) -> None:
        self.informer = informer
        self.selector = selector

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        informer = self.informer
        yield GaugeMetricFamily(
            DISCOVERY_KUBERNETES_UP,
            "1 while every list+watch of the management cluster's Secrets succeeds.",
            value=1 if informer.up else 0,
        )
        objects = GaugeMetricFamily(
            DISCOVERY_KUBERNETES_OBJECTS,
            "Secrets of the management cluster held, by kind.",
            labels=["kind"],
        )
        for kind, count in sorted(_kinds(informer.objects().values(), self.selector).items()):
            objects.add_metric([kind], count)
        yield objects
        yield GaugeMetricFamily(
            DISCOVERY_KUBERNETES_LAST_SYNC,
            "Unix time of the oldest list+watch's last good answer; 0 before the first.",
            value=informer.last_sync,
        )
        yield _counter(
            DISCOVERY_KUBERNETES_WATCH_RESTARTS,
            "Watches started again, by reason (closed, expired, error).",
            informer.restarts(),
            ("closed", "expired", "error"),
        )
        yield _counter(
            DISCOVERY_KUBERNETES_ERRORS,
            "Failed requests to the management cluster's API, by reason.",
            informer.errors(),
            (),
        )


def _kinds(objects: Iterable[Mapping[str, Any]], selector: LabelSelector) -> dict[str, int]:
    counts = {"argocd": 0, "cluster-api": 0, "labelled": 0}
    for obj in objects:
        kind = kind_of(obj, selector)
        if kind is not None:
            counts[kind] += 1
    return counts


def _counter(
    name: str, help_text: str, values: Mapping[str, int], always: Iterable[str]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=["reason"])
    for reason in sorted({*always, *values}):
        family.add_metric([reason], values.get(reason, 0))
    return family
