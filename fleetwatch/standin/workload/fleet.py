"""A fleet of stand-in Kubernetes API servers in one process, one port per cluster.

Each cluster is a listening socket on 127.0.0.1 (its own port, kept across restarts)
served by the fleet's one ``apiserver.ApiServer``, which answers as ``answers`` says.
One TLS context serves every healthy cluster
(kube-apiserver's serving certificate, signed by the fleet CA) and one more serves the
``wrong_ca`` clusters, so ten thousand clusters cost ten thousand sockets and small
objects, not ten thousand contexts.

Modes imitate what a probe meets in the field:

====================  =============================================================
``ok``                a healthy API server
``down``              the process is gone: connections refused (the port is kept)
``hang``              TLS handshake done, the request never answered
``frozen``            TCP accepted, the TLS handshake never answered (a stopped process)
``error``             HTTP 500 ``Internal Server Error`` (a broken proxy or server)
``not_ready``         ``/readyz`` 500 with ``[-]etcd failed: reason withheld``
``unauthorized``      401 ``Status`` even for good credentials (revoked, expired)
``wrong_ca``          a serving certificate from a CA the kubeconfig does not trust
====================  =============================================================

Besides its mode, a cluster can be cut off from some watchers only: requests that present
a client certificate whose common name is in its ``blocked_clients`` are never answered,
as if the network between that client and the cluster dropped their packets. Two
exporter replicas with their own client certificates then disagree about one cluster,
which is what the rules' two vantage points must survive.

Longer than most modules: it is the fleet's whole life cycle (the listening sockets,
modes and restarts, blocked clients, the kubeconfigs it writes), which the tests and the
demo drive through one object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import resource
import secrets
import socket
import ssl
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from fleetwatch.standin.workload.apiserver import ApiServer, Listener
from fleetwatch.standin.workload.certs import CLIENT_NAME, ClientCert, FleetCerts
from fleetwatch.standin.workload.cluster import Mode, StandinCluster, parse_mode
from fleetwatch.standin.workload.controlplane import ControlPlane
from fleetwatch.standin.workload.kubeconfig import CaKind, Credential, write_kubeconfig
from fleetwatch.standin.workload.metrics import MetricsListeners, wanted_endpoints
from fleetwatch.standin.workload.ports import PortPicker

__all__ = ["Mode", "StandinCluster", "StandinFleet", "parse_mode", "raise_nofile_limit"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def raise_nofile_limit() -> int:
    """Raise the soft open-files limit to the hard one (one socket per cluster); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class StandinFleet:
    """Many stand-in API servers in the caller's event loop.

    ``directory`` receives the PEM files, token files and, on request, kubeconfigs.
    """

    def __init__(
        self,
        directory: Path,
        *,
        control_plane: ControlPlane | None = None,
        first_index: int = 0,
    ) -> None:
        self.directory = Path(directory)
        self.default_control_plane = control_plane or ControlPlane()
        self._clusters: dict[str, StandinCluster] = {}
        self._certs: FleetCerts | None = None
        self._contexts: dict[bool, ssl.SSLContext] = {}
        self._server: ApiServer | None = None
        self._listeners: dict[str, Listener] = {}
        #: Down clusters' ports, bound but not listening: refused, and kept for the comeback.
        self._placeholders: dict[str, socket.socket] = {}
        #: Node addresses derive from the cluster's index; fleets that serve component
        #: metrics side by side in one machine need different ``first_index`` values.
        self._next_index = first_index
        self._ports = PortPicker()
        self._metrics: MetricsListeners | None = None

    # -- life cycle ------------------------------------------------------------------

    async def start(self) -> StandinFleet:
        raise_nofile_limit()
        self._certs = await asyncio.to_thread(FleetCerts.create, self.directory / "pki")
        self._contexts = {
            False: self._certs.server_context(),
            True: self._certs.server_context(foreign=True),
        }
        self._metrics = MetricsListeners(self._contexts[False])
        self._server = ApiServer(asyncio.get_running_loop())
        return self

    async def stop(self) -> None:
        """Close every port and connection; hung requests are released, not waited for."""
        for cluster in self._clusters.values():
            self._unlisten(cluster, reserve=False)
        if self._server is not None:
            self._server.close_all()
            self._server = None
        if self._metrics is not None:
            await self._metrics.stop()

    async def __aenter__(self) -> StandinFleet:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def connections(self) -> int:
        """Open client connections over all clusters."""
        return self._server.connections if self._server is not None else 0

    # -- clusters --------------------------------------------------------------------

    @property
    def certs(self) -> FleetCerts:
        if self._certs is None:
            raise RuntimeError("the fleet is not started")
        return self._certs

    @property
    def clusters(self) -> dict[str, StandinCluster]:
        """The clusters by name (a copy)."""
        return dict(self._clusters)

    def cluster(self, name: str) -> StandinCluster:
        try:
            return self._clusters[name]
        except KeyError:
            raise KeyError(f"no stand-in cluster named {name!r}") from None

    async def add_cluster(
        self, name: str, mode: str = "ok", *, control_plane: ControlPlane | None = None
    ) -> StandinCluster:
        """Serve one more cluster on a port the OS picks, in ``mode``."""
        if self._server is None:
            raise RuntimeError("start the fleet before adding clusters")
        if not _NAME.fullmatch(name):
            raise ValueError(f"cluster name {name!r} must match {_NAME.pattern}")
        if name in self._clusters:
            raise ValueError(f"cluster {name!r} exists already")
        new_mode = parse_mode(mode)
        cluster = StandinCluster(
            name,
            self._next_index,
            secrets.token_urlsafe(24),
            control_plane or self.default_control_plane,
        )
        self._next_index += 1
        await self._listen(cluster, new_mode)
        cluster.mode = new_mode
        self._clusters[name] = cluster
        if new_mode is Mode.DOWN:
            self._unlisten(cluster, reserve=True)
        await self._reconcile_metrics(cluster)
        return cluster

    async def add_clusters(
        self, count: int, prefix: str = "cluster", mode: str = "ok"
    ) -> list[StandinCluster]:
        """``count`` clusters named ``<prefix>-001`` ... (zero-padded to the count)."""
        width = max(3, len(str(count)))
        return [
            await self.add_cluster(f"{prefix}-{i:0{width}d}", mode) for i in range(1, count + 1)
        ]

    async def set_mode(self, name: str, mode: str) -> StandinCluster:
        """Switch a cluster's behaviour; ``down`` closes its port, any other mode reopens it.

        Leaving or entering ``down`` or ``wrong_ca`` is a restart of the API server: open
        connections are closed, so a client's pool cannot hide the change (``down`` drops
        them as a dead process does, without TLS ``close_notify``).
        """
        cluster = self.cluster(name)
        new_mode = parse_mode(mode)
        old_mode = cluster.mode
        restart = Mode.DOWN in (old_mode, new_mode) or (
            (old_mode is Mode.WRONG_CA) != (new_mode is Mode.WRONG_CA)
        )
        if restart and old_mode is not new_mode:
            self._unlisten(cluster, reserve=True)
            self._close_connections(cluster, notify=new_mode is not Mode.DOWN)
            if new_mode is not Mode.DOWN:
                await self._listen(cluster, new_mode)
        cluster.mode = new_mode
        if old_mode is Mode.FROZEN and new_mode is not Mode.FROZEN and self._server is not None:
            # a stopped process that is restarted: the connections it never served are reset
            self._server.close_frozen(cluster)
        await self._reconcile_metrics(cluster)
        return cluster

    async def set_blocked_clients(self, name: str, common_names: Iterable[str]) -> StandinCluster:
        """Cut the cluster off from these client certificates (by common name); ``[]`` heals.

        Their requests hang, as through a network that drops packets; connections already
        open are closed so that no client keeps a connection from before the cut.
        """
        cluster = self.cluster(name)
        blocked = frozenset(common_names)
        for common_name in blocked:
            if not CLIENT_NAME.fullmatch(common_name):
                raise ValueError(
                    f"client common name {common_name!r} must match {CLIENT_NAME.pattern}"
                )
        if blocked != cluster.blocked_clients:
            cluster.blocked_clients = blocked
            self._close_connections(cluster, notify=True)
        return cluster

    async def set_control_plane(self, name: str, control_plane: ControlPlane) -> StandinCluster:
        """Replace the kube-system topology a cluster reports (nodes, static pods, CoreDNS)."""
        cluster = self.cluster(name)
        cluster.control_plane = control_plane
        await self._reconcile_metrics(cluster)
        return cluster

    async def _reconcile_metrics(self, cluster: StandinCluster) -> None:
        if self._metrics is None:
            return
        wanted = wanted_endpoints(
            cluster.name, cluster.control_plane, cluster.index, cluster.mode is not Mode.DOWN
        )
        await self._metrics.reconcile(cluster.name, wanted)

    def requests(self, name: str) -> int:
        return self.cluster(name).requests

    # -- kubeconfigs -----------------------------------------------------------------

    def _resolve(self, clusters: Iterable[StandinCluster | str] | None) -> list[StandinCluster]:
        if clusters is None:
            return list(self._clusters.values())
        return [c if isinstance(c, StandinCluster) else self.cluster(c) for c in clusters]

    def write_kubeconfig(
        self,
        path: Path,
        clusters: Iterable[StandinCluster | str] | None = None,
        *,
        credential: Credential = "client_cert_data",
        ca: CaKind = "data",
        client: ClientCert | None = None,
    ) -> Path:
        """One kubeconfig with one context per cluster (context name = cluster name).

        ``client``: the client certificate it carries (see :meth:`issue_client`).
        """
        return write_kubeconfig(
            Path(path),
            self._resolve(clusters),
            self.certs,
            self.directory / "tokens",
            credential=credential,
            ca=ca,
            client=client,
        )

    def issue_client(self, common_name: str) -> ClientCert:
        """A client certificate of its own for one watcher (``CN=<common_name>``)."""
        return self.certs.issue_client(common_name)

    def write_kubeconfig_dir(
        self,
        folder: Path,
        clusters: Iterable[StandinCluster | str] | None = None,
        *,
        credential: Credential = "client_cert_data",
        ca: CaKind = "data",
    ) -> list[Path]:
        """One ``<name>.yaml`` per cluster in ``folder`` (for ``KUBECONFIG_DIR``)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return [
            self.write_kubeconfig(folder / f"{c.name}.yaml", [c], credential=credential, ca=ca)
            for c in self._resolve(clusters)
        ]

    # -- sockets ---------------------------------------------------------------------

    async def _listen(self, cluster: StandinCluster, mode: Mode) -> None:
        """Listen on the cluster's port (a new one the first time) with the mode's TLS."""
        assert self._server is not None
        sock = self._ports.bind(cluster.port)
        try:
            listener = self._server.listen(sock, cluster, self._contexts[mode is Mode.WRONG_CA])
        except BaseException:
            sock.close()
            raise
        self._listeners[cluster.name] = listener
        cluster.port = sock.getsockname()[1]
        placeholder = self._placeholders.pop(cluster.name, None)
        if placeholder is not None:
            placeholder.close()

    def _unlisten(self, cluster: StandinCluster, *, reserve: bool) -> None:
        """Stop listening; with ``reserve``, keep the port bound (not listening) for later.

        A bound socket that does not listen refuses connections like a dead server, and
        keeps other programs from taking the port until the cluster comes back.
        """
        listener = self._listeners.pop(cluster.name, None)
        if listener is not None:
            listener.close()
        if reserve and cluster.name not in self._placeholders and cluster.port:
            placeholder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                placeholder.bind(("127.0.0.1", cluster.port))
            except OSError as exc:
                placeholder.close()
                log.warning("cannot hold port %d of %s: %s", cluster.port, cluster.name, exc)
            else:
                self._placeholders[cluster.name] = placeholder
        if not reserve:
            held = self._placeholders.pop(cluster.name, None)
            if held is not None:
                held.close()

    def _close_connections(self, cluster: StandinCluster, *, notify: bool) -> None:
        if self._server is not None:
            self._server.close_connections(cluster, notify=notify)
