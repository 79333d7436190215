"""Stand-in fleets in their own processes, so their CPU is never charged to the side measured.

One fleet process starts ``fleetwatch.standin.StandinFleet`` with N clusters (a share of
them hanging), writes its kubeconfig (one context per cluster) and ``fleet.json`` (names,
ports, modes and the PEM paths blackbox_exporter needs), then ``ready``, and serves until
SIGTERM.

A process may hold only so many descriptors (the hard limit here is 20,000 and cannot be
raised), and each cluster takes two: its listening socket and the client's kept-alive
connection. So a big fleet is split into shards of at most ``SHARD_MAX`` clusters, one
process each, their kubeconfigs side by side in one folder (``--kubeconfig-dir``).

Tokens rotate on request (:meth:`Fleet.rotate_tokens`): the benchmark writes each shard's
new tokens to ``rotate.json`` in its folder (mode 0600, as the fleet's own token files) and
sends SIGUSR1; the shard makes every cluster named there accept only its new token, then
writes ``rotated``.

Run: ``.venv/bin/python -m bench.fleet_server --dir /tmp/fleet --clusters 1000 --hang 0``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fleetwatch.procs import ManagedProcess, wait_until

if TYPE_CHECKING:
    from fleetwatch.standin.workload.fleet import StandinFleet

SHARD_MAX = 5000
REPO = Path(__file__).resolve().parent.parent
#: A token rotation: the new tokens (written by the benchmark), the shard's answer.
ROTATE_FILE, ROTATED_FILE = "rotate.json", "rotated"


@dataclass(frozen=True)
class FleetInfo:
    """What the benchmark side knows of one running fleet process."""

    kubeconfig: Path
    clusters: list[dict[str, str | int]]
    ca: Path
    client_cert: Path
    client_key: Path
    #: the shard's folder (where a rotation's files go)
    directory: Path = Path()

    def ports(self, mode: str | None = None) -> list[int]:
        return [int(c["port"]) for c in self.clusters if mode is None or c["mode"] == mode]


@dataclass
class Fleet:
    """All shards of one stand-in fleet; ``kubeconfig_dir`` holds one kubeconfig per shard."""

    kubeconfig_dir: Path
    procs: list[ManagedProcess] = field(default_factory=list)
    shards: list[FleetInfo] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    @property
    def kubeconfig(self) -> Path:
        """The single kubeconfig of a one-shard fleet."""
        assert len(self.shards) == 1, "a sharded fleet has a kubeconfig folder"
        return self.shards[0].kubeconfig

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()

    def rotate_tokens(self, tokens: Mapping[str, str], timeout: float = 60.0) -> None:
        """From now on, each cluster named accepts only its new token (module docstring)."""
        for proc, shard in zip(self.procs, self.shards, strict=True):
            names = {str(c["name"]) for c in shard.clusters}
            mine = {name: token for name, token in tokens.items() if name in names}
            if not mine:
                continue
            (shard.directory / ROTATED_FILE).unlink(missing_ok=True)
            staged = shard.directory / (ROTATE_FILE + ".new")
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(mine, f)
            staged.replace(shard.directory / ROTATE_FILE)
            proc.signal(signal.SIGUSR1)
        for shard in self.shards:
            if any(str(c["name"]) in tokens for c in shard.clusters):
                wait_until((shard.directory / ROTATED_FILE).exists, timeout, what="tokens rotated")


def start_fleet(
    directory: Path,
    clusters: int,
    hang: int = 0,
    credential: str = "client_cert_data",
    shard_max: int = SHARD_MAX,
    repo: Path = REPO,
    hang_mode: str = "hang",
) -> Fleet:
    """Start the fleet's shard processes and wait until each is ready (deadline by size).

    ``repo``: the checkout whose stand-in serves (another one to compare code versions).
    ``hang_mode``: the stand-in mode of the ``hang`` clusters (``frozen``: TCP accepted,
    no TLS handshake, as a stopped API server process).
    """
    kubeconfigs = directory / "kubeconfigs"
    kubeconfigs.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(kubeconfig_dir=kubeconfigs)
    shards = max(1, -(-clusters // shard_max))
    dirs: list[Path] = []
    try:
        for s in range(shards):
            n = clusters // shards + (1 if s < clusters % shards else 0)
            h = hang // shards + (1 if s < hang % shards else 0)
            d = directory / f"shard-{s}"
            dirs.append(d)
            fleet.procs.append(
                ManagedProcess(
                    [
                        sys.executable, "-m", "bench.fleet_server", "--dir", str(d),
                        "--clusters", str(n), "--hang", str(h), "--credential", credential,
                        "--prefix", f"bench-s{s}" if shards > 1 else "bench",
                        "--kubeconfig-out", str(kubeconfigs / f"shard-{s}.yaml"),
                    ] + (["--hang-mode", hang_mode] if hang_mode != "hang" else []),
                    directory / f"shard-{s}.log",
                    cwd=repo,
                ).start()
            )  # fmt: skip

        def ready() -> bool:
            for proc in fleet.procs:
                if not proc.alive():
                    raise RuntimeError(f"stand-in fleet exited early:\n{proc.log_tail()}")
            return all((d / "ready").exists() for d in dirs)

        wait_until(ready, timeout=60 + clusters / 50, interval=0.1, what="stand-in fleet ready")
    except BaseException:
        fleet.stop()
        raise
    for d in dirs:
        doc = json.loads((d / "fleet.json").read_text())
        fleet.shards.append(
            FleetInfo(
                kubeconfig=Path(doc["kubeconfig"]),
                clusters=doc["clusters"],
                ca=Path(doc["ca"]),
                client_cert=Path(doc["client_cert"]),
                client_key=Path(doc["client_key"]),
                directory=d,
            )
        )
    return fleet


async def serve(
    directory: Path,
    clusters: int,
    hang: int,
    credential: str,
    prefix: str,
    kubeconfig: Path,
    hang_mode: str = "hang",
) -> None:
    from fleetwatch.standin.workload.fleet import StandinFleet  # the fleet process only

    async with StandinFleet(directory) as fleet:
        # Hanging clusters are spread through the fleet, not bunched at the end.
        step = clusters // hang if hang else 0
        width = max(3, len(str(clusters)))
        for i in range(clusters):
            mode = hang_mode if step and i % step == 0 and i // step < hang else "ok"
            await fleet.add_cluster(f"{prefix}-{i:0{width}d}", mode)
        fleet.write_kubeconfig(kubeconfig, credential=credential)  # type: ignore[arg-type]
        files = fleet.certs.files
        info: dict[str, object] = {
            "clusters": [
                {"name": c.name, "port": c.port, "mode": str(c.mode)}
                for c in fleet.clusters.values()
            ],
            "kubeconfig": str(kubeconfig),
            "ca": str(files.ca_cert),
            "client_cert": str(files.client_cert),
            "client_key": str(files.client_key),
        }
        await asyncio.to_thread(_publish, directory, info)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, _rotate, fleet, directory)
        await stop.wait()


def _rotate(fleet: StandinFleet, directory: Path) -> None:
    """SIGUSR1: every cluster in ``rotate.json`` accepts only its new token; then ``rotated``."""
    path = directory / ROTATE_FILE
    tokens = json.loads(path.read_text())
    path.unlink()
    for name, token in tokens.items():
        fleet.cluster(name).token = token  # the stand-in's cached answers key on it
    (directory / ROTATED_FILE).write_text(f"{len(tokens)}\n")


def _publish(directory: Path, info: dict[str, object]) -> None:
    """fleet.json first, then the ready marker the benchmark polls for."""
    (directory / "fleet.json").write_text(json.dumps(info))
    (directory / "ready").write_text("ready\n")


def raise_fd_limit() -> int:
    """Soft open-files limit up to the hard one (one socket and one connection per cluster)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--hang", type=int, default=0, help="how many clusters hang")
    parser.add_argument(
        "--hang-mode", choices=("hang", "frozen"), default="hang",
        help="hang: TLS done, no answer; frozen: TCP accepted, no TLS handshake",
    )  # fmt: skip
    parser.add_argument("--credential", default="client_cert_data")
    parser.add_argument("--prefix", default="bench", help="cluster names: <prefix>-<n>")
    parser.add_argument("--kubeconfig-out", type=Path, default=None)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    limit = raise_fd_limit()
    if limit < 2 * args.clusters + 100:
        print(f"warning: {limit} descriptors for {args.clusters} clusters", file=sys.stderr)
    kubeconfig = args.kubeconfig_out or args.dir / "kubeconfig.yaml"
    asyncio.run(
        serve(
            args.dir, args.clusters, args.hang, args.credential, args.prefix, kubeconfig,
            args.hang_mode,
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
