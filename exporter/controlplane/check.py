"""The control-plane check: kube-system through the API server, etcd directly when configured.

:class:`ControlPlaneCheck` is the exporter's extension seam (``exporter.checks``) for the
control plane. Per cluster and cycle it reads kube-system over the probe's connection
(:func:`read_kube_system`), asks etcd itself when ``--config.file`` gives its client URLs
(``exporter.controlplane.etcd_client``), and hands the pure parts
(``exporter.controlplane.kubesystem``, ``exporter.controlplane.components``,
``exporter.controlplane.report``) what it read. The samples it publishes are listed in
``exporter.controlplane.report``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import zlib
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from exporter.checks import ClusterCheck
from exporter.configfile import EtcdConfig, ExporterConfig
from exporter.controlplane.components import COMPONENTS
from exporter.controlplane.etcd_client import EtcdClient, TlsState, load_tls
from exporter.controlplane.kubesystem import (
    CONTROL_PLANE_NODE_LABELS,
    KubeSystem,
    Node,
    parse_nodes,
    parse_pods,
)
from exporter.controlplane.quorum import EtcdReport
from exporter.controlplane.report import (
    APISERVER_FAMILIES,
    FAMILIES,
    TARGET_FAMILIES,
    ControlPlaneReport,
    merged,
    only,
    report_from_kube_system,
    report_result,
)
from exporter.model import (
    UNCHANGED,
    CheckResult,
    ClusterRequestError,
    MetricFamily,
    ProbeResult,
    Reason,
    Unchanged,
    ok_body,
)
from exporter.net import ApiClient
from fleetwatch.discovery import Cluster

log = logging.getLogger(__name__)

PODS_PATH = "/api/v1/namespaces/kube-system/pods"
NODES_PATH = "/api/v1/nodes"
#: Label selectors keep the answers small: kube-system of a big cluster holds a CNI and a
#: kube-proxy pod per node, and the node list can be megabytes.
STATIC_POD_SELECTOR = "tier=control-plane"
COREDNS_SELECTOR = "k8s-app=kube-dns"
#: The three request paths, quoted once (per request it was 5 % of the check's CPU).
STATIC_PODS = f"{PODS_PATH}?labelSelector={quote(STATIC_POD_SELECTOR)}"
COREDNS_PODS = f"{PODS_PATH}?labelSelector={quote(COREDNS_SELECTOR)}"
CONTROL_PLANE_NODES = f"{NODES_PATH}?labelSelector={quote(CONTROL_PLANE_NODE_LABELS[0] + '=')}"
#: The last read's targets (samples and SD groups), without the rest of kube-system's
#: view: what is served while the API server does not answer.
LAST_TARGETS = Unchanged(only=TARGET_FAMILIES)


class KubeGet(Protocol):
    async def get(self, path: str, timeout: float) -> tuple[int, bytes]: ...  # noqa: ASYNC109


@dataclass(frozen=True)
class KubeSystemRead:
    """What one read of kube-system gave: the parsed lists and a digest of the pod answers."""

    kube: KubeSystem
    digest: bytes
    """Of the two pod lists' items (not the lists' own resourceVersion): equal digests,
    equal pods, so the report built from them last time still holds."""
    nodes_read: bool
    """The node list was needed (a static pod without hostIP) and is part of ``kube``."""


async def read_kube_system(
    api: KubeGet, timeout_seconds: float, unchanged: bytes | None = None
) -> KubeSystemRead | None:
    """The static pods, the CoreDNS pods and, when needed, the control-plane nodes.

    The pods are required (a ``ClusterRequestError`` propagates). The reads go one after
    another on purpose: together they would open three TLS connections per cluster, and
    at 10,000 clusters the exporter ran out of descriptors (bench/RESULTS.md); one after
    another they share the probe's kept-alive connection.

    ``unchanged``: the digest of the last read. When the pod answers hash to it, nothing
    is parsed and None is returned: the caller's last result stands. Parsing and
    building the report was most of the check's CPU (bench/RESULTS.md).

    The nodes only refine addresses, and only for a static pod without ``hostIP``: the
    kubelet sets a pod's ``hostIP`` to its node's first InternalIP (the address we would
    take from the node), so with every hostIP present the node list adds nothing and is
    not asked for. Credentials without ``list nodes`` get everything from the pods.
    """
    static = await _get_body(api, STATIC_PODS, timeout_seconds)
    dns = await _get_body(api, COREDNS_PODS, timeout_seconds)
    # SHA-256 rather than BLAKE2b: with the SHA extensions of today's x86 and ARM CPUs it
    # runs at 1.7 GB/s against 0.8 (measured here), and real pod lists with their
    # managedFields are ~100 KB per cluster and cycle.
    digest = hashlib.sha256(_items_part(static))
    digest.update(b"\0")
    digest.update(_items_part(dns))
    key = digest.digest()
    if unchanged is not None and key == unchanged:
        return None
    parsed = parse_pods(_json(static, PODS_PATH)) + parse_pods(_json(dns, PODS_PATH))
    need_nodes = any(
        not p.host_ip and not p.deleting for p in parsed if p.labels.get("component") in COMPONENTS
    )
    nodes: tuple[Node, ...] = ()
    if need_nodes:
        try:
            body = await _get_body(api, CONTROL_PLANE_NODES, timeout_seconds)
            nodes = parse_nodes(_json(body, NODES_PATH))
        except ClusterRequestError:
            nodes = ()
    return KubeSystemRead(KubeSystem(pods=parsed, nodes=nodes), key, need_nodes)


async def _get_body(api: KubeGet, path: str, timeout_seconds: float) -> bytes:
    """The body of a 200 answer; any other status raises :class:`ClusterRequestError`."""
    return ok_body(*await api.get(path, timeout_seconds), path)


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise ClusterRequestError(Reason.HTTP_ERROR, f"invalid JSON on {what}", 200) from None


def _items_part(body: bytes) -> memoryview:
    """The list's items onwards: a list's own ``resourceVersion`` (before them, as the API
    server writes a list) moves with every write anywhere in the cluster; the items' own
    ``resourceVersion`` moves only when that pod changed. No ``"items"``: the whole body."""
    at = body.find(b'"items":')
    return memoryview(body)[max(at, 0) :]


class ControlPlaneCheck:
    """The exporter check: kube-system through the API server, etcd directly when configured.

    When the API server does not answer, the last targets seen for that cluster are still
    served on ``/sd/control-plane`` (that is when scraping etcd matters most), and etcd is
    still asked directly if the config file says how.

    Per cluster it keeps only the digest of the last pod answers, to tell "unchanged": an
    unchanged read answers :data:`~exporter.model.UNCHANGED`, and no pod, report or
    result outlives a read (the exporter keeps the result encoded). A cluster with a
    direct etcd source is the exception: kube-system's view is merged with etcd's answer
    every cycle, so its result is kept as it is.
    """

    name = "controlplane"
    families: Sequence[MetricFamily] = FAMILIES

    def __init__(
        self,
        config: ExporterConfig | None = None,
        request_timeout: float = 5.0,
        every: int = 1,
    ) -> None:
        """``every``: read kube-system on every ``every``-th successful probe of a cluster
        (``--controlplane.interval``); in between, the last result is published again."""
        if every < 1:
            raise ValueError("every must be at least 1")
        self.config = config or ExporterConfig()
        self.request_timeout = request_timeout
        self.every = every
        #: per cluster: probes to let pass before kube-system is read again
        self._skip: dict[str, int] = {}
        #: per cluster with a direct etcd source: the result of the last read of
        #: kube-system (its targets are still served while the API server does not answer)
        self._view: dict[str, CheckResult] = {}
        #: per cluster: the digest of the pod answers the last result handed was built
        #: from, while it stands for them (not after a failed probe or read, nor when the
        #: nodes were read)
        self._digest: dict[str, bytes] = {}
        self._tls: dict[str, TlsState] = {}
        self._etcd = EtcdClient()

    async def aclose(self) -> None:
        await self._etcd.aclose()

    def retain(self, names: Set[str]) -> None:
        """Forget what was kept for clusters that left discovery (see RetainingCheck)."""
        for memory in (self._skip, self._view, self._digest, self._tls):
            for name in memory.keys() - names:
                del memory[name]

    async def run(
        self, cluster: Cluster, api: ApiClient, probe: ProbeResult
    ) -> CheckResult | Unchanged | None:
        name = cluster.name
        etcd_config = self.config.etcd_for(name)
        if etcd_config is None:  # the usual case: no task of its own, the API server's view
            if not probe.success:
                self._digest.pop(name, None)  # read afresh once it answers again
                return LAST_TARGETS
            read = await self._kube(cluster, api)
            return read if read is not None else LAST_TARGETS
        kube_task = self._kube(cluster, api) if probe.success else _none()
        read, direct = await asyncio.gather(kube_task, self._direct(name, etcd_config))
        view = self._view.get(name) if isinstance(read, Unchanged) else read
        if direct is None:
            return view if view is not None else self._targets(name)
        # etcd as it says itself; targets and CoreDNS as kube-system showed them (this
        # cycle's read, else the last targets and no CoreDNS)
        etcd = report_result(ControlPlaneReport(etcd=direct, targets=(), coredns=None))
        if view is not None:
            return merged(etcd, only(view, APISERVER_FAMILIES))
        last = self._view.get(name)
        if last is None:
            return etcd
        return merged(etcd, only(last, TARGET_FAMILIES))

    def _targets(self, name: str) -> CheckResult | None:
        """The last targets seen (samples and SD groups), without kube-system's view."""
        last = self._view.get(name)
        if last is None:
            return None
        targets = only(last, TARGET_FAMILIES)
        return None if not targets.samples and not targets.targets else targets

    async def _kube(self, cluster: Cluster, api: ApiClient) -> CheckResult | Unchanged | None:
        """This read's result; UNCHANGED: the last one handed stands; None: not read."""
        name = cluster.name
        digest = self._digest.get(name)
        if digest is not None:
            skip = self._skip.get(name, 0)
            if skip > 0:  # read recently (--controlplane.interval): the last result stands
                self._skip[name] = skip - 1
                return UNCHANGED
        # The first read of a cluster starts its turn at a point of its own (a stable hash
        # of its name), so a fleet's reads spread over the cycles instead of bunching.
        first = digest is None and name not in self._skip
        turn = zlib.crc32(name.encode()) % self.every if first else self.every - 1
        self._skip[name] = turn
        try:
            read = await read_kube_system(api, self.request_timeout, digest)
        except ClusterRequestError as exc:
            self._digest.pop(name, None)
            log.info("cluster %s: kube-system not readable: %s", name, exc.reason)
            return None
        if read is None:  # the pods are what they were: so is the result
            return UNCHANGED
        view = report_result(report_from_kube_system(read.kube))
        if self.config.etcd_for(name) is not None:  # merged with etcd's answer each cycle
            self._view[name] = view
        if read.nodes_read:  # the nodes were not in the digest: parse again next time
            self._digest.pop(name, None)
        else:
            self._digest[name] = read.digest
        return view

    async def _direct(self, cluster: str, config: EtcdConfig) -> EtcdReport | None:
        previous = self._tls.get(cluster)
        tls = await asyncio.to_thread(load_tls, config, previous)
        self._tls[cluster] = tls
        if tls.error is not None:
            if tls is not previous:
                # By error type only: the files' content never reaches a log line.
                log.warning(
                    "cluster %s: etcd TLS files unusable (%s); using the API server's view",
                    cluster,
                    tls.error,
                )
            return None
        return await self._etcd.report(config, tls.context)


async def _none() -> None:
    return None


def build_checks(config: ExporterConfig | None, every: int = 1) -> list[ClusterCheck]:
    """The per-cluster checks the exporter runs (``exporter.cli`` calls this).

    Always the control-plane check: the API-server view of etcd, the control-plane targets
    and CoreDNS need no config; ``config`` adds direct etcd endpoints per cluster.
    ``every``: see :func:`reads_every`.
    """
    return [ControlPlaneCheck(config or ExporterConfig(), every=every)]


def reads_every(controlplane_interval: float, probe_interval: float) -> int:
    """Every how many probes kube-system is read, for ``--controlplane.interval``.

    0 (the default) reads it after every probe. Otherwise after every
    ``ceil(controlplane_interval / probe_interval)``-th: what the check publishes is then
    at most that interval (plus one probe interval) old, except that a cluster is read
    again at once after a failed probe or a failed read. Worth it when the probe
    interval is short and the fleet large: each read is two GETs per cluster
    (bench/RESULTS.md).
    """
    if controlplane_interval < 0 or probe_interval <= 0:
        raise ValueError("intervals must be positive (0: read after every probe)")
    if controlplane_interval == 0:
        return 1
    return max(1, math.ceil(controlplane_interval / probe_interval - 1e-9))
