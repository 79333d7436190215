"""Metrics endpoints of the control-plane components, where a scrape of the node IP reaches them.

On a kubeadm node, etcd serves ``/metrics`` over plain HTTP on 2381, and kube-scheduler
(10259), kube-controller-manager (10257) and kube-apiserver (6443) over HTTPS. Bound to
127.0.0.1 (kubeadm's default for the first three), they are unreachable at the node IP:
Prometheus marks the target down although the component is healthy. Bound to 0.0.0.0
they answer. This module opens exactly the listeners that would answer at the node's
(loopback) address, so a real Prometheus sees ``up`` 1 or 0 as it would in the field.

Unlike the real components, the HTTPS endpoints ask for no credentials and present the
fleet's serving certificate (not valid for the node address: scrape with
``insecure_skip_verify``, as one does for kubeadm's self-signed component certificates).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass

from aiohttp import web

from fleetwatch.standin.workload.controlplane import COMPONENTS, ControlPlane, node_ips

log = logging.getLogger(__name__)

_TEXT = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class ComponentEndpoint:
    """One component's metrics listener on one node."""

    cluster: str
    node: str
    component: str
    leader: bool
    """etcd leader / the lease holder (the first Ready control-plane node)."""


def _gauge(name: str, help_text: str, value: float, labels: str = "") -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} gauge\n{name}{labels} {value}\n"


def exposition(endpoint: ComponentEndpoint) -> str:
    """A few real series of the component, enough for ``up`` and a sanity query."""
    leader = 1 if endpoint.leader else 0
    text = _gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        1767603600,
    )
    if endpoint.component == "etcd":
        return (
            text
            + _gauge(
                "etcd_server_has_leader",
                "Whether or not a leader exists. 1 is existence, 0 is not.",
                1,
            )
            + _gauge(
                "etcd_server_is_leader",
                "Whether or not this member is a leader. 1 if is, 0 otherwise.",
                leader,
            )
            + _gauge(
                "etcd_mvcc_db_total_size_in_bytes",
                "Total size of the underlying database physically allocated in bytes.",
                20480000,
            )
        )
    if endpoint.component == "kube-apiserver":
        return text + _gauge(
            "kubernetes_build_info",
            "[ALPHA] A metric with a constant '1' value labeled by major, minor, git "
            "version, git commit, git tree state, build date, Go version, and compiler "
            "from which Kubernetes was built, and platform on which it is running.",
            1,
            '{git_version="v1.30.2",major="1",minor="30"}',
        )
    return text + _gauge(
        "leader_election_master_status",
        "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 "
        "indicates backup, 1 indicates master. 'name' is the string used to identify the "
        "lease. Please make sure to group by name.",
        leader,
        f'{{name="{endpoint.component}"}}',
    )


def wanted_endpoints(
    cluster: str, plane: ControlPlane, cluster_index: int, apiserver_up: bool
) -> dict[tuple[str, int], ComponentEndpoint]:
    """The listeners that answer at node addresses for this topology.

    A component bound to 127.0.0.1 does not answer at the node IP; nor does anything on a
    node that is not Ready, nor a failed etcd member, nor the API server of a ``down``
    cluster.
    """
    if not plane.serve_metrics:
        return {}
    ips = node_ips(plane, cluster_index)
    alive = [n for n in plane.control_plane_nodes if n not in plane.nodes_not_ready]
    etcd_leader = next((n for n in alive if n not in plane.etcd_not_ready), None)
    wanted = {}
    for node in alive:
        for component, port in COMPONENTS.items():
            if component in plane.localhost_bound:
                continue
            if component == "etcd" and node in plane.etcd_not_ready:
                continue
            if component == "kube-apiserver" and not apiserver_up:
                continue
            leader = node == (etcd_leader if component == "etcd" else alive[0])
            wanted[(ips[node], port)] = ComponentEndpoint(cluster, node, component, leader)
    return wanted


class MetricsListeners:
    """Every component listener of a fleet, on one low-level aiohttp server."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self._tls = tls
        self._runner: web.ServerRunner | None = None
        self._servers: dict[tuple[str, int], asyncio.Server] = {}
        self._endpoints: dict[tuple[str, int], ComponentEndpoint] = {}
        self._by_cluster: dict[str, set[tuple[str, int]]] = {}

    async def _server(self) -> web.Server:
        if self._runner is None:
            self._runner = web.ServerRunner(
                web.Server(self._handle), handle_signals=False, shutdown_timeout=1.0
            )
            await self._runner.setup()
        assert self._runner.server is not None
        return self._runner.server

    async def reconcile(
        self, cluster: str, wanted: dict[tuple[str, int], ComponentEndpoint]
    ) -> None:
        """Open and close listeners so that exactly ``wanted`` answer for ``cluster``."""
        if not wanted and cluster not in self._by_cluster:
            return  # the common case: nothing served, nothing to remember
        current = self._by_cluster.setdefault(cluster, set())
        for key in current - set(wanted):
            self._close(key)
            current.discard(key)
        for key, endpoint in wanted.items():
            self._endpoints[key] = endpoint
            if key in current:
                continue
            host, port = key
            tls = None if endpoint.component == "etcd" else self._tls
            try:
                self._servers[key] = await asyncio.get_running_loop().create_server(
                    await self._server(), host, port, ssl=tls, reuse_address=True
                )
            except OSError as exc:  # another fleet holds this address
                log.warning("cannot serve %s metrics on %s:%d: %s", endpoint.component, *key, exc)
                self._endpoints.pop(key, None)
                continue
            current.add(key)

    def _close(self, key: tuple[str, int]) -> None:
        """Stop listening and drop open connections: the component is gone, not idle."""
        server = self._servers.pop(key, None)
        if server is not None:
            server.close()
        self._endpoints.pop(key, None)
        if self._runner is not None and self._runner.server is not None:
            for handler in self._runner.server.connections:
                transport = handler.transport
                sockname = transport.get_extra_info("sockname") if transport else None
                if transport is not None and sockname and tuple(sockname[:2]) == key:
                    handler.force_close()
                    transport.close()

    async def stop(self) -> None:
        for key in list(self._servers):
            self._close(key)
        self._by_cluster.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        endpoint = self._endpoints.get((sockname[0], sockname[1])) if sockname else None
        if endpoint is None:
            return web.Response(status=404, text="404 page not found\n")
        if request.path == "/metrics":
            response = web.Response(text=exposition(endpoint))
            response.headers["Content-Type"] = _TEXT
            return response
        if request.path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if request.path == "/health" and endpoint.component == "etcd":
            return web.json_response({"health": "true", "reason": ""})
        return web.Response(status=404, text="404 page not found\n")
