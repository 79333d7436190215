"""POST /deployments on one PostgreSQL replica of several source trees, against the bare
aiohttp handler, interleaved in one run.

Why: on a shared machine the load moves more between two runs of ``bench.reactor`` than
a change moves the reactor, so a before/after taken minutes apart says little. Here each
round runs wrk (2 threads, 50 connections, the deployments of ``bench.reactor``) on the
bare handler, then on a ``fleetwatch reactor`` started from each tree (``PYTHONPATH``
set to it), all on one PostgreSQL server (durable defaults) seeded as ``bench.reactor``
seeds it. The deployments are settled (each app deployed again where it is), or, with
``--moving``, each moves its app to another cluster. Each figure has the machine's load
beside it, and each reactor's its ratio to the bare handler of the same round:
throughput, p99, CPU per request (the serving process's), and the database server's CPU
per request (its processes, summed).

A tree is ``NAME=PATH`` or ``NAME=PATH:FLAGS`` (more reactor flags, space-separated),
e.g. a copy of the tree before a change made with ``git archive``:

    git archive 101783e | tar -x -C /tmp/before
    .venv/bin/python -m bench.reactor_ab --tree before=/tmp/before --tree after=$PWD \\
        --duration 10 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.aiohttp_baseline import start_bare
from bench.common import (
    ProcWatch,
    children_cpu_seconds,
    cpu_seconds,
    machine_load,
    run_wrk,
    summary,
    write_result,
)
from bench.reactor import deployments_script, seed, seed_postgres, start_reactor
from fleetwatch.procs import ManagedProcess
from tests.helpers.reactor_postgres import PostgresServer


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster and its children (the backends,
    the WAL writer), so other servers on the machine do not count."""
    return cpu_seconds(postmaster) + children_cpu_seconds(postmaster)


def one_run(base: str, pid: int, postmaster: int, duration: float, script: Path) -> dict[str, Any]:
    """One wrk run on ``base``: its figures, the load, CPU per request of both servers."""
    watch = ProcWatch(pid).start()
    db0 = server_cpu_s(postmaster)
    with machine_load() as load:
        result = run_wrk(base + "/deployments", duration, script=script)
    cpu = watch.stop().cpu_s
    requests = max(result.requests, 1)
    return {
        "rps": round(result.rps),
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "non_2xx": result.non_2xx,
        "cpu_us_per_request": round(cpu * 1e6 / requests, 1),
        "db_cpu_us_per_request": round((server_cpu_s(postmaster) - db0) * 1e6 / requests, 1),
        "load": load,
    }


def start_tree(tmp: Path, db: Path, url: str, name: str, spec: str, writers: int) -> Any:
    """A reactor from the tree ``spec`` (``PATH`` or ``PATH:FLAGS``) on the database."""
    path, _, flags = spec.partition(":")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(Path(path).resolve())
    try:
        return start_reactor(tmp, db, db_url=url, name=name, writers=writers, extra=flags.split())
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH[:FLAGS]")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=8, help="--db.writers of each reactor")
    parser.add_argument(
        "--moving",
        action="store_true",
        help="each deployment moves its app to another cluster (none settled)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = [tuple(t.split("=", 1)) for t in args.tree]
    width = len(str(args.clusters))
    names = [f"c{i:0{width}d}" for i in range(args.clusters)]
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        db = tmp / "fleet.db"
        seed(db, args.clusters, 10)  # the SQLite file start_reactor names (not used)
        server = PostgresServer(Path(tempfile.mkdtemp(prefix="fw-bench-pg-")), durable=True)
        server.init().start()
        procs: list[ManagedProcess] = []
        try:
            postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
            url = server.create_database("bench")
            seed_postgres(url, args.clusters, 10)
            bare, bare_base = start_bare(tmp)
            procs.append(bare)
            targets = [("bare", bare_base, bare.pid)]
            for name, spec in trees:
                proc, base = start_tree(tmp, db, url, name, spec, args.writers)
                procs.append(proc)
                targets.append((name, base, proc.pid))
            script = deployments_script(tmp, names, moving=args.moving)
            for _, base, _ in targets:  # warm-up: connections, prepared statements
                run_wrk(base + "/deployments", 2, script=script)
            for _ in range(args.rounds):
                row = {n: one_run(b, p, postmaster, args.duration, script) for n, b, p in targets}
                for name, _, _ in targets[1:]:
                    run, bare_run = row[name], row["bare"]
                    run["rps_ratio"] = round(run["rps"] / max(bare_run["rps"], 1), 3)
                    run["p99_ratio"] = round(run["p99_ms"] / max(bare_run["p99_ms"], 1e-9), 2)
                    run["cpu_ratio"] = round(
                        run["cpu_us_per_request"] / max(bare_run["cpu_us_per_request"], 1e-9), 2
                    )
                rounds.append(row)
                print(json.dumps(row), flush=True)
        finally:
            for proc in procs:
                proc.stop()
            server.stop()
            server.remove()
    out: dict[str, Any] = {
        "trees": dict(trees),
        "writers": args.writers,
        "moving": args.moving,
        "rounds": rounds,
    }
    for name, _, _ in targets:
        keys = ["rps", "p99_ms", "cpu_us_per_request"]
        if name != "bare":
            keys += ["db_cpu_us_per_request", "rps_ratio", "p99_ratio", "cpu_ratio"]
        out[name] = {k: summary([r[name][k] for r in rounds]) for k in keys}
    write_result("reactor_ab", out, args.out)
    return out


if __name__ == "__main__":
    main()
