"""``python -m fleetwatch.standin``: serve a fleet by hand, or act as its exec plugin.

``serve`` runs a fleet until SIGTERM/SIGINT, writes one kubeconfig per cluster into
``--dir`` and prints one JSON line (cluster names and URLs, the control URL).
``exec-credential`` is the client-go exec plugin the kubeconfigs name: it prints an
``ExecCredential`` with a token or a client certificate read from files, and imports
nothing heavy, because clients run it every time they load credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetwatch.common.logs import setup_logging
from fleetwatch.standin.management.cli import add_parser as add_management
from fleetwatch.standin.management.cli import serve as serve_management

EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"


def exec_credential(args: argparse.Namespace) -> int:
    status: dict[str, Any]
    if args.token_file:
        status = {"token": Path(args.token_file).read_text().strip()}
    elif args.cert_file and args.key_file:
        status = {
            "clientCertificateData": Path(args.cert_file).read_text(),
            "clientKeyData": Path(args.key_file).read_text(),
        }
    else:
        print("exec-credential needs --token-file, or --cert-file and --key-file", file=sys.stderr)
        return 2
    json.dump(
        {"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential", "status": status}, sys.stdout
    )
    return 0


async def _serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from fleetwatch.standin.workload.control import cluster_json, create_app
    from fleetwatch.standin.workload.controlplane import ControlPlane
    from fleetwatch.standin.workload.fleet import StandinFleet

    directory = Path(args.dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    plane = ControlPlane(serve_metrics=args.serve_metrics)
    # A hidden folder for the certificates and keys: KUBECONFIG_DIR skips hidden entries, so
    # pointing the exporter at --dir finds the kubeconfigs and nothing else.
    fleet = StandinFleet(directory / ".fleet", control_plane=plane, first_index=args.first_index)
    async with fleet:
        clusters = await fleet.add_clusters(args.clusters, args.prefix, args.mode)
        kubeconfigs = await asyncio.to_thread(
            fleet.write_kubeconfig_dir, directory, clusters, credential=args.credential
        )
        runner = web.AppRunner(create_app(fleet), handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.control_port)
        await site.start()
        try:
            port = runner.addresses[0][1]
            summary = {
                "control_url": f"http://127.0.0.1:{port}",
                "ca_file": str(fleet.certs.files.ca_cert),
                "clusters": [
                    {**cluster_json(c), "kubeconfig": str(path)}
                    for c, path in zip(clusters, kubeconfigs, strict=True)
                ],
            }
            print(json.dumps(summary), flush=True)
            await stop.wait()
        finally:
            await runner.cleanup()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fleetwatch.standin", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a stand-in fleet until SIGTERM/SIGINT")
    serve.add_argument("--clusters", type=int, default=3, help="how many clusters (default 3)")
    serve.add_argument("--dir", required=True, help="folder for kubeconfigs and certificates")
    serve.add_argument("--prefix", default="cluster", help="names are PREFIX-001, ...")
    serve.add_argument("--mode", default="ok", help="initial mode of every cluster")
    serve.add_argument(
        "--credential",
        default="client_cert_data",
        help="credential kind written into the kubeconfigs",
    )
    serve.add_argument(
        "--control-port",
        type=int,
        default=0,
        help="port of the control API on 127.0.0.1 (default: any free)",
    )
    serve.add_argument(
        "--serve-metrics",
        action="store_true",
        help="listen at the loopback node addresses where control-plane metrics would answer",
    )
    serve.add_argument(
        "--first-index",
        type=int,
        default=0,
        help="index of the first cluster (node addresses derive from it; default 0)",
    )
    add_management(sub)
    exe = sub.add_parser("exec-credential", help="client-go exec plugin (prints ExecCredential)")
    exe.add_argument("--token-file")
    exe.add_argument("--cert-file")
    exe.add_argument("--key-file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "exec-credential":
        return exec_credential(args)
    if args.command == "management":
        setup_logging("info")
        return asyncio.run(serve_management(args))
    if args.clusters < 1:
        print("--clusters must be at least 1", file=sys.stderr)
        return 2
    setup_logging("info")
    try:
        return asyncio.run(_serve(args))
    except ValueError as exc:  # a bad name, mode or credential kind
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
