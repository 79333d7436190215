"""Where the stand-in's first-cycle CPU goes: OpenSSL's server handshake, alone and in the fleet.

``isolated``: the server side of one TLS 1.3 handshake with the fleet's certificates and
client certificate, through memory BIOs in one thread (no sockets, no event loop), timed
with ``thread_time`` around the server's calls only, for each session-ticket setting:
two tickets (OpenSSL's default), one (Go's, what the stand-in sends), none, and one
stateful ticket (``OP_NO_TICKET``: a session id, the session kept in OpenSSL's cache).
Interleaved rounds, medians.

``in_fleet``: a ``StandinFleet`` in this process while a ``bench.probe_cycle`` worker
(the exporter) runs one first cycle against it; ``SSLSocket.do_handshake``, ``recv`` and
``send`` are timed where the fleet calls them, the rest is the process's CPU besides.
With ``--steady S`` a second fleet serves a first cycle and S steady ones, and the
difference, per cluster and steady cycle, is the steady split (three requests each).

Run: ``.venv/bin/python -m bench.standin_handshake --handshakes 200 --rounds 5 --clusters 1000
--steady 8``
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import REPO, machine_load, write_result
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload.certs import FleetCerts

TICKETS = ("2 tickets", "1 ticket", "0 tickets", "1 stateful ticket")


def _server_context(certs: FleetCerts, variant: str) -> ssl.SSLContext:
    ctx = certs.server_context()
    ctx.num_tickets = 0 if variant == "0 tickets" else 2 if variant == "2 tickets" else 1
    if variant == "1 stateful ticket":
        ctx.options |= ssl.OP_NO_TICKET
    return ctx


def _one_handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> float:
    """Server CPU seconds of one full handshake (the client's not counted)."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    conn = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    spent = 0.0
    t0 = time.thread_time()
    serv = server.wrap_bio(s_in, s_out, server_side=True)
    spent += time.thread_time() - t0
    client_done = server_done = False
    while not (client_done and server_done):
        if not client_done:
            try:
                conn.do_handshake()
                client_done = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        t0 = time.thread_time()
        if not server_done:
            try:
                serv.do_handshake()
                server_done = True
            except ssl.SSLWantReadError:
                pass
        spent += time.thread_time() - t0
        c_in.write(s_out.read())
    return spent


def isolated(handshakes: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fw-handshake-") as tmp:
        certs = FleetCerts.create(Path(tmp) / "pki")
        client = certs.client_context()
        servers = {v: _server_context(certs, v) for v in TICKETS}
        per_round: dict[str, list[float]] = {v: [] for v in TICKETS}
        with machine_load() as load:
            for _ in range(rounds):
                for variant, server in servers.items():
                    total = sum(_one_handshake(client, server) for _ in range(handshakes))
                    per_round[variant].append(round(total / handshakes * 1000, 3))
    return {
        "server_cpu_ms_per_handshake": {
            v: {"median": statistics.median(ms), "rounds": ms} for v, ms in per_round.items()
        },
        "handshakes_per_round": handshakes,
        "load": load,
    }


@contextmanager
def _timed(owner: Any, names: dict[str, str], spent: dict[str, float]) -> Iterator[None]:
    """Wrap ``owner``'s methods to add their thread CPU time to ``spent[label]``."""
    originals = {name: getattr(owner, name) for name in names}

    def wrapper(name: str, label: str) -> Callable[..., Any]:
        original = originals[name]

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - t0

        return timed

    for name, label in names.items():
        setattr(owner, name, wrapper(name, label))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(owner, name, original)


async def _in_fleet(clusters: int, steady: int = 0) -> dict[str, Any]:
    spent: dict[str, float] = collections.defaultdict(float)
    labels = {"do_handshake": "handshake", "recv": "recv", "send": "send"}
    with tempfile.TemporaryDirectory(prefix="fw-handshake-") as tmp:
        async with StandinFleet(Path(tmp) / "fleet") as fleet:
            await fleet.add_clusters(clusters, prefix="h")
            kubeconfigs = Path(tmp) / "kubeconfigs"
            kubeconfigs.mkdir()
            fleet.write_kubeconfig(kubeconfigs / "fleet.yaml")
            argv = [sys.executable, "-m", "bench.probe_cycle", "--worker", "--kubeconfig",
                    str(kubeconfigs), "--steady", str(steady), "--timeout", "10"]  # fmt: skip
            with _timed(ssl.SSLSocket, labels, spent), machine_load() as load:
                cpu0 = time.process_time()
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=REPO, stdout=subprocess.PIPE, env=os.environ.copy()
                )
                out, _ = await proc.communicate()
                total = time.process_time() - cpu0
    cycles = json.loads(out.decode().strip().splitlines()[-1])["cycles"]
    per_cluster = {label: round(spent[label] / clusters * 1000, 3) for label in labels.values()}
    per_cluster["rest"] = round((total - sum(spent.values())) / clusters * 1000, 3)
    return {
        "clusters": clusters,
        "ok": min(c["ok"] for c in cycles),
        "fleet_cpu_ms_per_cluster": round(total / clusters * 1000, 3),
        "of_it_ms_per_cluster": per_cluster,
        "load": load,
    }


def _steady_split(first: dict[str, Any], both: dict[str, Any], steady: int) -> dict[str, Any]:
    """Per cluster and steady cycle: the run with steady cycles less the first-cycle run."""
    a, b = first["of_it_ms_per_cluster"], both["of_it_ms_per_cluster"]
    split = {k: round((b[k] - a[k]) / steady, 3) for k in a}
    total = (both["fleet_cpu_ms_per_cluster"] - first["fleet_cpu_ms_per_cluster"]) / steady
    return {"fleet_cpu_ms_per_cluster": round(total, 3), "of_it_ms_per_cluster": split}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handshakes", type=int, default=200, help="per variant and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clusters", type=int, default=1000, help="in_fleet; 0 skips it")
    parser.add_argument("--steady", type=int, default=0, help="in_fleet: steady cycles too")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"isolated": isolated(args.handshakes, args.rounds)}
    if args.clusters:
        result["in_fleet"] = asyncio.run(_in_fleet(args.clusters))
    if args.clusters and args.steady:
        both = asyncio.run(_in_fleet(args.clusters, args.steady))
        result["in_fleet_steady"] = _steady_split(result["in_fleet"], both, args.steady)
        result["in_fleet_steady"]["load"] = both["load"]
    write_result("standin_handshake", result, args.out)
    return result


if __name__ == "__main__":
    main()
