"""The control-plane check: kube-system through the API server, etcd directly when configured.

:class:`ControlPlaneCheck` is the exporter's extension seam (``exporter.checks``) for the
control plane. Per cluster and cycle it reads kube-system over the probe's connection
(:func:`read_kube_system`), asks etcd itself when ``--config.file`` gives its client URLs
(``exporter.etcd``), and hands the pure parts (``exporter.kubesystem``,
``exporter.components``, ``exporter.controlplane_report``) what it read. The samples it
publishes are listed in ``exporter.controlplane_report``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import quote

from exporter.checks import ClusterCheck
from exporter.components import ComponentTarget
from exporter.config import EtcdConfig, ExporterConfig
from exporter.controlplane_report import (
    FAMILIES,
    ControlPlaneReport,
    report_from_kube_system,
    report_samples,
    target_groups,
)
from exporter.discovery import Cluster
from exporter.etcd import EtcdClient, TlsState, load_tls
from exporter.kubesystem import CONTROL_PLANE_NODE_LABELS, KubeSystem, parse_nodes, parse_pods
from exporter.model import ApiError, CheckResult, MetricFamily, ProbeResult
from exporter.probe import ApiClient
from exporter.quorum import EtcdReport

log = logging.getLogger(__name__)

PODS_PATH = "/api/v1/namespaces/kube-system/pods"
NODES_PATH = "/api/v1/nodes"
#: Label selectors keep the answers small: kube-system of a big cluster holds a CNI and a
#: kube-proxy pod per node, and the node list can be megabytes.
STATIC_POD_SELECTOR = "tier=control-plane"
COREDNS_SELECTOR = "k8s-app=kube-dns"


class KubeGet(Protocol):
    async def get_json(self, path: str, timeout: float) -> Any: ...  # noqa: ASYNC109


async def read_kube_system(api: KubeGet, timeout_seconds: float) -> KubeSystem:
    """The static pods, the CoreDNS pods and the control-plane nodes: three small reads.

    The pods are required (an ``ApiError`` propagates); the nodes only refine addresses,
    so credentials without ``list nodes`` still get everything, from the pods' hostIP.
    The reads go one after another on purpose: together they would open three TLS
    connections per cluster, and at 10,000 clusters the exporter ran out of descriptors
    (bench/RESULTS.md); one after another they share the probe's kept-alive connection.
    """

    async def nodes() -> Any:
        path = f"{NODES_PATH}?labelSelector={quote(CONTROL_PLANE_NODE_LABELS[0] + '=')}"
        try:
            return await api.get_json(path, timeout_seconds)
        except ApiError:
            return None

    pods = f"{PODS_PATH}?labelSelector="
    static = await api.get_json(pods + quote(STATIC_POD_SELECTOR), timeout_seconds)
    dns = await api.get_json(pods + quote(COREDNS_SELECTOR), timeout_seconds)
    node_list = await nodes()
    return KubeSystem(pods=parse_pods(static) + parse_pods(dns), nodes=parse_nodes(node_list))


class ControlPlaneCheck:
    """The exporter check: kube-system through the API server, etcd directly when configured.

    When the API server does not answer, the last targets seen for that cluster are still
    served on ``/sd/control-plane`` (that is when scraping etcd matters most), and etcd is
    still asked directly if the config file says how.
    """

    name = "controlplane"
    families: Sequence[MetricFamily] = FAMILIES

    def __init__(self, config: ExporterConfig | None = None, request_timeout: float = 5.0) -> None:
        self.config = config or ExporterConfig()
        self.request_timeout = request_timeout
        self._last_targets: dict[str, tuple[ComponentTarget, ...]] = {}
        self._tls: dict[str, TlsState] = {}
        self._etcd = EtcdClient()

    async def aclose(self) -> None:
        await self._etcd.aclose()

    async def run(self, cluster: Cluster, api: ApiClient, probe: ProbeResult) -> CheckResult | None:
        etcd_config = self.config.etcd_for(cluster.name)
        kube_task = self._kube(cluster, api) if probe.success else _none()
        direct_task = self._direct(cluster.name, etcd_config) if etcd_config else _none()
        kube_report, direct = await asyncio.gather(kube_task, direct_task)
        if kube_report is not None:
            self._last_targets[cluster.name] = kube_report.targets
        targets = self._last_targets.get(cluster.name, ())
        etcd = direct if direct is not None else (kube_report.etcd if kube_report else None)
        report = ControlPlaneReport(
            etcd=etcd,
            targets=targets,
            coredns=kube_report.coredns if kube_report else None,
        )
        if kube_report is None and etcd is None and not targets:
            return None
        return CheckResult(samples=report_samples(report), targets=target_groups(targets))

    async def _kube(self, cluster: Cluster, api: ApiClient) -> ControlPlaneReport | None:
        try:
            return report_from_kube_system(await read_kube_system(api, self.request_timeout))
        except ApiError as exc:
            log.info("cluster %s: kube-system not readable: %s", cluster.name, exc.reason)
            return None

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


def build_checks(config: ExporterConfig | None) -> list[ClusterCheck]:
    """The per-cluster checks the exporter runs (``exporter.cli`` calls this).

    Always the control-plane check: the API-server view of etcd, the control-plane targets
    and CoreDNS need no config; ``config`` adds direct etcd endpoints per cluster.
    """
    return [ControlPlaneCheck(config or ExporterConfig())]
