"""The optional exporter config file (``--config.file``): strict YAML, checked once at start.

Everything the kubeconfigs cannot say lives here; today that is how to reach each cluster's
etcd directly (client URLs, CA, client certificate and key). The file is strict, like
blackbox_exporter's: an unknown or misspelt key is an error naming the key and where it sits,
because a silently ignored ``endpoint:`` (for ``endpoints:``) would look like a working
setup that never asks etcd anything. ``--config.check`` runs :func:`load_config` and exits.

Example::

    clusters:
      prod-eu-1:                      # a kubeconfig context name
        etcd:
          endpoints:
            - https://127.0.0.11:2379
            - https://127.0.0.12:2379
            - https://127.0.0.13:2379
          ca_file: /etc/fleetwatch/etcd/ca.crt           # relative paths: to this file
          cert_file: /etc/fleetwatch/etcd/client.crt
          key_file: /etc/fleetwatch/etcd/client.key
          timeout_seconds: 5
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

#: etcd's ``/health`` blocks about 1 s before answering 503 when the member cannot commit,
#: and ``/v3/maintenance/status`` takes 1.4-2 s to say "no leader": a shorter budget would
#: turn "no quorum" into "unreachable". The default also leaves room to wait out a leader
#: election (~1.3 s) and stays well inside the default ``--probe.timeout`` of 10 s.
MIN_ETCD_TIMEOUT_SECONDS = 1.5
DEFAULT_ETCD_TIMEOUT_SECONDS = 5.0
MAX_ETCD_TIMEOUT_SECONDS = 60.0


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file, the place and the fault."""


@dataclass(frozen=True)
class EtcdConfig:
    """How to reach one cluster's etcd members directly."""

    endpoints: tuple[str, ...]
    """Client URLs (``http(s)://host:port``); members missing here are found via member list."""
    ca_file: Path | None = None
    """CA bundle that signed the etcd server certificates (https only)."""
    cert_file: Path | None = None
    """Client certificate etcd accepts (kubeadm: ``pki/etcd/healthcheck-client.crt``)."""
    key_file: Path | None = None
    """Key of ``cert_file``; never logged, never in a metric."""
    timeout_seconds: float = DEFAULT_ETCD_TIMEOUT_SECONDS
    """Budget to judge this etcd, election included; at least 1.5 s (health blocks ~1 s).

    Keep it below ``--probe.timeout``, which bounds the whole per-cluster check."""


@dataclass(frozen=True)
class ClusterConfig:
    """Per-cluster settings, keyed by kubeconfig context name."""

    etcd: EtcdConfig | None = None


@dataclass(frozen=True)
class ExporterConfig:
    """The whole config file; the empty config is what runs without ``--config.file``."""

    clusters: Mapping[str, ClusterConfig] = field(default_factory=dict)

    def etcd_for(self, cluster: str) -> EtcdConfig | None:
        entry = self.clusters.get(cluster)
        return entry.etcd if entry is not None else None


_TOP_KEYS = ("clusters",)
_CLUSTER_KEYS = ("etcd",)
_ETCD_KEYS = ("endpoints", "ca_file", "cert_file", "key_file", "timeout_seconds")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently)."""


def _mapping_no_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            line = key_node.start_mark.line + 1
            raise ConfigError(f"duplicate key {key!r} (line {line})")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping_no_duplicates,
)


def load_config(path: Path | str) -> ExporterConfig:
    """Read and validate ``path``; raise :class:`ConfigError` with one precise message."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read: {reason}") from None
    try:
        return parse_config(text, base_dir=path.parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_config(text: str, base_dir: Path) -> ExporterConfig:
    """Validate the YAML ``text``; relative file paths are resolved against ``base_dir``."""
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"not valid YAML{where}: {problem}") from None
    if raw is None:
        return ExporterConfig()
    top = _mapping(raw, "top level")
    _only_keys(top, _TOP_KEYS, "top level")
    clusters_raw = top.get("clusters")
    if clusters_raw is None:
        return ExporterConfig()
    clusters_map = _mapping(clusters_raw, "clusters")
    clusters: dict[str, ClusterConfig] = {}
    for name, entry in clusters_map.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"clusters: cluster names must be non-empty strings, got {name!r}")
        where = f"clusters.{name}"
        entry_map = _mapping(entry, where) if entry is not None else {}
        _only_keys(entry_map, _CLUSTER_KEYS, where)
        # A present but empty ``etcd:`` is a mistake (often an indentation slip), not "none".
        etcd = _etcd(entry_map["etcd"], f"{where}.etcd", base_dir) if "etcd" in entry_map else None
        clusters[name] = ClusterConfig(etcd=etcd)
    return ExporterConfig(clusters=clusters)


