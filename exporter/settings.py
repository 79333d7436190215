"""The exporter's settings: one dataclass, filled from flags, then the environment.

Flags win over environment variables, as in kubectl and the Prometheus exporters; the
variable names (``KUBECONFIG_PATH``, ``KUBECONFIG_DIR``, ``CLUSTER_HEALTH_INTERVAL``) are
the ones docs/exporter.md lists. Invalid values raise :class:`SettingsError` with a message
naming the setting.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwatch.common.logs import FORMATS, LEVELS
from fleetwatch.common.web import ListenAddressError, parse_listen_addresses
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist, AllowlistError
from fleetwatch.discovery.files import MainKubeconfig, main_kubeconfig
from fleetwatch.discovery.shard import Shard, ShardError, resolve_shard

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9713"
DEFAULT_INTERVAL = 300.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_CONCURRENCY = 64


class SettingsError(ValueError):
    """A setting has a value we refuse; the message says which and why."""


@dataclass(frozen=True)
class ExporterSettings:
    """What ``fleetwatch exporter`` runs with, checked (:func:`resolve` builds it)."""

    #: host:port of /metrics (``:port``: every interface). Loopback by default: the
    #: exporter is scraped locally or through a proxy; exposing it is a decision to make.
    #: More than one (``--web.listen-address`` repeated): the same server on each.
    listen_addresses: tuple[str, ...] = (DEFAULT_LISTEN,)
    #: main kubeconfig: a file named by ``--kubeconfig``/``KUBECONFIG_PATH`` (must exist),
    #: else kubectl's ``KUBECONFIG`` list or ``~/.kube/config`` (skipped when missing,
    #: as kubectl does); None: not read (``KUBECONFIG=""`` or ``--kubeconfig=""``)
    kubeconfig_path: MainKubeconfig = None
    #: folder of extra kubeconfigs (``KUBECONFIG_DIR``); None: none
    kubeconfig_dir: Path | None = None
    #: seconds between the starts of two probe cycles (``CLUSTER_HEALTH_INTERVAL``); 300
    #: as in the guide: outages are minutes long, API servers should not be hammered
    interval: float = DEFAULT_INTERVAL
    #: seconds one cluster may take (credentials + probe), at most ``interval``; 10 s is
    #: far above a healthy API server's answer and well under any useful interval
    timeout: float = DEFAULT_TIMEOUT
    #: probes connecting or sending at the same time (credentials, TCP and TLS set-up,
    #: the request); a probe waiting for its answer gives its slot back, so hung API
    #: servers never queue the others and the worst cycle is about one timeout plus the
    #: CPU work of the cycle. 64 bounds that CPU-heavy part and the credential threads.
    concurrency: int = DEFAULT_CONCURRENCY
    #: kept-alive connections kept between cycles; None: one per cluster (fastest). A kept
    #: TLS connection is about 26 KiB (24 of them OpenSSL's own state), 260 MiB at 10,000
    #: clusters; past the bound a probe pays a TLS handshake (about 1.6 ms of CPU) instead
    #: (bench/connections.py).
    max_idle_connections: int | None = None
    #: optional YAML for the etcd/control-plane checks (``--config.file``)
    config_file: Path | None = None
    log_level: str = "info"
    #: ``logfmt`` or ``json`` (``fleetwatch.common.logs``)
    log_format: str = "logfmt"
    #: this exporter's shard (``--shard.count``/``--shard.index``); None: the whole fleet
    shard: Shard | None = None
    #: ``--discovery.kubernetes`` and its flags (``fleetwatch.discovery.apisource``); None: off
    kubernetes: KubernetesDiscovery | None = None
    #: the cluster labels published on ``fleetwatch_cluster_labels``
    #: (``--metric-labels-allowlist``, ``fleetwatch.discovery.clusterlabels``): none by default, as
    #: kube-state-metrics, since label cardinality is the user's choice
    metric_labels_allowlist: Allowlist = NO_LABELS

    @property
    def listen_address(self) -> str:
        """The first address, which log lines name first."""
        return self.listen_addresses[0]

    @property
    def host_ports(self) -> list[tuple[str | None, int]]:
        """Each ``(host, port)`` to listen on; host None: every interface."""
        return parse_listen_addresses(self.listen_addresses)


def absolute_path(raw: str | Path) -> Path:
    """``~`` expanded, made absolute against the working directory of the moment.

    Discovery's ``source`` becomes the reactor's ``kubeconfig_secret_ref``: a relative
    path would make "probeable" depend on the working directory of whoever reads it.
    """
    return Path(os.path.abspath(Path(raw).expanduser()))


def _positive_float(name: str, raw: str | float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} {raw!r}: expected a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise SettingsError(f"{name} {raw!r}: must be a positive number of seconds")
    return value


def resolve(
    *,
    listen_address: str | Sequence[str] | None = None,
    kubeconfig: str | None = None,
    kubeconfig_dir: str | None = None,
    interval: str | float | None = None,
    timeout: str | float | None = None,
    concurrency: int | None = None,
    max_idle_connections: int | None = None,
    config_file: str | None = None,
    log_level: str = "info",
    log_format: str = "logfmt",
    env: Mapping[str, str] | None = None,
    shard_count: int | None = None,
    shard_index: int | None = None,
    shard_index_from_hostname: bool = False,
    kubernetes: KubernetesDiscovery | None = None,
    metric_labels_allowlist: str | None = None,
) -> ExporterSettings:
    """The settings from flag values (None when not given) and the environment."""
    env = os.environ if env is None else env
    path = main_kubeconfig(kubeconfig, env)
    dir_raw = kubeconfig_dir if kubeconfig_dir is not None else env.get("KUBECONFIG_DIR", "")
    folder = absolute_path(dir_raw) if dir_raw else None
    if interval is not None:
        interval_v = _positive_float("--probe.interval", interval)
    elif env.get("CLUSTER_HEALTH_INTERVAL"):
        interval_v = _positive_float("CLUSTER_HEALTH_INTERVAL", env["CLUSTER_HEALTH_INTERVAL"])
    else:
        interval_v = DEFAULT_INTERVAL
    if timeout is not None:
        timeout_v = _positive_float("--probe.timeout", timeout)
        if timeout_v > interval_v:
            raise SettingsError(
                f"--probe.timeout {timeout_v:g}s is longer than the probe interval "
                f"{interval_v:g}s: a probe must end before the next cycle starts"
            )
    else:
        timeout_v = min(DEFAULT_TIMEOUT, interval_v)
        if timeout_v < DEFAULT_TIMEOUT:
            log.info("probe timeout set to the interval, %gs (default 10s is longer)", timeout_v)
    conc = DEFAULT_CONCURRENCY if concurrency is None else concurrency
    if conc < 1:
        raise SettingsError(f"--probe.concurrency {conc}: must be at least 1")
    if max_idle_connections is not None and max_idle_connections < 0:
        raise SettingsError(
            f"--probe.max-idle-connections {max_idle_connections}: must be 0 or more"
        )
    try:
        shard = resolve_shard(
            shard_count, shard_index, index_from_hostname=shard_index_from_hostname
        )
    except ShardError as exc:
        raise SettingsError(str(exc)) from None
    if not listen_address:
        listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    elif isinstance(listen_address, str):
        listen = (listen_address,)
    else:
        listen = tuple(listen_address)
    try:
        parse_listen_addresses(listen)
    except ListenAddressError as exc:
        raise SettingsError(str(exc)) from None
    if log_level not in LEVELS:
        raise SettingsError(f"--log.level {log_level!r}: expected one of {', '.join(LEVELS)}")
    if log_format not in FORMATS:
        raise SettingsError(f"--log.format {log_format!r}: expected one of {', '.join(FORMATS)}")
    try:
        allowlist = Allowlist.parse(metric_labels_allowlist or "")
    except AllowlistError as exc:
        raise SettingsError(f"--metric-labels-allowlist: {exc}") from None
    return ExporterSettings(
        listen_addresses=listen,
        kubeconfig_path=path,
        kubeconfig_dir=folder,
        interval=interval_v,
        timeout=timeout_v,
        concurrency=conc,
        max_idle_connections=max_idle_connections,
        config_file=Path(config_file) if config_file else None,
        log_level=log_level,
        log_format=log_format,
        shard=shard,
        kubernetes=kubernetes,
        metric_labels_allowlist=allowlist,
    )
