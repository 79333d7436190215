"""fleetwatch vs blackbox_exporter: probes per CPU-second on the same stand-in fleet.

In each run, on one stand-in fleet (its own process): a fresh fleetwatch exporter side
(``bench.probe_cycle`` worker, probes only: a first cycle with new TLS connections, then
steady cycles on kept-alive connections), then blackbox_exporter driven as fast as it goes over the
same endpoints (a new TLS connection per probe: that is how blackbox works). Each side
is charged only its own process's CPU. The ratio is taken per run; RESULTS.md reports
the medians.

Run: ``.venv/bin/python -m bench.vs_blackbox --clusters 1000 --runs 3``
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench.blackbox import run_blackbox
from bench.common import summary, write_result
from bench.fleet_server import start_fleet
from bench.probe_cycle import run_worker


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steady", type=int, default=2)
    parser.add_argument("--probes", type=int, default=3000, help="blackbox probes per run")
    parser.add_argument("--concurrency", type=int, default=32, help="blackbox driver")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        fleet = start_fleet(tmp / "fleet", args.clusters, shard_max=args.clusters)
        try:
            for _ in range(args.runs):
                fw = run_worker(
                    fleet.kubeconfig,
                    args.steady,
                    10.0,
                    None,
                    300 + args.clusters / 10,
                    fleet.pids,
                    with_checks=False,  # a probe against a probe: blackbox runs no checks
                )
                bb = run_blackbox(tmp, fleet.shards[0], args.probes, 1, args.concurrency, 120.0)
                bb_rate = bb["runs"][0]["probes_per_cpu_s"]
                first = fw["cycles"][0]["probes_per_cpu_s"]
                steady = [c["probes_per_cpu_s"] for c in fw["cycles"][1:]]
                steady_med = summary(steady)["median"] if steady else float("nan")
                runs.append(
                    {
                        "fleetwatch_first_probes_per_cpu_s": first,
                        "fleetwatch_steady_probes_per_cpu_s": steady_med,
                        "blackbox_probes_per_cpu_s": bb_rate,
                        "blackbox_probes_per_s": bb["runs"][0]["probes_per_s"],
                        "ratio_first": round(first / bb_rate, 2),
                        "ratio_steady": round(steady_med / bb_rate, 2),
                        "fleetwatch": fw,
                        "blackbox": bb["runs"][0],
                    }
                )
        finally:
            fleet.stop()
    result = {
        "clusters": args.clusters,
        "ratio_steady": summary([r["ratio_steady"] for r in runs]),
        "ratio_first": summary([r["ratio_first"] for r in runs]),
        "fleetwatch_steady_probes_per_cpu_s": summary(
            [r["fleetwatch_steady_probes_per_cpu_s"] for r in runs]
        ),
        "fleetwatch_first_probes_per_cpu_s": summary(
            [r["fleetwatch_first_probes_per_cpu_s"] for r in runs]
        ),
        "blackbox_probes_per_cpu_s": summary([r["blackbox_probes_per_cpu_s"] for r in runs]),
        "runs": runs,
    }
    write_result("vs_blackbox", result, args.out)
    return result


if __name__ == "__main__":
    main()
