"""fleetwatch running for real, as the dashboards expect to find it in Prometheus.

A stand-in fleet (two healthy clusters, one down from the start), ``fleetwatch exporter``
probing it every second, ``fleetwatch reactor``, and a Prometheus that scrapes both and the
control-plane targets of ``/sd/control-plane`` every second with the shipped rules loaded.
Every process is ours, on 127.0.0.1, free ports, one temporary folder; ``stop()`` ends
them by pid.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from prom import Prometheus

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ThreadedFleet

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "fleetwatch.rules.yml"
HEALTHY = ("alpha", "beta")
DOWN = "gamma"
CLUSTERS = (*HEALTHY, DOWN)


def fleetwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleetwatch.cli", *args]


class LiveStack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.fleet = ThreadedFleet(root / "fleet")
        self.exporter_port = free_port()
        self.reactor_port = free_port()
        self.processes: list[ManagedProcess] = []
        self.prometheus: Prometheus | None = None

    def start(self) -> LiveStack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.fleet.start()
        for name in HEALTHY:
            self.fleet.add_cluster(name)
        self.fleet.add_cluster(DOWN, "down")
        kubeconfig = self.fleet.write_kubeconfig(self.root / "kubeconfig")
        exporter = ManagedProcess(
            fleetwatch(
                "exporter",
                f"--web.listen-address=127.0.0.1:{self.exporter_port}",
                "--probe.interval=1",
                f"--kubeconfig={kubeconfig}",
            ),
            self.root / "exporter.log",
            ready_url=f"http://127.0.0.1:{self.exporter_port}/healthz",
            env={"KUBECONFIG_DIR": ""},
        )
        self.processes.append(exporter.start(ready_timeout=20))
        self.prometheus = Prometheus(self.root / "prometheus", self.prometheus_config())
        self.prometheus.start()

    def prometheus_config(self) -> dict[str, Any]:
        def static(job: str, port: int) -> dict[str, Any]:
            return {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}

        return {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                static("fleetwatch-exporter", self.exporter_port),
                {
                    "job_name": "fleetwatch-control-plane",
                    "scrape_timeout": "500ms",
                    "http_sd_configs": [
                        {
                            "url": f"http://127.0.0.1:{self.exporter_port}/sd/control-plane",
                            "refresh_interval": "1s",
                        }
                    ],
                },
            ],
        }

    def wait_for_data(self, timeout: float = 30.0) -> None:
        """Until every panel family has something to show: statuses recorded (gamma
        OFFLINE), failure counters with two samples, the OFFLINE alert firing."""
        prom = self.prometheus
        assert prom is not None

        def ready() -> bool:
            codes = {
                s["metric"]["cluster"]: s["value"][1]
                for s in prom.instant("cluster:fleetwatch_status:code")
            }
            failures = prom.instant("increase(fleetwatch_cluster_probe_failures_total[4s]) > 0")
            offline = prom.instant('ALERTS{alertname="FleetClusterOffline", alertstate="firing"}')
            return (
                codes == {"alpha": "1", "beta": "1", "gamma": "2"}
                and bool(failures)
                and bool(offline)
            )

        try:
            wait_until(ready, timeout, interval=0.2, what="dashboard data in Prometheus")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.logs()}") from exc

    def logs(self) -> str:
        parts = [f"--- {p.log_path.name} ---\n{p.log_tail(20)}" for p in self.processes]
        if self.prometheus is not None:
            parts.append(f"--- prometheus ---\n{self.prometheus.process.log_tail(20)}")
        return "\n".join(parts)

    def stop(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()
        for process in reversed(self.processes):
            process.stop()
        with contextlib.suppress(Exception):
            self.fleet.stop()
