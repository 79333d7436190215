"""The demo's running parts: a stand-in fleet, the exporter, the reactor with a few apps and,
when installed, Prometheus and Alertmanager.

:class:`Demo` starts them (through ``fleetwatch.cli.wiring``, which keeps the process and
configuration details), writes the state file ``fleetwatch demo down|up`` reads, tells
people where each part is (:meth:`Demo.banner`) and stops every child by its pid.
``fleetwatch.cli.demo`` is the command around it, and prints what changes (``Watcher``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from alerts.rules import RuleSettings
from fleetwatch.cli import demo_cd, wiring
from fleetwatch.cli.wiring import JsonClient
from fleetwatch.procs import ManagedProcess, wait_until
from fleetwatch.standin.management.process import ManagementProcess

#: Usual ports of each part; taken when free (``--web.free-ports`` never takes them).
USUAL_PORTS = {"exporter": 9713, "reactor": 9714, "prometheus": 9090, "alertmanager": 9093}
PREFIX = "demo"
#: What ``kubectl get`` lists of the demo's CD objects.
CD_RESOURCES = "kustomizations,helmreleases,applications"
#: Apps deployed by the demo: name -> index of its cluster (the first has two).
APPS = (("shop-frontend", 0), ("shop-api", 0), ("payments", 1), ("search", 2), ("reports", 3))


def default_state_file() -> Path:
    """Where a running demo tells ``demo down``/``up`` how to reach its fleet."""
    return Path(tempfile.gettempdir()) / f"fleetwatch-demo-{os.getuid()}.json"


def command_name() -> str:
    """How to type ``fleetwatch`` in another terminal: the bare name only when it is ours."""
    ours = Path(sys.executable).parent / "fleetwatch"
    found = shutil.which("fleetwatch")
    if found is not None and (not ours.exists() or Path(found).resolve() == ours.resolve()):
        return "fleetwatch"
    return str(ours) if ours.exists() else f"{sys.executable} -m fleetwatch.cli"


def _port(name: str, free_only: bool) -> int | None:
    """The usual port of a part when nobody listens there; None: any free one."""
    if free_only:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", USUAL_PORTS[name]))
        except OSError:
            return None
    return USUAL_PORTS[name]


@dataclass
class Demo:
    """The demo's children and folder; ``stop()`` undoes ``start()`` whatever got started."""

    clusters: int
    interval: float
    threshold: int
    free_ports: bool
    state_file: Path
    with_prometheus: bool
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fleetwatch-demo-")))
    procs: dict[str, ManagedProcess] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    management_kubeconfig: Path | None = None

    # -- start ------------------------------------------------------------------------

    def start(self) -> None:
        token_file = self.root / "token"
        token_file.write_text(self.token + "\n")
        token_file.chmod(0o600)
        kube_dir = self.root / "kubeconfigs"
        # An empty main kubeconfig: the demo must never read (and probe) the user's own.
        empty = self.root / "empty-kubeconfig.yaml"
        empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")

        def standin(port: int) -> ManagedProcess:
            return ManagedProcess(
                [
                    sys.executable,
                    "-m",
                    "fleetwatch.standin",
                    "serve",
                    f"--clusters={self.clusters}",
                    f"--prefix={PREFIX}",
                    f"--dir={kube_dir}",
                    f"--control-port={port}",
                ],
                self.root / "standin.log",
                ready_url=f"http://127.0.0.1:{port}/healthz",
            )

        self.procs["standin"], control_port = wiring.start_on_port(standin, None)
        self.urls["control"] = f"http://127.0.0.1:{control_port}"
        control = JsonClient(self.urls["control"])
        self.names = [c["name"] for c in control.get("/clusters")]
        management = self._start_management(kube_dir)
        # The clusters come from the management cluster's Secrets, not from the files: so
        # they are named by their Secrets, which the Flux and Argo CD objects name too.
        from_secrets = [
            "--discovery.kubernetes",
            f"--discovery.kubernetes.kubeconfig={management.kubeconfig}",
        ]
        self.procs["reactor"], reactor_port = wiring.start_reactor(
            self.root / "reactor",
            port=_port("reactor", self.free_ports),
            db_path=self.root / "reactor" / "fleetwatch.db",
            token_file=token_file,
            kubeconfig=empty,
            extra=[
                *from_secrets,
                "--cd.flux",
                "--cd.argocd",
                f"--cd.kubeconfig={management.kubeconfig}",
            ],
        )
        self.urls["reactor"] = f"http://127.0.0.1:{reactor_port}"
        self.procs["exporter"], exporter_port = wiring.start_exporter(
            self.root / "exporter",
            port=_port("exporter", self.free_ports),
            kubeconfig=empty,
            interval=self.interval,
            extra=from_secrets,
        )
        self.urls["exporter"] = f"http://127.0.0.1:{exporter_port}"
        if self.with_prometheus:
            self._start_prometheus(token_file, exporter_port, reactor_port)
        self._deploy_apps()
        self._wait_mirrored()
        self._write_state()

    def _start_management(self, kube_dir: Path) -> ManagementProcess:
        """The management cluster: a Cluster API Secret per demo cluster, Argo CD's cluster
        Secret of each that has Applications, and the Flux and Argo CD objects of those
        clusters (``fleetwatch.cli.demo_cd``)."""
        management = ManagementProcess(self.root / "management").start()
        self.procs["management"] = management.process
        self.urls["management"] = management.url
        self.management_kubeconfig = management.kubeconfig
        kubeconfigs = {name: (kube_dir / f"{name}.yaml").read_text() for name in self.names}
        management.seed(demo_cd.cluster_secrets(kubeconfigs))
        management.seed(demo_cd.demo_objects(self.names))
        return management

    def _wait_mirrored(self) -> None:
        """Until the reactor mirrors every Flux and Argo CD object as an app."""
        reactor = JsonClient(self.urls["reactor"])
        wanted = {demo_cd.mirrored_name(o) for o in demo_cd.demo_objects(self.names)}
        wait_until(
            lambda: wanted <= {a["name"] for a in reactor.get("/apps")},
            30,
            interval=0.1,
            what="the Flux and Argo CD objects mirrored by the reactor",
        )

    def _start_prometheus(self, token_file: Path, exporter_port: int, reactor_port: int) -> None:
        self.procs["alertmanager"], am_port = wiring.start_alertmanager(
            self.root / "alertmanager",
            wiring.alertmanager_config(
                reactor_url=self.urls["reactor"],
                token_file=token_file,
                group_interval="1s",
                repeat_interval="5m",
            ),
            _port("alertmanager", self.free_ports),
        )
        self.urls["alertmanager"] = f"http://127.0.0.1:{am_port}"
        rules = wiring.render_rules_file(
            self.root / "prometheus" / "fleetwatch.rules.yml",
            RuleSettings(failure_threshold=self.threshold, probe_interval=self.interval),
        )
        self.procs["prometheus"], prom_port = wiring.start_prometheus(
            self.root / "prometheus",
            wiring.prometheus_config(
                exporter=f"127.0.0.1:{exporter_port}",
                alertmanager=f"127.0.0.1:{am_port}",
                rule_file=rules,
                interval=min(self.interval, 1.0),
                reactor=f"127.0.0.1:{reactor_port}",
            ),
            _port("prometheus", self.free_ports),
        )
        self.urls["prometheus"] = f"http://127.0.0.1:{prom_port}"

    def _deploy_apps(self) -> None:
        reactor = JsonClient(self.urls["reactor"], self.token)
        # Discovery reads the Secrets on its own schedule: the clusters first.
        wait_until(
            lambda: set(self.names) <= {c["name"] for c in reactor.get("/clusters")},
            30,
            interval=0.1,
            what="the reactor's clusters discovered from the Secrets",
        )
        for app, index in APPS:
            cluster = self.names[index % len(self.names)]
            reactor.post("/apps", {"name": app, "cluster": cluster})
            reactor.post("/deployments", {"app": app, "cluster": cluster})

    def _write_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "control_url": self.urls["control"],
            "reactor_url": self.urls["reactor"],
            "clusters": self.names,
            "children": {name: proc.pid for name, proc in self.procs.items()},
            "folder": str(self.root),
            "detection_seconds": self.threshold * self.interval,
            "management_kubeconfig": str(self.management_kubeconfig),
            "reacts": self.with_prometheus,
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state_file)

    def wait_online(self, timeout: float) -> bool:
        """Until the reactor has seen every cluster ONLINE (the cascade starts from there)."""
        reactor = JsonClient(self.urls["reactor"])

        def online() -> bool:
            statuses = {c["name"]: c["status"] for c in reactor.get("/clusters")}
            return all(statuses.get(n) == "ONLINE" for n in self.names)

        try:
            wait_until(online, timeout, interval=0.2, what="every cluster ONLINE")
        except TimeoutError:
            return False
        return True

    # -- stop -------------------------------------------------------------------------

    def dead_child(self) -> str | None:
        for name, proc in self.procs.items():
            if proc.proc is not None and not proc.alive():
                return f"{name} exited ({proc.proc.returncode}):\n{proc.log_tail(15)}"
        return None

    def stop(self) -> None:
        for name in ("exporter", "prometheus", "alertmanager", "reactor", "management", "standin"):
            proc = self.procs.get(name)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stop(stop_timeout=5)
        with contextlib.suppress(FileNotFoundError):
            state = json.loads(self.state_file.read_text())
            if state.get("pid") == os.getpid():
                self.state_file.unlink()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- what people see ----------------------------------------------------------------

    def banner(self, installed: bool) -> str:
        first = self.names[0]
        cmd = command_name()
        lines = [
            "",
            f"fleetwatch demo is running. Ctrl-C stops everything and removes {self.root}",
            "",
            f"  stand-in clusters  {', '.join(self.names)} (TLS API servers on 127.0.0.1)",
            f"  exporter           {self.urls['exporter']}/metrics",
            f"  reactor            {self.urls['reactor']}/apps  and  /clusters",
            f"  management cluster {self.urls['management']} (the clusters' Cluster API "
            "and Argo CD Secrets, Flux and Argo CD objects):",
            f"    kubectl --kubeconfig {self.management_kubeconfig} get {CD_RESOURCES} -A",
        ]
        if "prometheus" in self.urls:
            lines += [
                f"  prometheus         {self.urls['prometheus']}/alerts",
                f"  alertmanager       {self.urls['alertmanager']}",
            ]
        # A state file other than the default must be named, or `demo down` finds no demo.
        state = (
            ""
            if self.state_file == default_state_file()
            else f" --state.file {shlex.quote(str(self.state_file))}"
        )
        lines += [
            "",
            "In another terminal:",
            f"  {cmd} demo down {first}{state}      # its API server stops answering",
            f"  {cmd} status --reactor {self.urls['reactor']}",
            f"  {cmd} demo up {first}{state}        # it answers again; its apps are restored",
            "",
        ]
        if "prometheus" in self.urls:
            lines.append(
                f"A cluster is OFFLINE after {self.threshold} failed probes, one every "
                f"{self.interval:g} s: expect its apps DEGRADED about "
                f"{self.threshold * self.interval:g}-{self.threshold * self.interval + 3:g} s "
                "after `down`."
            )
        elif installed:
            lines.append(
                "Without Prometheus and Alertmanager (--no-prometheus) nothing turns the "
                "probes into statuses: the reactor will not react."
            )
        else:
            lines.append(
                "prometheus and prometheus-alertmanager are not installed, so nothing turns "
                "the probes into statuses: the reactor will not react. Install them "
                "(apt-get install prometheus prometheus-alertmanager) or run scripts/demo.sh."
            )
        lines.append("")
        return "\n".join(lines)
