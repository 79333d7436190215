"""The file scan and the Secrets read through the API -> one fleet.

A cluster name is one cluster everywhere (metrics, alerts, the reactor's store), so the two
sources are merged by the rule files already follow among themselves: the first name seen
wins, in a fixed order — the file scan's clusters first (in its own order), then the
Secrets' by namespace and name, each Secret's in its own order (a labelled Secret's keys
by name, each key's contexts in file order). A later cluster of a name already seen is
skipped, and a problem says where the name was first seen, in the words of the file scan
(unless it is an alias, below).
A cluster listed though not probeable (``Cluster.not_probeable``) takes its name all the
same: it is in the fleet.

The shard filter is the file scan's (``fleetwatch.discovery.scan``): a shard keeps the clusters
whose
name it owns, the problems of those names and every problem of no name (a whole Secret),
and ``fleet_size`` counts the whole fleet. The filter is idempotent, so the file scan may
come sharded or not; unsharded, ``fleet_size`` is exact even when a Secret repeats the
name of another shard's file cluster (sharded, that name is counted twice).

``rescan_in`` is the file scan's: a Secret read through the API never waits to settle
(``fleetwatch.discovery.apisource.SecretReads``).

``new_problems``: the file scan's own, and the Secrets' problems not in ``previous`` (the
problems of the last merge), so each is logged and counted once when it appears.

What the cycle needs besides the :class:`~fleetwatch.discovery.clusters.Discovery`: each Secret
cluster's config (:meth:`Merged.context_config`, the Secret twin of
``Discoverer.context_config``) and the refs it can probe (:attr:`Merged.held`, for
``fleetwatch.discovery.clusters.probeable``).

:attr:`Merged.aliases`: a Secret skipped as a duplicate of a cluster kept under the same
name *and at the same server* is one cluster known twice, which a management cluster
running Argo CD and Cluster API (or Flux) always holds: Argo CD's cluster Secret and
Cluster API's ``<cluster>-kubeconfig``. Its ref stays out of the fleet, but the reactor's
CD mirror resolves Flux objects naming it to the kept cluster (``reactor.cd.targets``).
An alias is no problem: a management cluster with 1,000 clusters registered in Argo CD
would otherwise log 1,000 warnings and count 1,000 discovery errors at every start for
the configuration it is expected to have. A duplicate at another server is another
cluster with a clashing name: no alias, a problem. An
alias's labels (``Cluster.labels``) fill those the kept cluster lacks: teams label the
Argo CD Secret or the Cluster API one, whichever of the two is kept.

:attr:`Merged.secrets`: every Secret read, by ref, as its kind and the names of its keys
(``SecretShape``): the CD mirror resolves a Flux ``secretRef`` as Flux reads the Secret
(the key named, else ``value``, then ``value.yaml``), so it must know which keys it has.

Pure: records in, records out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from fleetwatch.common.foreground import paced
from fleetwatch.discovery.clusterlabels import combined
from fleetwatch.discovery.clusters import Cluster, ContextConfig, Discovery, DiscoveryProblem
from fleetwatch.discovery.secrets import SecretClusters, SecretShape
from fleetwatch.discovery.shard import Shard


@dataclass(frozen=True)
class Merged:
    """One fleet of files and Secrets, and what probing its Secret clusters needs."""

    discovery: Discovery
    #: the configs of the Secret clusters that can be probed, by cluster name
    configs: Mapping[str, ContextConfig] = field(default_factory=dict, repr=False)
    #: the ``secret://`` refs of those clusters (``probeable(ref, held)``)
    held: frozenset[str] = frozenset()
    #: ref of a Secret set aside as a duplicate -> the name of the cluster kept at the
    #: same server (module docstring)
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: ref (``secret://NAMESPACE/NAME``) of every Secret read -> its kind and key names
    secrets: Mapping[str, SecretShape] = field(default_factory=dict)

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        """The config of a Secret cluster of this merge (None for a file's, or a stale one)."""
        config = self.configs.get(cluster.name)
        if config is None or config.source != cluster.kubeconfig_secret_ref:
            return None
        return config


def merge(
    files: Discovery,
    secrets: Iterable[SecretClusters],
    *,
    shard: Shard | None = None,
    previous: Collection[DiscoveryProblem] = (),
) -> Merged:
    """The fleet of ``files`` (a scan) and ``secrets`` (one :func:`read_secret` per Secret,
    in any order: they are taken by namespace and name)."""

    def mine(name: str | None) -> bool:
        return name is None or shard is None or shard.owns(name)

    clusters = [c for c in files.clusters if mine(c.name)]
    places = {c.name: i for i, c in enumerate(clusters)}  # where each is in clusters
    problems = [p for p in files.problems if mine(p.context)]
    new = [p for p in files.new_problems if mine(p.context)]
    seen = {c.name: c.kubeconfig_secret_ref for c in files.clusters}
    servers = {c.name: c.endpoint for c in files.clusters}
    aliases: dict[str, str] = {}
    fleet = files.fleet_size
    configs: dict[str, ContextConfig] = {}
    held: set[str] = set()
    secret_problems: list[DiscoveryProblem] = []
    shapes: dict[str, SecretShape] = {}
    for read in paced(sorted(secrets, key=lambda s: (s.namespace, s.name))):
        shapes[read.ref] = read.shape
        secret_problems.extend(p for p in read.problems if mine(p.context))
        for found in read.clusters:
            cluster = found.cluster
            first = seen.get(cluster.name)
            if first is not None:
                if not mine(cluster.name):
                    continue
                if same_server(servers[cluster.name], cluster.endpoint):
                    aliases[cluster.kubeconfig_secret_ref] = cluster.name
                    at = places.get(cluster.name)
                    if at is not None and cluster.labels:
                        kept = clusters[at]
                        labels = combined(cluster.labels, kept.labels)
                        clusters[at] = dataclasses.replace(kept, labels=labels)
                    continue
                reason = f"duplicate name: first seen in {first}"
                secret_problems.append(
                    DiscoveryProblem(cluster.kubeconfig_secret_ref, cluster.name, reason)
                )
                continue
            seen[cluster.name] = cluster.kubeconfig_secret_ref
            servers[cluster.name] = cluster.endpoint
            fleet += 1
            if not mine(cluster.name):
                continue
            places[cluster.name] = len(clusters)
            clusters.append(cluster)
            if found.config is not None:
                configs[cluster.name] = found.config
                held.add(cluster.kubeconfig_secret_ref)
    before = set(previous)
    new.extend(p for p in secret_problems if p not in before)
    problems.extend(secret_problems)
    discovery = Discovery(tuple(clusters), tuple(problems), tuple(new), fleet, files.rescan_in)
    return Merged(discovery, configs, frozenset(held), aliases, shapes)


def same_server(a: str, b: str) -> bool:
    """Two endpoints of one API server (a trailing slash aside); an empty one is none."""
    return bool(a) and a.rstrip("/") == b.rstrip("/")
