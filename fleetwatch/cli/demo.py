"""`fleetwatch demo`: the whole loop on this machine, to watch a cluster fail and its apps degrade.

One command starts a stand-in fleet (TLS API servers on 127.0.0.1, kubeconfigs in a
temporary folder), the exporter, the reactor with a few apps deployed and, when
``prometheus`` and ``prometheus-alertmanager`` are installed, both of them wired with the
rules of ``fleetwatch rules`` and the route of ``alerts/alertmanager.yml``
(``fleetwatch.cli.demo_stack``). It prints the URLs, then every status change the reactor
makes and the alerts that explain them (:class:`Watcher`). ``fleetwatch demo down NAME``
and ``fleetwatch demo up NAME`` (another terminal) switch a stand-in cluster through the
fleet's control API. Ctrl-C (or SIGTERM) stops every child by its pid and removes the
folder.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetwatch.cli import demo_cd, wiring
from fleetwatch.cli.demo_cd import ObjectReader, ObjectState
from fleetwatch.cli.demo_stack import Demo, default_state_file
from fleetwatch.cli.wiring import HttpStatusError, JsonClient
from fleetwatch.common.contract import FAILURE_THRESHOLD, PROBE_FAILING_ALERT, STORM_ALERT
from fleetwatch.common.flags import add_old_spelling
from fleetwatch.common.logs import add_log_flags, setup_logging
from fleetwatch.procs import NotReadyError

FAILURE_MODES = (
    "down",
    "hang",
    "frozen",
    "error",
    "not_ready",
    "unauthorized",
    "forbidden",
    "wrong_ca",
)


class Watcher:
    """Prints what changes, as it happens: statuses and apps (reactor), and the alerts that
    explain them (Prometheus: the grace-period warning, the storm guard)."""

    #: Alerts worth a line: they say why a failing cluster is not (yet) OFFLINE.
    EXPLAINING = f"{PROBE_FAILING_ALERT}|{STORM_ALERT}"

    def __init__(
        self, reactor_url: str, prometheus_url: str | None, objects: ObjectReader | None = None
    ) -> None:
        self.client = JsonClient(reactor_url, timeout=2.0)
        self.prometheus_url = prometheus_url
        self.objects = objects
        self.seen: dict[str, str] = {}

    def _alerts(self) -> dict[str, str]:
        if self.prometheus_url is None:
            return {}
        expr = f'ALERTS{{alertstate="firing", alertname=~"{self.EXPLAINING}"}}'
        found = wiring.prometheus_query(self.prometheus_url, expr, timeout=2.0)
        return {
            " ".join(["alert", s["metric"]["alertname"], s["metric"].get("cluster", "")]).strip(): (
                "firing"
            )
            for s in found
        }

    def poll(self) -> list[str]:
        try:
            clusters = self.client.get("/clusters")
            apps = self.client.get("/apps")
            alerts = self._alerts()
            objects = self.objects.objects() if self.objects is not None else []
        except (HttpStatusError, OSError, ValueError, KeyError):
            return []
        now: dict[str, str] = {}
        for c in clusters:
            now[f"cluster {c['name']}"] = c["status"]
        for a in apps:
            if a.get("source", "api") != "api":
                continue  # a Flux or Argo CD object: its own line says more
            reason = f" ({a['reason']})" if a.get("reason") else ""
            now[f"app {a['name']} on {a['cluster']}"] = a["status"] + reason
        for o in objects:
            now[o.label] = demo_cd.brief(o)
        now.update(alerts)
        lines = [f"{key:32} {value}" for key, value in now.items() if self.seen.get(key) != value]
        lines += [f"{key:32} resolved" for key in self.seen if key not in now]
        self.seen = now
        return lines


def run_demo(args: argparse.Namespace) -> int:
    # The demo talks to people by print(); logging is for what goes wrong underneath.
    setup_logging(args.log_level, args.log_format)
    installed = wiring.have_prometheus()
    with_prometheus = installed and args.prometheus
    demo = Demo(
        clusters=args.clusters,
        interval=args.interval,
        threshold=args.failure_threshold,
        free_ports=args.free_ports,
        state_file=Path(args.state_file),
        with_prometheus=with_prometheus,
    )
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        print(f"starting the fleetwatch demo in {demo.root} ...", flush=True)
        try:
            demo.start()
        except (NotReadyError, HttpStatusError, OSError, TimeoutError) as exc:
            print(f"fleetwatch demo: could not start: {exc}", file=sys.stderr)
            return 1
        if with_prometheus and not demo.wait_online(timeout=30):
            print("warning: not every cluster is ONLINE yet", file=sys.stderr)
        print(demo.banner(installed), flush=True)
        print("ready", flush=True)
        objects = ObjectReader(demo.management_kubeconfig) if demo.management_kubeconfig else None
        watcher = Watcher(demo.urls["reactor"], demo.urls.get("prometheus"), objects)
        while not stop.wait(0.5):
            for line in watcher.poll():
                print(f"{datetime.now():%H:%M:%S}  {line}", flush=True)
            problem = demo.dead_child()
            if problem is not None:
                print(f"fleetwatch demo: {problem}", file=sys.stderr)
                return 1
        print("stopping the demo ...", flush=True)
        return 0
    finally:
        demo.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_switch(args: argparse.Namespace) -> int:
    """``demo down NAME`` / ``demo up NAME``: switch a cluster of the running demo."""
    path = Path(args.state_file)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        print(
            "fleetwatch demo: no demo is running (start one with `fleetwatch demo`)",
            file=sys.stderr,
        )
        return 1
    mode = "ok" if args.action == "up" else args.how
    reader, before = _objects_before(state, args.name)
    status_before = _reactor_status(state, args.name)
    try:
        JsonClient(state["control_url"]).put(f"/clusters/{args.name}/mode", {"mode": mode})
    except HttpStatusError as exc:
        message = exc.body.get("error") if isinstance(exc.body, dict) else exc.body
        known = ", ".join(state.get("clusters", []))
        print(f"fleetwatch demo: {message} (clusters: {known})", file=sys.stderr)
        return 1
    except OSError:
        print(
            f"fleetwatch demo: the demo (pid {state.get('pid')}) does not answer; is it still "
            "running?",
            file=sys.stderr,
        )
        return 1
    if args.action == "down":
        print(
            f"{args.name} {FAILURE_WORDS.get(mode, f'fails ({mode})')}: it fails its probes "
            f"now; its apps turn DEGRADED after about {state.get('detection_seconds', 0):g} s. "
            f"Watch: fleetwatch status --reactor {state['reactor_url']}"
        )
    elif status_before == "OFFLINE":
        print(f"{args.name} answers again: the apps its outage degraded are restored shortly.")
    else:
        print(
            f"{args.name} answers again. It was not OFFLINE ({status_before or 'status unknown'}),"
            " so no outage closes and nothing is restored."
        )
    if reader is not None and before:
        _show_objects(reader, args.name, args.action, before, state)
    return 0


#: ``demo down --how MODE`` in words, for the line that says what was done.
FAILURE_WORDS: dict[str, str] = {
    "down": "refuses connections",
    "hang": "hangs (accepts, never answers)",
    "frozen": "is frozen (TLS handshake never answered)",
    "error": "answers 500",
    "not_ready": "answers /readyz not ready",
    "unauthorized": "refuses our credentials (401)",
    "forbidden": "lets our credentials in, RBAC refuses them (403)",
    "wrong_ca": "presents a certificate from another CA",
}


def _reactor_status(state: dict[str, Any], name: str) -> str | None:
    """The cluster's status in the reactor before the switch; None when it cannot be asked."""
    try:
        answer = JsonClient(state["reactor_url"], timeout=2.0).get(f"/clusters/{name}")
    except (HttpStatusError, OSError, KeyError):
        return None
    status = answer.get("status") if isinstance(answer, dict) else None
    return status if isinstance(status, str) else None


