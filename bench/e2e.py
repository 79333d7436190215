"""End to end: a cluster goes down -> its apps DEGRADED, against the floor N x probe interval.

Every part is real and local, wired by ``fleetwatch.cli.wiring`` exactly as the end-to-end
tests and the demo wire it: stand-in clusters -> ``fleetwatch exporter`` (probe every
``--interval``) -> Prometheus (scrape and evaluate every ``--interval``, the rules of
``fleetwatch rules`` for N) -> Alertmanager (the shipped route) -> ``fleetwatch reactor``.
Each run switches one stand-in cluster to ``down`` (or ``--mode``), times until its app is DEGRADED
(polling the reactor every 20 ms), switches it back and times until DEPLOYED.

Run: ``.venv/bin/python -m bench.e2e --runs 5 --threshold 2 --interval 1``
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from alerts.rules import RuleSettings, prom_duration
from bench.common import machine_load, summary, write_result
from fleetwatch.cli import wiring
from fleetwatch.cli.wiring import JsonClient
from fleetwatch.procs import ManagedProcess, wait_until
from fleetwatch.standin import ThreadedFleet


class Chain:
    """The running loop: exporter, Prometheus, Alertmanager, reactor (stopped by pid)."""

    def __init__(self, root: Path, fleet: ThreadedFleet, threshold: int, interval: float) -> None:
        self.procs: list[ManagedProcess] = []
        try:
            self._start(root, fleet, threshold, interval)
        except BaseException:
            self.stop()  # what started before the failure must not outlive the benchmark
            raise

    def _start(self, root: Path, fleet: ThreadedFleet, threshold: int, interval: float) -> None:
        token = secrets.token_urlsafe(24)
        token_file = root / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        kubeconfig = root / "kubeconfig.yaml"
        fleet.write_kubeconfig(kubeconfig)
        rules = wiring.render_rules_file(
            root / "rules.yml",
            RuleSettings(failure_threshold=threshold, probe_interval=interval),
        )
        reactor, reactor_port = wiring.start_reactor(
            root / "reactor", db_path=root / "reactor" / "fleetwatch.db",
            token_file=token_file, kubeconfig=kubeconfig,
        )  # fmt: skip
        self.procs.append(reactor)
        self.reactor = JsonClient(f"http://127.0.0.1:{reactor_port}", token)
        exporter, exporter_port = wiring.start_exporter(
            root / "exporter", kubeconfig=kubeconfig, interval=interval
        )
        self.procs.append(exporter)
        group = prom_duration(interval)
        am, am_port = wiring.start_alertmanager(
            root / "alertmanager",
            wiring.alertmanager_config(
                reactor_url=self.reactor.base, token_file=token_file,
                group_interval=group, repeat_interval="1m",
            ),
        )  # fmt: skip
        self.procs.append(am)
        prom, _ = wiring.start_prometheus(
            root / "prometheus",
            wiring.prometheus_config(
                exporter=f"127.0.0.1:{exporter_port}", alertmanager=f"127.0.0.1:{am_port}",
                rule_file=rules, interval=interval,
            ),
        )  # fmt: skip
        self.procs.append(prom)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()

    def wait(self, predicate: Any, what: str, timeout: float = 60.0) -> float:
        wait_until(predicate, timeout, interval=0.02, what=what)
        return time.monotonic()

    def app_status(self, name: str) -> str:
        status: str = self.reactor.get(f"/apps/{name}")["status"]
        return status

    def cluster_status(self, name: str) -> str:
        status: str = self.reactor.get(f"/clusters/{name}")["status"]
        return status


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threshold", type=int, default=2, help="N, failed probes to OFFLINE")
    parser.add_argument("--interval", type=float, default=1.0, help="probe/scrape/eval seconds")
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument(
        "--mode",
        default="down",
        help="how the cluster fails: down (port closed, the default), error (HTTP 500), ...",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    floor = args.threshold * args.interval
    down: list[float] = []
    up: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir, machine_load() as load:
        root = Path(tmpdir)
        with ThreadedFleet(root / "fleet") as fleet:
            names = [f"e2e-{i}" for i in range(args.clusters)]
            for name in names:
                fleet.add_cluster(name)
            chain = Chain(root, fleet, args.threshold, args.interval)
            try:
                target = names[0]
                for name in names:
                    chain.wait(lambda n=name: chain.cluster_status(n) == "ONLINE", f"{name} ONLINE")
                    chain.reactor.post("/apps", {"name": f"app-{name}", "cluster": name})
                    chain.reactor.post("/deployments", {"app": f"app-{name}", "cluster": name})
                for _ in range(args.runs):
                    fleet.set_mode(target, args.mode)
                    t_down = time.monotonic()
                    t_degraded = chain.wait(
                        lambda: chain.app_status(f"app-{target}") == "DEGRADED", "DEGRADED"
                    )
                    down.append(t_degraded - t_down)
                    fleet.set_mode(target, "ok")
                    t_up = time.monotonic()
                    t_deployed = chain.wait(
                        lambda: chain.app_status(f"app-{target}") == "DEPLOYED", "DEPLOYED"
                    )
                    up.append(t_deployed - t_up)
                others_ok = all(chain.app_status(f"app-{n}") == "DEPLOYED" for n in names[1:])
            finally:
                chain.stop()
    result = {
        "threshold": args.threshold,
        "mode": args.mode,
        "interval_s": args.interval,
        "floor_s": floor,
        "down_to_degraded_s": summary(down),
        "above_floor_s": summary([d - floor for d in down]),
        "up_to_deployed_s": summary(up),
        "runs_down_s": [round(d, 3) for d in down],
        "runs_up_s": [round(u, 3) for u in up],
        "other_clusters_untouched": others_ok,
        "load": load,
    }
    write_result(f"e2e_n{args.threshold}", result, args.out)
    return result


if __name__ == "__main__":
    main()
