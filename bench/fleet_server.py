"""A stand-in fleet in its own process, so its CPU is never charged to the side measured.

Starts ``fleetwatch.standin.StandinFleet`` with N clusters (a share of them hanging),
writes ``<dir>/kubeconfig.yaml`` (one context per cluster) and ``<dir>/fleet.json``
(names, ports, modes and the PEM paths blackbox_exporter needs), then ``<dir>/ready``,
and serves until SIGTERM.

Run: ``.venv/bin/python -m bench.fleet_server --dir /tmp/fleet --clusters 1000 --hang 0``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from fleetwatch.procs import ManagedProcess, wait_until


@dataclass(frozen=True)
class FleetInfo:
    """What the benchmark side knows of a running stand-in fleet."""

    kubeconfig: Path
    clusters: list[dict[str, object]]
    ca: Path
    client_cert: Path
    client_key: Path

    def ports(self, mode: str | None = None) -> list[int]:
        return [int(c["port"]) for c in self.clusters if mode is None or c["mode"] == mode]  # type: ignore[call-overload]


def start_fleet(
    directory: Path, clusters: int, hang: int = 0, credential: str = "client_cert_data"
) -> tuple[ManagedProcess, FleetInfo]:
    """Start a fleet process and wait (deadline grows with the size) until it is ready."""
    proc = ManagedProcess(
        [
            sys.executable,
            "-m",
            "bench.fleet_server",
            "--dir",
            str(directory),
            "--clusters",
            str(clusters),
            "--hang",
            str(hang),
            "--credential",
            credential,
        ],
        directory.parent / f"{directory.name}.log",
        cwd=Path(__file__).resolve().parent.parent,
    ).start()

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"stand-in fleet exited early:\n{proc.log_tail()}")
        return (directory / "ready").exists()

    try:
        wait_until(ready, timeout=30 + clusters / 100, interval=0.1, what="stand-in fleet ready")
    except BaseException:
        proc.stop()
        raise
    doc = json.loads((directory / "fleet.json").read_text())
    return proc, FleetInfo(
        kubeconfig=directory / "kubeconfig.yaml",
        clusters=doc["clusters"],
        ca=Path(doc["ca"]),
        client_cert=Path(doc["client_cert"]),
        client_key=Path(doc["client_key"]),
    )


async def serve(directory: Path, clusters: int, hang: int, credential: str) -> None:
    from fleetwatch.standin.fleet import StandinFleet  # the fleet process only

    async with StandinFleet(directory) as fleet:
        # Hanging clusters are spread through the fleet, not bunched at the end.
        step = clusters // hang if hang else 0
        names: list[str] = []
        width = max(3, len(str(clusters)))
        for i in range(clusters):
            mode = "hang" if step and i % step == 0 and i // step < hang else "ok"
            c = await fleet.add_cluster(f"bench-{i:0{width}d}", mode)
            names.append(c.name)
        fleet.write_kubeconfig(directory / "kubeconfig.yaml", credential=credential)  # type: ignore[arg-type]
        files = fleet.certs.files
        info = {
            "clusters": [
                {"name": c.name, "port": c.port, "mode": str(c.mode)}
                for c in fleet.clusters.values()
            ],
            "ca": str(files.ca_cert),
            "client_cert": str(files.client_cert),
            "client_key": str(files.client_key),
        }
        await asyncio.to_thread(_publish, directory, info)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


def _publish(directory: Path, info: dict[str, object]) -> None:
    """fleet.json first, then the ready marker the benchmark polls for."""
    (directory / "fleet.json").write_text(json.dumps(info))
    (directory / "ready").write_text("ready\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--hang", type=int, default=0, help="how many clusters hang")
    parser.add_argument("--credential", default="client_cert_data")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(args.dir, args.clusters, args.hang, args.credential))


if __name__ == "__main__":
    main()