def _objects_before(
    state: dict[str, Any], cluster: str
) -> tuple[ObjectReader | None, list[ObjectState]]:
    """The cluster's Flux and Argo CD objects before the switch (none if unreadable)."""
    path = state.get("management_kubeconfig")
    if not path:
        return None, []
    try:
        reader = ObjectReader(Path(path))
        return reader, reader.of(cluster)
    except (OSError, ValueError, KeyError):
        return None, []


def _show_objects(
    reader: ObjectReader,
    cluster: str,
    action: str,
    before: list[ObjectState],
    state: dict[str, Any],
) -> None:
    """Wait (within a deadline) until the reactor has paused, or resumed, the objects it
    should, then print each as read back from the management cluster."""
    if action == "down":
        wanted = [o.label for o in before if not o.paused]
        done, verb = demo_cd.paused_by_fleetwatch, "paused"
        timeout = float(state.get("detection_seconds", 0)) + 15.0
    else:
        wanted = [o.label for o in before if o.mark is not None]
        done, verb = demo_cd.resumed, "resumed"
        timeout = 15.0
    in_time = True
    try:
        if wanted and state.get("reacts"):
            print(
                f"Waiting for the reactor to get its Flux and Argo CD objects {verb} (Ctrl-C "
                "stops waiting) ...",
                flush=True,
            )
            try:
                found, in_time = reader.wait(cluster, done, wanted, timeout)
            except KeyboardInterrupt:
                found, in_time = reader.of(cluster), False
        else:
            found = reader.of(cluster)
    except (OSError, ValueError, KeyError) as exc:
        print(f"fleetwatch demo: the management cluster does not answer: {exc}")
        return
    print(f"{cluster}'s Flux and Argo CD objects (read from the management cluster):")
    for obj in found:
        print(f"  {obj.label:34} {demo_cd.describe(obj)}")
    if not state.get("reacts"):
        print("Without Prometheus and Alertmanager nothing pauses or resumes them.")
    elif not in_time and action == "down":
        print(
            "Not all paused yet: fleetwatch pauses them when the cluster's outage opens "
            "(OFFLINE).\nIn a probe storm (half the fleet failing at once) the guard holds "
            "OFFLINE back: nothing is paused."
        )
    elif not in_time:
        print("Not all resumed yet: the demo's terminal shows the cluster's status.")


