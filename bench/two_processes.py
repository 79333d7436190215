"""The fleet split over exporter processes at once: does a second core shorten the cycle?

One exporter process is one core (Python). ``--shard.count N --shard.index I`` splits a
fleet over N exporters; here the split is the stand-in fleet's own (one kubeconfig file
per 5,000 clusters), each file given to its own exporter-side worker
(``bench.probe_cycle --worker``), all started together. A cycle's wall time is the
longest of the workers' same cycle; its CPU the sum.

Run: ``.venv/bin/python -m bench.two_processes --clusters 10000``
"""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import write_result
from bench.fleet_server import start_fleet
from bench.probe_cycle import run_worker


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--steady", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--no-checks", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmp:
        shard_max = -(-args.clusters // args.processes)
        fleet = start_fleet(Path(tmp) / "fleet", args.clusters, shard_max=shard_max)
        try:
            limit = 300 + args.clusters / 10 + (1 + args.steady) * args.timeout * 2
            with ThreadPoolExecutor(len(fleet.shards)) as pool:
                futures = [
                    pool.submit(
                        run_worker,
                        shard.kubeconfig,
                        args.steady,
                        args.timeout,
                        None,
                        limit,
                        fleet.pids,
                        "keepalive",
                        not args.no_checks,
                    )
                    for shard in fleet.shards
                ]
                workers = [f.result() for f in futures]
        finally:
            fleet.stop()
    cycles = []
    for i in range(1 + args.steady):
        mine = [w["cycles"][i] for w in workers]
        cycles.append(
            {
                "kind": mine[0]["kind"],
                "wall_s": max(c["wall_s"] for c in mine),
                "cpu_s": round(sum(c["cpu_s"] for c in mine), 3),
                "ok": sum(c["ok"] for c in mine),
            }
        )
    out = {
        "clusters": args.clusters,
        "processes": len(workers),
        "checks": not args.no_checks,
        "cycles": cycles,
        "rss_peak_mib": [w["rss_peak_mib"] for w in workers],
        "workers": workers,
    }
    write_result("two_processes" + ("_nochecks" if args.no_checks else ""), out, args.out)
    return out


if __name__ == "__main__":
    main()
