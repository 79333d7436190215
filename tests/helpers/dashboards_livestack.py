"""fleetwatch running for real, as the dashboards expect to find it in Prometheus.

A stand-in fleet (alpha and beta healthy, gamma broken from the start; each with kubeadm's
kube-system), a one-member etcd that the exporter's ``--config.file`` names as beta's (so
leader, raft term and db size have data), ``fleetwatch exporter`` probing every second,
``fleetwatch reactor`` fed by a real Alertmanager, and a Prometheus that scrapes the
exporter, the reactor and the control-plane targets of ``/sd/control-plane`` every second
with the shipped rules loaded. ``play_outage()`` then makes alpha fail its probes (etcd
not ready) and recover, so that the reactor panels (cascade, restore, refused deployment,
notifications) and the OFFLINE annotations have something to show. Every process is ours,
on 127.0.0.1, free ports, one temporary folder; ``stop()`` ends them by pid.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ThreadedFleet
from tests.helpers.alertmanager_process import alertmanager_process
from tests.helpers.dashboards_prometheus import Prometheus

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "fleetwatch.rules.yml"
HEALTHY = ("alpha", "beta")
DOWN = "gamma"
CLUSTERS = (*HEALTHY, DOWN)
FLAPPED = "alpha"  # goes down and comes back in play_outage()
DIRECT_ETCD = "beta"  # its etcd is also asked directly
APPS = {"web": "alpha", "api": "alpha", "shop": "beta"}


def fleetwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleetwatch.cli", *args]


class LiveStack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.fleet = ThreadedFleet(root / "fleet")
        self.exporter_port = free_port()
        self.reactor_port = free_port()
        self.alertmanager_port = free_port()
        self.etcd_port = free_port()
        self.processes: list[ManagedProcess] = []
        self.prometheus: Prometheus | None = None

    @property
    def reactor_url(self) -> str:
        return f"http://127.0.0.1:{self.reactor_port}"

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
        # Broken from the start, answering 500: a closed ("down") port can be taken by
        # another program on a busy machine, and the failure reason would change with it.
        self.fleet.add_cluster(DOWN, "error")
        kubeconfig = self.fleet.write_kubeconfig(self.root / "kubeconfig")
        env = {"KUBECONFIG_DIR": "", "FLEETWATCH_TOKEN": ""}
        self.processes.append(self._etcd().start(ready_timeout=20))
        config_file = self.root / "fleetwatch.yml"
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        config = {"clusters": {DIRECT_ETCD: {"etcd": {"endpoints": [etcd_url]}}}}
        config_file.write_text(json.dumps(config))
        probes = ["--probe.interval=1", f"--config.file={config_file}"]
        for command, port, flags in (
            ("exporter", self.exporter_port, probes),
            ("reactor", self.reactor_port, [f"--db.path={self.root / 'reactor.db'}"]),
        ):
            process = ManagedProcess(
                fleetwatch(
                    command,
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--kubeconfig={kubeconfig}",
                    *flags,
                ),
                self.root / f"{command}.log",
                ready_url=f"http://127.0.0.1:{port}/healthz",
                env=env,
            )
            self.processes.append(process.start(ready_timeout=20))
        self.processes.append(self._alertmanager().start(ready_timeout=20))
        self.prometheus = Prometheus(self.root / "prometheus", self.prometheus_config())
        self.prometheus.start()

    def _etcd(self) -> ManagedProcess:
        """One etcd member on loopback (plain HTTP), ready when /health answers."""
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed: run scripts/install.sh")
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{free_port()}"
        return ManagedProcess(
            [
                binary,
                "--name=m1",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=m1={peer}",
                "--initial-cluster-state=new",
            ],
            self.root / "etcd.log",
            ready_url=f"{client}/health",
        )

    def _alertmanager(self) -> ManagedProcess:
        """Alertmanager routing every alert to the reactor without waiting."""
        binary = shutil.which("prometheus-alertmanager")
        if binary is None:
            raise RuntimeError("prometheus-alertmanager is not installed: run scripts/install.sh")
        folder = self.root / "alertmanager"
        folder.mkdir()
        config = {
            "route": {
                "receiver": "reactor",
                "group_by": ["alertname", "cluster"],
                "group_wait": "0s",
                "group_interval": "1s",
                # With 1 s probes alpha can be OFFLINE for less than one group_interval:
                # its ONLINE alert then resolves and fires again between two flushes, and
                # Alertmanager (same fingerprint, already notified) sends the new
                # startsAt only with the next repeat. A short repeat keeps that wait
                # short (the shipped route's 300 s probes never flap that fast).
                "repeat_interval": "2s",
            },
            "receivers": [
                {
                    "name": "reactor",
                    "webhook_configs": [
                        {"url": f"{self.reactor_url}/alerts", "send_resolved": True}
                    ],
                }
            ],
        }
        (folder / "alertmanager.yml").write_text(json.dumps(config))
        url = f"http://127.0.0.1:{self.alertmanager_port}"
        return alertmanager_process(
            folder,
            folder / "alertmanager.yml",
            self.alertmanager_port,
            extra=[f"--web.external-url={url}"],
            binary=binary,
        )

    def prometheus_config(self) -> dict[str, Any]:
        def static(job: str, port: int) -> dict[str, Any]:
            return {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}

        am = f"127.0.0.1:{self.alertmanager_port}"
        return {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am]}]}]},
            "scrape_configs": [
                static("fleetwatch-exporter", self.exporter_port),
                static("fleetwatch-reactor", self.reactor_port),
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

    # -- the reactor -------------------------------------------------------------------

    def reactor_call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One reactor API call: the JSON answer, or the HTTP status of an error."""
        request = urllib.request.Request(
            f"{self.reactor_url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code

    def _status(self, kind: str, name: str) -> str:
        answer = self.reactor_call("GET", f"/{kind}/{name}")
        return str(answer["status"]) if isinstance(answer, dict) else f"HTTP {answer}"

    def play_outage(self, timeout: float = 30.0) -> None:
        """Apps deployed on alpha and beta; alpha goes down (cascade) and comes back
        (restore); a deployment to gamma (OFFLINE) is refused; one more deployment."""
        for app, cluster in APPS.items():
            created = self.reactor_call("POST", "/apps", {"name": app, "cluster": cluster})
            assert isinstance(created, dict), f"creating {app}: HTTP {created}"
            deployed = self.reactor_call("POST", "/deployments", {"app": app, "cluster": cluster})
            assert isinstance(deployed, dict), f"deploying {app}: HTTP {deployed}"

        def flapped_apps_are(status: str) -> bool:
            return all(self._status("apps", a) == status for a, c in APPS.items() if c == FLAPPED)

        self._wait(lambda: self._status("clusters", FLAPPED) == "ONLINE", timeout, "alpha ONLINE")
        self._wait(lambda: self._status("clusters", DOWN) == "OFFLINE", timeout, "gamma OFFLINE")
        # not_ready (readyz 500, "[-]etcd failed") keeps alpha's port listening, as
        # "error" does for gamma.
        self.fleet.set_mode(FLAPPED, "not_ready")
        self._wait(lambda: flapped_apps_are("DEGRADED"), timeout, "cascade on alpha")
        self.fleet.set_mode(FLAPPED, "ok")
        self._wait(lambda: flapped_apps_are("DEPLOYED"), timeout, "restore on alpha")
        refused = self.reactor_call("POST", "/deployments", {"app": "shop", "cluster": DOWN})
        assert refused == 409, f"deployment to OFFLINE {DOWN}: {refused}"
        # Once more now that Prometheus has scraped the first ones: the panel shows an increase.
        again = self.reactor_call("POST", "/deployments", {"app": "shop", "cluster": "beta"})
        assert isinstance(again, dict), f"redeploying shop: HTTP {again}"

    # -- Prometheus --------------------------------------------------------------------

    def wait_for_data(self, timeout: float = 30.0) -> None:
        """Until Prometheus holds what the tests look for: statuses recorded (gamma
        OFFLINE, alpha back ONLINE), failure counters with two samples, the OFFLINE alert
        firing, and the reactor's final counts (a scrape can catch the status counts
        read just before a notification and the counters it moved just after)."""
        prom = self.prometheus
        assert prom is not None
        final_reactor = (
            "fleetwatch_reactor_outages_closed_total > 0"
            f" and on () fleetwatch_reactor_deployments_total >= {len(APPS) + 1}"
            f' and on () fleetwatch_reactor_apps{{status="DEPLOYED"}} == {len(APPS)}'
        )

        def ready() -> bool:
            codes = {
                s["metric"]["cluster"]: s["value"][1]
                for s in prom.instant("cluster:fleetwatch_status:code")
            }
            return (
                codes == {"alpha": "1", "beta": "1", "gamma": "2"}
                and bool(prom.instant("increase(fleetwatch_cluster_probe_failures_total[4s]) > 0"))
                and bool(
                    prom.instant('ALERTS{alertname="FleetClusterOffline", alertstate="firing"}')
                )
                and bool(prom.instant(final_reactor))
            )

        self._wait(ready, timeout, "dashboard data in Prometheus")

    def _wait(self, check: Callable[[], object], timeout: float, what: str) -> None:
        try:
            wait_until(check, timeout, interval=0.1, what=what)
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