def _etcd(raw: object, where: str, base_dir: Path) -> EtcdConfig:
    etcd_map = _mapping(raw, where)
    _only_keys(etcd_map, _ETCD_KEYS, where)
    endpoints_raw = etcd_map.get("endpoints")
    if endpoints_raw is None:
        raise ConfigError(f"{where}: missing key 'endpoints'")
    if not isinstance(endpoints_raw, list) or not endpoints_raw:
        raise ConfigError(f"{where}.endpoints: must be a non-empty list of URLs")
    endpoints: list[str] = []
    for index, url in enumerate(endpoints_raw):
        endpoints.append(_endpoint(url, f"{where}.endpoints[{index}]"))
    if len(set(endpoints)) != len(endpoints):
        raise ConfigError(f"{where}.endpoints: the same URL is listed twice")
    schemes = {urlsplit(url).scheme for url in endpoints}
    if len(schemes) > 1:
        raise ConfigError(f"{where}.endpoints: mixes http and https URLs")

    files = {key: _file(etcd_map.get(key), f"{where}.{key}", base_dir) for key in _ETCD_KEYS[1:4]}
    if schemes == {"http"}:
        given = [key for key, value in files.items() if value is not None]
        if given:
            raise ConfigError(f"{where}.{given[0]}: TLS files need https endpoints")
    if (files["cert_file"] is None) != (files["key_file"] is None):
        missing = "key_file" if files["key_file"] is None else "cert_file"
        raise ConfigError(f"{where}: cert_file and key_file go together; {missing} is missing")

    timeout_raw = etcd_map.get("timeout_seconds", DEFAULT_ETCD_TIMEOUT_SECONDS)
    if isinstance(timeout_raw, bool) or not isinstance(timeout_raw, int | float):
        raise ConfigError(f"{where}.timeout_seconds: must be a number of seconds")
    timeout = float(timeout_raw)
    if not MIN_ETCD_TIMEOUT_SECONDS <= timeout <= MAX_ETCD_TIMEOUT_SECONDS:
        raise ConfigError(
            f"{where}.timeout_seconds: {timeout:g} is outside {MIN_ETCD_TIMEOUT_SECONDS:g}-"
            f"{MAX_ETCD_TIMEOUT_SECONDS:g} (etcd's health check blocks ~1 s without quorum)"
        )
    return EtcdConfig(
        endpoints=tuple(endpoints),
        ca_file=files["ca_file"],
        cert_file=files["cert_file"],
        key_file=files["key_file"],
        timeout_seconds=timeout,
    )


def _endpoint(url: object, where: str) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"{where}: must be a URL string, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{where}: {url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{where}: {url!r} must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        # Said without echoing the URL: it holds a credential.
        raise ConfigError(f"{where}: credentials in the URL are not allowed")
    if not parts.hostname or port is None:
        raise ConfigError(f"{where}: {url!r} needs a host and a port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{where}: {url!r} must not have a path, query or fragment")
    return f"{parts.scheme}://{parts.netloc}"


def _file(raw: object, where: str, base_dir: Path) -> Path | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"{where}: must be a file path")
    path = Path(raw)
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise ConfigError(f"{where}: {path} is not a readable file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{where}: {path} is not readable: {exc.strerror}") from None
    return path


def _mapping(raw: object, where: str) -> dict[Any, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping, got {_kind(raw)}")
    return raw


def _only_keys(raw: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {str(key)!r} (allowed: {', '.join(allowed)})")


def _kind(raw: object) -> str:
    if raw is None:
        return "nothing"
    if isinstance(raw, list):
        return "a list"
    if isinstance(raw, str):
        return "a string"
    return type(raw).__name__
