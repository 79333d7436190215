"""The exporter's fleet with the management cluster's Secrets: files + informer, merged.

``--discovery.kubernetes`` adds the Secrets of a management cluster (``fleetwatch.kube.informer``,
built by ``fleetwatch.discovery.apisource``, whose flags and settings the reactor and ``fleetwatch
discover`` share) to the kubeconfig files. :class:`SecretSource` is then the cycle's
discovery source (``exporter.cycle.DiscoverySource``):

- :meth:`~SecretSource.scan` (in the cycle's worker thread) runs the file scan unsharded
  (so ``fleet_size`` counts the whole fleet), reads the Secrets the informer holds
  (``fleetwatch.discovery.apisource.SecretReads``: each once per ``uid`` and ``resourceVersion``;
  one
  gone is dropped; its ``data`` released from the informer's store once read: the read
  holds what the probe needs), and merges both (``fleetwatch.discovery.merge``) with this exporter's
  shard;
- :meth:`~SecretSource.context_config`: a Secret cluster's config from that merge, else
  the file scan's;
- :meth:`~SecretSource.probeable`: a file that can be read, or a Secret cluster the merge
  holds a config for (``Cluster.not_probeable`` None).

A Secret changed is a new ``ContextConfig.version``: the credential cache builds the new
credentials and prunes the old ones, and ``FleetClient.forget`` closes the connections
made with them. A Secret deleted takes its clusters out in the next cycle.

The informer's own health is exported by ``fleetwatch.discovery.apimetrics.InformerCollector``, read
at each publication.

The informer's objects are read from the scan's thread: :meth:`Informer.objects` copies
each reflector's store with one ``dict.update`` (a C call under the GIL, keys are ``str``),
so the loop's updates never interleave with a copy.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter import mallocpolicy
from fleetwatch.discovery import (
    Cluster,
    ContextConfig,
    Discoverer,
    Discovery,
    DiscoveryProblem,
    Merged,
    merge,
    probeable,
)
from fleetwatch.discovery.apisource import KubernetesDiscovery, SecretReads
from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist
from fleetwatch.discovery.shard import Shard
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.objects import KubeObject

#: Secrets released in one scan past which glibc is asked to return free pages: a first
#: list or a rotation, not the odd Secret changed.
TRIM_AFTER = 100


class SecretSource:
    """The file scan and the informer's Secrets, merged (module docstring)."""

    def __init__(
        self,
        files: Discoverer,
        informer: Informer[KubeObject],
        settings: KubernetesDiscovery,
        shard: Shard | None = None,
        cycles_done: Callable[[], int] = lambda: 0,
        allowlist: Allowlist = NO_LABELS,
    ) -> None:
        """``cycles_done``: how many cycles the scanning Monitor has completed (its
        ``stats.cycles_total``), which names the cycle a scan belongs to. ``allowlist``:
        the labels each Secret cluster keeps (``--metric-labels-allowlist``)."""
        self.files = files
        self.informer = informer
        self.settings = settings
        self.shard = shard
        # The informer is this source's alone: each Secret's data is dropped once read.
        self.reads = SecretReads(settings, allowlist, release=True)
        self._merged = Merged(Discovery((), ()))
        self._problems: tuple[DiscoveryProblem, ...] = ()
        #: the first cycle (counted from 1) with a scan that held a complete list: the
        #: exporter is ready once that cycle is served (``/-/ready``). Counted in cycles,
        #: not scans: a cycle that finds a file changing scans twice (``exporter.cycle``).
        self._cycles_done = cycles_done
        self.first_complete_cycle: int | None = None

    def __repr__(self) -> str:
        return f"SecretSource({len(self.reads)} Secrets, {self.informer!r})"

    def scan(self) -> Discovery:
        complete = self.informer.synced  # before the copy: it then holds the whole list
        files = self.files.scan()
        secrets = self.reads.read(self.informer.objects())
        if self.reads.released >= TRIM_AFTER:
            mallocpolicy.trim()  # the released data's pages back to the system
        if complete and self.first_complete_cycle is None:
            self.first_complete_cycle = self._cycles_done() + 1
        merged = merge(files, secrets, shard=self.shard, previous=self._problems)
        self._problems = merged.discovery.problems
        self._merged = merged
        return merged.discovery

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return self._merged.context_config(cluster) or self.files.context_config(cluster)

    def probeable(self, ref: str) -> bool:
        return probeable(ref, self._merged.held)
