"""The floor under a first cycle: OpenSSL's own CPU per TLS handshake, client and server.

A first cycle opens one TLS connection per cluster, and on this machine the stand-in
fleet shares the cores. ``openssl s_time`` (C, no Python) makes new connections to
``openssl s_server`` for a few seconds with the stand-in's certificates (the fleet CA,
the API server's serving certificate, the admin client certificate, ECDSA P-256) and the
stand-in's session-ticket setting (one, as Go sends); the client's CPU comes from
s_time's "connections per user second", the server's from its process's CPU. Their sum
times the fleet's size, over the machine's cores, is what no code above OpenSSL can get
under.

Run: ``.venv/bin/python -m bench.handshake_floor --seconds 8``
"""

from __future__ import annotations

import argparse
import re
import resource
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, machine_load, write_result
from fleetwatch.procs import free_port, wait_until
from fleetwatch.standin.workload.certs import FleetCerts


def measure(
    seconds: float, tickets: int = 1, reuse: bool = False, page: str | None = None
) -> dict[str, Any]:
    """``reuse``: resumed handshakes (``s_time -reuse``, the session of the first one);
    ``page``: GET it on each connection (``-www``; a TLS 1.3 ticket is only read with an
    answer, so resumption needs one). ``reused`` counts s_time's resumed connections.

    ``client_cpu_ms`` is s_time's own figure (user CPU only); ``client_total_cpu_ms`` adds
    the system CPU of the s_time process (its rusage), as a process's CPU time counts it.
    """
    with tempfile.TemporaryDirectory(prefix="fw-handshake-") as tmp:
        files = FleetCerts.create(Path(tmp)).files
        port = free_port()
        server = subprocess.Popen(
            [
                "openssl", "s_server", "-quiet", "-www",
                "-accept", f"127.0.0.1:{port}",
                "-cert", str(files.server_cert), "-key", str(files.server_key),
                "-CAfile", str(files.ca_cert), "-Verify", "1",
                "-num_tickets", str(tickets),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_until(lambda: _listening(port), 10, interval=0.05, what="openssl s_server")
            cpu0 = cpu_seconds(server.pid)
            children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            with machine_load() as load:
                out = subprocess.run(
                    [
                        "openssl", "s_time", "-reuse" if reuse else "-new",
                        *(["-www", page] if page else []), "-time", str(int(seconds)),
                        "-connect", f"127.0.0.1:{port}",
                        "-cert", str(files.client_cert), "-key", str(files.client_key),
                        "-CAfile", str(files.ca_cert),
                    ],
                    capture_output=True, text=True, check=True, timeout=seconds + 30,
                ).stdout  # fmt: skip
            server_cpu = cpu_seconds(server.pid) - cpu0
            children = resource.getrusage(resource.RUSAGE_CHILDREN)  # s_time only, reaped
        finally:
            server.kill()
            server.wait(timeout=10)
    m = re.search(r"(\d+) connections in [\d.]+s; ([\d.]+) connections/user sec", out)
    if m is None:
        raise RuntimeError(f"unexpected s_time output:\n{out}")
    connections, per_user_s = int(m.group(1)), float(m.group(2))
    client_total = (children.ru_utime - children0.ru_utime) + (
        children.ru_stime - children0.ru_stime
    )
    return {
        "tickets": tickets,
        "reuse": reuse,
        "page": page,
        "reused": sum(line.count("r") for line in out.splitlines() if set(line) <= {"*", "r"}),
        "connections": connections,
        "client_cpu_ms": round(1000 / per_user_s, 3),
        "client_total_cpu_ms": round(1000 * client_total / connections, 3),
        "server_cpu_ms": round(1000 * server_cpu / connections, 3),
        "load": load,
    }


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clusters", type=int, default=10_000, help="the fleet to scale to")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = measure(args.seconds)
    both = result["client_cpu_ms"] + result["server_cpu_ms"]
    result["fleet_clusters"] = args.clusters
    result["fleet_cpu_s"] = round(both * args.clusters / 1000, 1)
    write_result("handshake_floor", result, args.out)
    return result


if __name__ == "__main__":
    main()
