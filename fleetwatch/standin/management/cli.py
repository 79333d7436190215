"""``python -m fleetwatch.standin management``: serve a management cluster by hand.

Writes ``DIR/management.kubeconfig`` (admin token, CA embedded), prints one JSON line
(``url``, ``control_url``, ``kubeconfig``, ``token``, ``ca_file``) and serves until
SIGTERM or SIGINT (exit 0). ``--seed FOLDER`` applies every YAML/JSON document under it
first.

Only ``serve`` loads the server (aiohttp, cryptography): ``build_parser`` of
``fleetwatch.standin.__main__`` calls :func:`add_parser` for every command, including the
exec plugin that clients run on every credential load and that must start fast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "management", help="serve a stand-in management cluster until SIGTERM/SIGINT"
    )
    parser.add_argument("--dir", required=True, help="folder for the kubeconfig and certificates")
    parser.add_argument(
        "--port", type=int, default=0, help="API port on 127.0.0.1 (default: any free)"
    )
    parser.add_argument(
        "--control-port", type=int, default=0, help="control API port (default: any free)"
    )
    parser.add_argument(
        "--bookmark-seconds",
        type=float,
        default=60.0,
        help="seconds between a watch's BOOKMARKs (default 60, about kube-apiserver's)",
    )
    parser.add_argument("--seed", help="apply every YAML/JSON document under this folder first")


async def serve(args: argparse.Namespace) -> int:
    from fleetwatch.standin.management.cluster import ManagementCluster, ManagementSettings
    from fleetwatch.standin.management.seed import load_folder

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    settings = ManagementSettings(
        port=args.port, control_port=args.control_port, bookmark_seconds=args.bookmark_seconds
    )
    docs = await asyncio.to_thread(load_folder, Path(args.seed)) if args.seed else []
    async with ManagementCluster(Path(args.dir), settings) as cluster:
        cluster.seed(docs)
        summary = {
            "url": cluster.url,
            "control_url": cluster.control_url,
            "kubeconfig": str(cluster.kubeconfig),
            "token": cluster.token,
            "ca_file": str(cluster.ca_file),
        }
        print(json.dumps(summary), flush=True)
        await stop.wait()
    return 0