def add_parsers(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run a stand-in fleet, the exporter, the reactor and Prometheus + Alertmanager",
        description=(
            "Start a stand-in fleet of TLS clusters, the exporter, the reactor with a few "
            "apps and, when installed, Prometheus and Alertmanager with fleetwatch's rules "
            "and route; print the URLs and every status change. In another terminal, "
            "`fleetwatch demo down NAME` makes a cluster fail and `fleetwatch demo up NAME` "
            "brings it back. Ctrl-C stops everything and removes the temporary folder."
        ),
    )
    p.add_argument("--clusters", type=int, default=4, help="stand-in clusters (default 4)")
    p.add_argument(
        "--probe.interval",
        dest="interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between probes, as the exporter's flag (default 2)",
    )
    p.add_argument(
        "--failure.threshold",
        dest="failure_threshold",
        type=int,
        default=FAILURE_THRESHOLD,
        metavar="N",
        help=f"failed probes before OFFLINE, as `fleetwatch rules` (default {FAILURE_THRESHOLD})",
    )
    p.add_argument(
        "--web.free-ports",
        dest="free_ports",
        action="store_true",
        help="listen on free ports, not the usual 9713/9714/9090/9093",
    )
    p.add_argument(
        "--prometheus",
        dest="prometheus",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start Prometheus and Alertmanager when installed (default: on)",
    )
    add_log_flags(p)
    p.add_argument(
        "--state.file",
        dest="state_file",
        metavar="FILE",
        default=str(default_state_file()),
        help="where the running demo tells `demo down`/`up` how to reach it (default %(default)s)",
    )
    # Spellings of older releases, hidden: scripts that use them keep working.
    add_old_spelling(p, "--interval", "--probe.interval")
    add_old_spelling(p, "--failure-threshold", "--failure.threshold")
    add_old_spelling(p, "--free-ports", "--web.free-ports")
    add_old_spelling(p, "--state-file", "--state.file")
    p.set_defaults(func=_run_checked)
    actions = p.add_subparsers(dest="action", metavar="{down,up}")
    for action, text in (("down", "make a demo cluster fail"), ("up", "bring it back")):
        a: argparse.ArgumentParser = actions.add_parser(action, help=text)
        a.add_argument("name", help="cluster name, e.g. demo-001")
        if action == "down":
            a.add_argument(
                "--how",
                choices=FAILURE_MODES,
                default="down",
                help="how it fails: down (connection refused), hang, error (500), ... "
                "(default down)",
            )
        # SUPPRESS: given before the action (`demo --state.file F down X`) it must not be
        # overwritten by this parser's default.
        a.add_argument(
            "--state.file",
            dest="state_file",
            metavar="FILE",
            default=argparse.SUPPRESS,
            help="as for `demo`",
        )
        add_old_spelling(a, "--state-file", "--state.file")
        a.set_defaults(func=run_switch)


def _run_checked(args: argparse.Namespace) -> int:
    if args.clusters < 1 or args.clusters > 100:
        print("fleetwatch demo: --clusters must be between 1 and 100", file=sys.stderr)
        return 2
    if not args.interval > 0 or args.failure_threshold < 1:
        print(
            "fleetwatch demo: --probe.interval must be > 0 and --failure.threshold >= 1",
            file=sys.stderr,
        )
        return 2
    return run_demo(args)
