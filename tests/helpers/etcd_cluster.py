"""A real 3-member etcd cluster on loopback for the tests: free ports, temporary data dirs.

Each member is a ``fleetwatch.procs.ManagedProcess`` (own process group, stopped by pid), so
a test can kill one member and start it again with the same data dir and ports.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fleetwatch.procs import ManagedProcess, free_port, http_ok, wait_until

ETCD = shutil.which("etcd") or "etcd"


@dataclass
class EtcdMemberProc:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    initial_cluster: str = ""
    proc: ManagedProcess | None = field(default=None, repr=False)

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def argv(self) -> list[str]:
        return [
            ETCD,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", self.initial_cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", "fleetwatch-test",
            # Small and quiet: the tests need quorum behaviour, not throughput.
            "--quota-backend-bytes", str(64 * 1024 * 1024),
            "--log-level", "warn",
            "--logger", "zap",
        ]  # fmt: skip

    def start(self) -> None:
        self.proc = ManagedProcess(self.argv(), self.log_path).start()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()


class EtcdCluster:
    """Members m1..mN of one cluster; ``start()`` waits until every member is healthy."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.members = [
            EtcdMemberProc(
                name=f"m{i + 1}",
                client_port=free_port(),
                peer_port=free_port(),
                data_dir=root / f"m{i + 1}",
                log_path=root / f"m{i + 1}.log",
            )
            for i in range(size)
        ]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial

    @property
    def client_urls(self) -> list[str]:
        return [m.client_url for m in self.members]

    def member(self, name: str) -> EtcdMemberProc:
        return next(m for m in self.members if m.name == name)

    def start(self, timeout: float = 20.0) -> EtcdCluster:
        for m in self.members:
            m.start()
        self.wait_all_healthy(timeout)
        return self

    def wait_all_healthy(self, timeout: float = 20.0) -> None:
        wait_until(
            lambda: all(http_ok(f"{m.client_url}/health", timeout=2.0) for m in self.members),
            timeout,
            interval=0.1,
            what="all etcd members healthy",
        )

    def stop(self) -> None:
        """SIGKILL: the data is thrown away, and a member that lost its quorum can take
        seconds to stop gracefully."""
        for m in self.members:
            m.kill()
