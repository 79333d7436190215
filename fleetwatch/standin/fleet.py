"""A fleet of stand-in Kubernetes API servers in one process, one port per cluster.

Each cluster is a listening socket on 127.0.0.1 (its own port, kept across restarts)
served by one shared aiohttp low-level server; a request finds its cluster from the
local port of its connection. One TLS context serves every healthy cluster
(kube-apiserver's serving certificate, signed by the fleet CA) and one more serves the
``wrong_ca`` clusters, so ten thousand clusters cost ten thousand sockets and small
objects, not ten thousand contexts.

Modes imitate what a probe meets in the field:

====================  =============================================================
``ok``                a healthy API server
``down``              the process is gone: connections refused (the port is kept)
``hang``              TLS handshake done, the request never answered
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

Longer than most modules: it is the fleet's whole behaviour (the TLS servers, their
failure modes, blocked clients, the kubeconfigs it writes), which the tests and the demo
drive through one object.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import resource
import secrets
import socket
import ssl
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from types import TracebackType

from aiohttp import web

from fleetwatch.standin import responses
from fleetwatch.standin.certs import CLIENT_NAME, ClientCert, FleetCerts
from fleetwatch.standin.controlplane import ControlPlane, list_body
from fleetwatch.standin.kubeconfig import CaKind, Credential, write_kubeconfig
from fleetwatch.standin.metrics import MetricsListeners, wanted_endpoints
from fleetwatch.standin.ports import PortPicker

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"


class Mode(StrEnum):
    """How a stand-in cluster answers (see the module docstring)."""

    OK = "ok"
    DOWN = "down"
    HANG = "hang"
    ERROR = "error"
    NOT_READY = "not_ready"
    UNAUTHORIZED = "unauthorized"
    WRONG_CA = "wrong_ca"


def parse_mode(mode: str) -> Mode:
    """``Mode`` from its name, or ``ValueError`` naming the valid ones."""
    try:
        return Mode(mode)
    except ValueError:
        valid = ", ".join(m.value for m in Mode)
        raise ValueError(f"unknown mode {mode!r}; expected one of: {valid}") from None


class StandinCluster:
    """One stand-in API server: its port, its bearer token, its mode and request count."""

    __slots__ = (
        "_listener",
        "_placeholder",
        "blocked_clients",
        "control_plane",
        "index",
        "mode",
        "name",
        "port",
        "requests",
        "token",
    )

    def __init__(self, name: str, index: int, token: str, control_plane: ControlPlane) -> None:
        self.name = name
        #: Position in the fleet; gives the cluster its own loopback node addresses.
        self.index = index
        self.token = token
        self.mode = Mode.OK
        self.port = 0
        #: Requests received (any path, any answer); "was this cluster probed?".
        self.requests = 0
        self.control_plane = control_plane
        #: Common names of client certificates whose requests are never answered.
        self.blocked_clients: frozenset[str] = frozenset()
        self._listener: asyncio.Server | None = None
        self._placeholder: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __repr__(self) -> str:  # never the token
        return f"StandinCluster({self.name!r}, {self.url}, mode={self.mode.value})"


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
        self._by_port: dict[int, StandinCluster] = {}
        self._certs: FleetCerts | None = None
        self._contexts: dict[bool, ssl.SSLContext] = {}
        self._runner: web.ServerRunner | None = None
        self._stopping = asyncio.Event()
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
        server = web.Server(self._handle, handler_cancellation=True)
        # Short shutdown: hung requests are released by _stopping, the rest are probes.
        self._runner = web.ServerRunner(server, shutdown_timeout=2.0, handle_signals=False)
        await self._runner.setup()
        self._stopping.clear()
        return self

    async def stop(self) -> None:
        """Close every port and connection; hung requests are released, not waited for."""
        self._stopping.set()
        for cluster in self._clusters.values():
            self._unlisten(cluster, reserve=False)
        if self._metrics is not None:
            await self._metrics.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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
        return self._runner is not None

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
        if self._runner is None:
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
        self._by_port[cluster.port] = cluster
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
        connections are closed, so a client's pool cannot hide the change.
        """
        cluster = self.cluster(name)
        new_mode = parse_mode(mode)
        old_mode = cluster.mode
        restart = Mode.DOWN in (old_mode, new_mode) or (
            (old_mode is Mode.WRONG_CA) != (new_mode is Mode.WRONG_CA)
        )
        if restart and old_mode is not new_mode:
            self._unlisten(cluster, reserve=True)
            self._close_connections(cluster.port)
            if new_mode is not Mode.DOWN:
                await self._listen(cluster, new_mode)
        cluster.mode = new_mode
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
            self._close_connections(cluster.port)
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
        assert self._runner is not None and self._runner.server is not None
        sock = self._ports.bind(cluster.port)
        try:
            sock.setblocking(False)
            cluster._listener = await asyncio.get_running_loop().create_server(
                self._runner.server,
                sock=sock,
                ssl=self._contexts[mode is Mode.WRONG_CA],
                ssl_handshake_timeout=10.0,
            )
        except BaseException:
            sock.close()
            raise
        cluster.port = sock.getsockname()[1]
        if cluster._placeholder is not None:
            cluster._placeholder.close()
            cluster._placeholder = None

    def _unlisten(self, cluster: StandinCluster, *, reserve: bool) -> None:
        """Stop listening; with ``reserve``, keep the port bound (not listening) for later.

        A bound socket that does not listen refuses connections like a dead server, and
        keeps other programs from taking the port until the cluster comes back.
        """
        if reserve and cluster._placeholder is None and cluster.port:
            placeholder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if cluster._listener is not None:
                cluster._listener.close()
                cluster._listener = None
            try:
                placeholder.bind(("127.0.0.1", cluster.port))
            except OSError:
                placeholder.close()
            else:
                cluster._placeholder = placeholder
        if cluster._listener is not None:
            cluster._listener.close()
            cluster._listener = None
        if not reserve and cluster._placeholder is not None:
            cluster._placeholder.close()
            cluster._placeholder = None

    def _close_connections(self, port: int) -> None:
        if self._runner is None or self._runner.server is None:
            return
        for handler in self._runner.server.connections:
            transport = handler.transport
            if transport is not None and _local_port(transport) == port:
                handler.force_close()
                transport.close()

    # -- requests --------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        cluster = self._by_port.get(_local_port(request.transport))
        if cluster is None:  # a connection that outlived its cluster
            return _text(404, "404 page not found\n")
        cluster.requests += 1
        mode = cluster.mode
        if cluster.blocked_clients and _client_name(request) in cluster.blocked_clients:
            mode = Mode.HANG  # cut off from this client only
        if mode in (Mode.HANG, Mode.DOWN):
            # Never answer: wait until the client gives up (aiohttp cancels this handler
            # when the connection closes) or the fleet stops, then drop the connection.
            if mode is Mode.DOWN and request.transport is not None:
                request.transport.close()
            await self._stopping.wait()
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError
        if mode is Mode.ERROR:
            return _text(500, "Internal Server Error\n")
        if mode is Mode.UNAUTHORIZED or not _authenticated(request, cluster.token):
            return web.Response(status=401, text=responses.UNAUTHORIZED, content_type=_JSON)
        if request.method not in ("GET", "HEAD"):
            return web.Response(
                status=405,
                text=responses.status_json(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                ),
                content_type=_JSON,
            )
        return self._route(request, cluster)

    def _route(self, request: web.BaseRequest, cluster: StandinCluster) -> web.StreamResponse:
        path = request.path
        endpoint = path.strip("/")
        if endpoint in responses.CHECKS:
            failing = (
                responses.ETCD_CHECKS
                if (cluster.mode is Mode.NOT_READY and endpoint != "livez")
                else frozenset()
            )
            status, body = responses.health_body(endpoint, "verbose" in request.query, failing)
            response = _text(status, body)
            response.headers["X-Content-Type-Options"] = "nosniff"
            return response
        if path in ("/version", "/version/"):
            return web.json_response(responses.VERSION)
        if path in ("/api/v1/nodes", "/api/v1/namespaces/kube-system/pods"):
            kind = "nodes" if path == "/api/v1/nodes" else "pods"
            try:
                selector = request.query.get("labelSelector", "")
                listed = list_body(kind, cluster.control_plane, cluster.index, selector)
            except ValueError as exc:
                return web.Response(
                    status=400,
                    text=responses.status_json(400, "BadRequest", str(exc)),
                    content_type=_JSON,
                )
            return web.Response(body=listed, content_type=_JSON)
        return web.Response(status=404, text=responses.NOT_FOUND, content_type=_JSON)


def _local_port(transport: asyncio.BaseTransport | None) -> int:
    if transport is None:
        return 0
    sockname = transport.get_extra_info("sockname")
    return int(sockname[1]) if sockname else 0


def _client_name(request: web.BaseRequest) -> str | None:
    """Common name of the client certificate the TLS layer verified, if one was sent."""
    transport = request.transport
    peer = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _authenticated(request: web.BaseRequest, token: str) -> bool:
    """kube-apiserver's authenticator union: a client certificate the CA signed, or a token.

    The TLS layer has already verified any certificate the client sent against the fleet
    CA, so its presence is proof enough.
    """
    transport = request.transport
    if transport is not None and transport.get_extra_info("peercert"):
        return True
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def _text(status: int, body: str) -> web.Response:
    response = web.Response(status=status, text=body)
    response.headers["Content-Type"] = _TEXT
    return response
