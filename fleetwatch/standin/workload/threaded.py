"""A stand-in fleet for synchronous code (sync tests, the benchmarks): its own loop in a thread."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from fleetwatch.standin.workload.certs import ClientCert
from fleetwatch.standin.workload.controlplane import ControlPlane
from fleetwatch.standin.workload.fleet import StandinCluster, StandinFleet
from fleetwatch.standin.workload.kubeconfig import CaKind, Credential
from fleetwatch.standin.workload.loopthread import OnLoopThread

T = TypeVar("T")


class ThreadedFleet(OnLoopThread):
    """``StandinFleet`` with blocking methods; the servers run on a private event loop."""

    thread_name = "standin-fleet"
    what = "the fleet"

    def __init__(
        self,
        directory: Path,
        *,
        control_plane: ControlPlane | None = None,
        first_index: int = 0,
        call_timeout: float = 60.0,
    ) -> None:
        super().__init__(call_timeout)
        self.fleet = StandinFleet(directory, control_plane=control_plane, first_index=first_index)

    async def _start_servers(self) -> None:
        await self.fleet.start()

    async def _stop_servers(self) -> None:
        if self.fleet.running:
            await self.fleet.stop()

    @property
    def directory(self) -> Path:
        return self.fleet.directory

    @property
    def clusters(self) -> dict[str, StandinCluster]:
        return self.fleet.clusters

    def cluster(self, name: str) -> StandinCluster:
        return self.fleet.cluster(name)

    def requests(self, name: str) -> int:
        return self.fleet.requests(name)

    def add_cluster(
        self, name: str, mode: str = "ok", *, control_plane: ControlPlane | None = None
    ) -> StandinCluster:
        return self._call(self.fleet.add_cluster(name, mode, control_plane=control_plane))

    def add_clusters(
        self, count: int, prefix: str = "cluster", mode: str = "ok"
    ) -> list[StandinCluster]:
        return self._call(self.fleet.add_clusters(count, prefix, mode))

    def set_mode(self, name: str, mode: str) -> StandinCluster:
        return self._call(self.fleet.set_mode(name, mode))

    def set_blocked_clients(self, name: str, common_names: Iterable[str]) -> StandinCluster:
        return self._call(self.fleet.set_blocked_clients(name, list(common_names)))

    def issue_client(self, common_name: str) -> ClientCert:
        return self.fleet.issue_client(common_name)

    def set_control_plane(self, name: str, control_plane: ControlPlane) -> StandinCluster:
        return self._call(self.fleet.set_control_plane(name, control_plane))

    def write_kubeconfig(
        self,
        path: Path,
        clusters: Iterable[StandinCluster | str] | None = None,
        *,
        credential: Credential = "client_cert_data",
        ca: CaKind = "data",
        client: ClientCert | None = None,
    ) -> Path:
        return self.fleet.write_kubeconfig(
            path, clusters, credential=credential, ca=ca, client=client
        )

    def write_kubeconfig_dir(
        self,
        folder: Path,
        clusters: Iterable[StandinCluster | str] | None = None,
        *,
        credential: Credential = "client_cert_data",
        ca: CaKind = "data",
    ) -> list[Path]:
        return self.fleet.write_kubeconfig_dir(folder, clusters, credential=credential, ca=ca)
