"""``fleetwatch exporter`` and ``fleetwatch discover``: flags, environment, logging, start-up
(``discover``'s run and output: ``exporter.discover``).

Over 300 lines because most of it is the two subcommands' flag definitions and help texts,
which read best as one list in the order ``--help`` prints them.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from exporter import mallocpolicy
from exporter.checks import ClusterCheck
from exporter.configfile import load_config
from exporter.controlplane.check import build_checks, reads_every
from exporter.discover import run_discover
from exporter.server import create_app
from exporter.settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LISTEN,
    ExporterSettings,
    SettingsError,
    resolve,
)
from fleetwatch.common.flags import add_old_spelling
from fleetwatch.common.gcpolicy import CollectorPolicy
from fleetwatch.common.logs import add_log_flags, setup_logging
from fleetwatch.common.metricnames import CLUSTER_LABELS
from fleetwatch.common.web import bind_sockets, display_address
from fleetwatch.common.webconfig import (
    WEB_CONFIG_HELP,
    WebConfig,
    WebConfigError,
    load_web_config,
    server_tls,
)
from fleetwatch.discovery.apisource import add_flags as add_kubernetes_flags
from fleetwatch.discovery.apisource import from_args as kubernetes_from_args
from fleetwatch.kube.kubeauth import KubeAuthError

log = logging.getLogger("exporter")

ENVIRONMENT = """\
environment (flags win over it):
  KUBECONFIG_PATH          main kubeconfig (must exist)
  KUBECONFIG               when KUBECONFIG_PATH is unset: kubectl's list of kubeconfigs,
                           colon-separated, merged as kubectl does (default: ~/.kube/config,
                           skipped when missing; empty: no main kubeconfig)
  KUBECONFIG_DIR           folder of extra kubeconfigs: every visible file, sub-folders
                           included (a volume of mounted Secrets), read in name order
  CLUSTER_HEALTH_INTERVAL  seconds between two probe cycles (default: 300)
