"""Baseline: a bare aiohttp server under ``wrk -t2 -c50`` (GET hello and a JSON POST).

This is the yardstick the reactor is compared with (``bench/reactor.py`` runs it again in
its own run); alone it tells how fast this machine is right now.

Run: ``.venv/bin/python -m bench.aiohttp_baseline --duration 5 --runs 3``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import (
    ProcWatch,
    machine_load,
    post_lua,
    run_wrk,
    summary,
    write_result,
)
from fleetwatch.procs import ManagedProcess, free_port

DEPLOY_BODY = json.dumps({"app": "shop-frontend", "cluster": "prod-eu-1"}).encode()


def start_bare(tmp: Path) -> tuple[ManagedProcess, str]:
    """Start bench.bare_server on a free loopback port; return it and its base URL."""
    port = free_port()
    proc = ManagedProcess(
        [sys.executable, "-m", "bench.bare_server", "--port", str(port)],
        tmp / "bare_server.log",
        ready_url=f"http://127.0.0.1:{port}/healthz",
        cwd=Path(__file__).resolve().parent.parent,
    ).start()
    return proc, f"http://127.0.0.1:{port}"


def wrk_runs(
    base: str, path: str, pid: int, duration: float, runs: int, script: Path | None = None
) -> dict[str, Any]:
    """``runs`` wrk runs against one URL: each run's numbers and their medians."""
    each: list[dict[str, Any]] = []
    for _ in range(runs):
        watch = ProcWatch(pid).start()
        with machine_load() as load:
            r = run_wrk(base + path, duration, script=script)
        s = watch.stop()
        each.append(
            {
                "rps": r.rps,
                "p50_ms": r.p50_ms,
                "p99_ms": r.p99_ms,
                "requests": r.requests,
                "non_2xx": r.non_2xx,
                "socket_errors": r.socket_errors,
                "server_cpu_s": round(s.cpu_s, 3),
                "server_rss_peak_mib": round(s.rss_peak_mib, 1),
                "load": load,
            }
        )
    return {
        "runs": each,
        "rps": summary([e["rps"] for e in each]),
        "p99_ms": summary([e["p99_ms"] for e in each]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        proc, base = start_bare(tmp)
        try:
            script = post_lua(tmp / "post.lua", DEPLOY_BODY, {"Content-Type": "application/json"})
            hello = wrk_runs(base, "/hello", proc.pid, args.duration, args.runs)
            post = wrk_runs(base, "/deployments", proc.pid, args.duration, args.runs, script)
        finally:
            proc.stop()
    result = {"hello": hello, "post_deployments": post}
    write_result("aiohttp_baseline", result, args.out)
    return result


if __name__ == "__main__":
    main()