"""

EXPORTER_DESCRIPTION = """\
Probe the API server of every cluster named in your kubeconfigs (GET /readyz?verbose with
each context's own credentials) every interval, and publish the results on /metrics for
Prometheus. Kubeconfigs are re-scanned each cycle: a file dropped into the folder is probed
on the next cycle, a removed one stops being published. Endpoints: /metrics, /healthz,
/-/healthy, /-/ready (503 before the first cycle), /sd/control-plane (Prometheus HTTP
service discovery of control-plane targets)."""

DISCOVER_DESCRIPTION = """\
List the clusters the exporter would probe (each context of the kubeconfigs once, and with
--discovery.kubernetes each cluster of the management cluster's Secrets after one complete
list: name, API endpoint, source, probeable and why not) and every problem found on the way
(a missing or invalid file, a context whose cluster or user is missing, a duplicate name, a
Secret that cannot be read, the management cluster's API failing). Exits 0 even when some
files are broken; the problems are part of the answer."""


def add_parsers(subparsers: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    exp: argparse.ArgumentParser = subparsers.add_parser(
        "exporter",
        help="probe every cluster's API server and serve the results on /metrics",
        description=EXPORTER_DESCRIPTION,
        epilog=ENVIRONMENT,
        formatter_class=fmt,
    )
    exp.add_argument(
        "--web.listen-address",
        dest="listen_address",
        metavar="HOST:PORT",
        action="append",
        default=None,
        help=f"address of /metrics, repeatable: one server on each (default: {DEFAULT_LISTEN})",
    )
    exp.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        type=Path,
        default=None,
        help=WEB_CONFIG_HELP,
    )
    exp.add_argument(
        "--probe.interval",
        dest="interval",
        metavar="SECONDS",
        default=None,
        help="seconds between two probe cycles (default: $CLUSTER_HEALTH_INTERVAL or 300)",
    )
    exp.add_argument(
        "--probe.timeout",
        dest="timeout",
        metavar="SECONDS",
        default=None,
        help="seconds one cluster may take, credentials included; at most the interval "
        "(default: 10, or the interval if shorter)",
    )
    exp.add_argument(
        "--probe.concurrency",
        dest="concurrency",
        metavar="N",
        type=int,
        default=None,
        help="probes connecting or sending at the same time; probes waiting for an answer "
        f"take no slot (default: {DEFAULT_CONCURRENCY})",
    )
    exp.add_argument(
        "--probe.max-idle-connections",
        dest="max_idle_connections",
        metavar="N",
        type=int,
        default=None,
        help="kept-alive connections kept between cycles (default: one per cluster). Each "
        "costs about 26 KiB; past N a probe pays a new TLS handshake (about 1.6 ms of CPU)",
    )
    _add_discovery_flags(exp)
    add_kubernetes_flags(exp)
    exp.add_argument(
        "--config.file",
        dest="config_file",
        metavar="FILE",
        default=None,
        help="optional YAML for the etcd and control-plane checks (e.g. direct etcd endpoints)",
    )
    exp.add_argument(
        "--controlplane.interval",
        dest="controlplane_interval",
        metavar="SECONDS",
        type=float,
        default=0.0,
        help="read each cluster's kube-system (two GETs) at most this often, publishing the "
        "last answer in between; a failed probe or read is read again at once. 0: after "
        "every probe (default: 0)",
    )
    exp.add_argument(
        "--metric-labels-allowlist",
        dest="metric_labels_allowlist",
        metavar="KEYS",
        default="",
        help="cluster labels (of its Secret, or its kubeconfig context's fleetwatch.io/labels "
        f"extension) published on {CLUSTER_LABELS} as label_<key>, as "
        "kube-state-metrics: 'team,env,region', 'example.org/*' or '*' (default: none, "
        "no series)",
    )
    exp.add_argument(
        "--config.check",
        dest="config_check",
        action="store_true",
        help="check --config.file and the other settings, print the result and exit (0: valid)",
    )
    add_log_flags(exp)
    exp.set_defaults(func=run_exporter)

    disc: argparse.ArgumentParser = subparsers.add_parser(
        "discover",
        help="list the clusters found in the kubeconfigs (and Secrets), and the problems",
        description=DISCOVER_DESCRIPTION,
        epilog=ENVIRONMENT.replace(
            "  CLUSTER_HEALTH_INTERVAL  seconds between two probe cycles (default: 300)\n", ""
        ),
        formatter_class=fmt,
    )
    _add_discovery_flags(disc)
    add_kubernetes_flags(disc)
    # Problems are part of the answer, not the log: only errors are logged by default.
    add_log_flags(disc)
    disc.add_argument(
        "--output",
        choices=("table", "json"),
        default="table",
        help="table for people, json for scripts (default: table)",
    )
    disc.set_defaults(func=run_discover)


def _add_discovery_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        default=None,
        help="main kubeconfig; empty: none (default: $KUBECONFIG_PATH, else $KUBECONFIG's "
        "list, else ~/.kube/config when it exists)",
    )
    parser.add_argument(
        "--kubeconfig.dir",
        dest="kubeconfig_dir",
        metavar="DIR",
        default=None,
        help="folder of extra kubeconfigs: every visible file, sub-folders included "
        "(default: $KUBECONFIG_DIR)",
    )
    parser.add_argument(
        "--shard.count",
        dest="shard_count",
        metavar="N",
        type=int,
        default=None,
        help="split the fleet over N exporters by a stable hash of the cluster name",
    )
    parser.add_argument(
        "--shard.index",
        dest="shard_index",
        metavar="I",
        type=int,
        default=None,
        help="this exporter's shard, 0 to N-1: only its clusters are probed and published",
    )
    parser.add_argument(
        "--shard.index-from-hostname",
        dest="shard_index_from_hostname",
        action="store_true",
        help="take --shard.index from the ordinal ending the host name, as a StatefulSet "
        "pod's (fleetwatch-exporter-2 is shard 2; $HOSTNAME, else the system's)",
    )
    add_old_spelling(parser, "--kubeconfig-dir", "--kubeconfig.dir")


def load_checks(config_file: Path | None, every: int = 1) -> Sequence[ClusterCheck]:
    """The per-cluster checks of the etcd/control-plane part, built from ``--config.file``.

    ``every``: kube-system is read on every ``every``-th probe (``--controlplane.interval``).
    Raises ``exporter.configfile.ConfigError`` for a bad file.
    """
    config = load_config(config_file) if config_file is not None else None
    return build_checks(config, every)


def run_exporter(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, args.log_format)
    try:
        settings = resolve(
            listen_address=args.listen_address,
            kubeconfig=args.kubeconfig,
            kubeconfig_dir=args.kubeconfig_dir,
            interval=args.interval,
            timeout=args.timeout,
            concurrency=args.concurrency,
            max_idle_connections=args.max_idle_connections,
            config_file=args.config_file,
            log_level=args.log_level,
            log_format=args.log_format,
            shard_count=args.shard_count,
            shard_index=args.shard_index,
            shard_index_from_hostname=args.shard_index_from_hostname,
            kubernetes=kubernetes_from_args(args),
            metric_labels_allowlist=args.metric_labels_allowlist,
        )
    except (SettingsError, ValueError) as exc:
        print(f"fleetwatch exporter: {exc}", file=sys.stderr)
        return 2
    try:
        every = reads_every(args.controlplane_interval, settings.interval)
    except ValueError as exc:
        print(f"fleetwatch exporter: --controlplane.interval: {exc}", file=sys.stderr)
        return 2
    try:
        checks = load_checks(settings.config_file, every)
    except Exception as exc:  # the config module's own errors carry the precise message
        print(f"fleetwatch exporter: --config.file: {exc}", file=sys.stderr)
        return 1
    try:
        web_config = load_web_config(args.web_config_file) if args.web_config_file else None
    except WebConfigError as exc:
        print(f"fleetwatch exporter: --web.config.file {exc}", file=sys.stderr)
        return 2
    if args.config_check:
        what = f"{settings.config_file}" if settings.config_file else "settings (no --config.file)"
        print(f"{what}: OK")
        return 0
    return serve(settings, checks, web_config)


def serve(
    settings: ExporterSettings, checks: Sequence[ClusterCheck], web_config: WebConfig | None = None
) -> int:
    tls = web_config.tls if web_config is not None else None
    ssl_context = server_tls(tls) if tls is not None else None
    # Bind first, every address: a busy port fails the start before anything runs.
    try:
        socks = bind_sockets(settings.host_ports)
    except OSError as exc:
        log.error("cannot listen on %s", exc.strerror or exc)
        return 1
    where = ", ".join(display_address(host, port) for host, port in settings.host_ports)
    _raise_open_files_limit()
    mallocpolicy.install()  # before the fleet's connections: they are what it is for
    collector = CollectorPolicy()
    collector.install()
    log.info(
        "fleetwatch exporter on %s://%s/metrics%s: kubeconfig %s, folder %s, %s, "
        "interval %gs, timeout %gs, concurrency %d",
        "https" if ssl_context else "http",
        where,
        " (basic auth)" if web_config is not None and web_config.users else "",
        settings.kubeconfig_path or "(none)",
        settings.kubeconfig_dir or "(none)",
        settings.shard or "unsharded",
        settings.interval,
        settings.timeout,
        settings.concurrency,
    )
    try:
        web.run_app(
            create_app(
                settings,
                checks=checks,
                web_config=web_config,
                after_cycle=collector.cycle_ended,
            ),
            sock=socks,
            ssl_context=ssl_context,
            print=None,
            access_log=None,
            shutdown_timeout=5.0,
        )
    except OSError as exc:
        log.error("cannot listen on %s: %s", where, exc.strerror or exc)
        return 1
    except KubeAuthError as exc:
        log.error("--discovery.kubernetes: %s", exc)
        return 2
    log.info("stopped")
    return 0


def _raise_open_files_limit() -> None:
    """One kept-alive connection per cluster: lift the soft open-files limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            log.warning("open-files limit stays %d; big fleets need one per cluster", soft)
