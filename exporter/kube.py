"""The one module that imports the kubernetes client, and the two patches it needs.

The client resolves kubeconfig contexts exactly as kubectl's users expect (CA, client
certificate and key as data or files, ``token``, ``tokenFile``, ``insecure-skip-tls-verify``,
exec plugins), so :func:`load_context` lets it, on the minimal per-context dict that
discovery kept, and hands back plain data (:class:`LoadedContext`). The client is
synchronous and may run a plugin: call :func:`load_context` in a worker thread.

Two things about the client need a patch, installed once at start by
:func:`install_patches` (the CLI and the app factory call it; it is idempotent):

- its temp-file writer registers a ``*-data`` file's name *before* writing it, so a second
  thread resolving the same content at the same time reads an empty file (``no
  certificate or crl found``): the writer is wrapped in a lock;
- it logs exec plugin failures on the root logger (``logging.error(str(e))``), quoting the
  plugin's stderr, which may hold a token: those records are dropped by a root filter.
  The failure still reaches us, as missing credentials.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client import Configuration
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader


class ContextLoadError(Exception):
    """The client could not resolve the context; ``error`` is what it raised.

    Its text may quote a decoded value or a plugin's stderr: never log it as is.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


@dataclass(frozen=True)
class LoadedContext:
    """What the client made of one context: where, and with which TLS files and token."""

    host: str
    token: str | None
    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    verify: bool
    tls_server_name: str | None
    expires_at: float | None
    """Epoch seconds an exec credential expires at (``expirationTimestamp``), if given."""


def load_context(config: Mapping[str, Any], context: str, base_path: str) -> LoadedContext:
    """Resolve ``context`` of the kubeconfig dict ``config`` (blocking: run it in a thread).

    Raises :class:`ContextLoadError` for whatever the client refuses.
    """
    target = Configuration()
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]  # the client is untyped
            config_dict=config,
            active_context=context,
            config_base_path=base_path,
        )
        loader.load_and_set(target)  # type: ignore[no-untyped-call]
    except (ConfigException, KeyError, ValueError, TypeError, OSError) as exc:
        raise ContextLoadError(exc) from None
    token = target.api_key.get("BearerToken") if target.api_key else None
    expiry = getattr(loader, "expiry", None)
    return LoadedContext(
        host=str(target.host),
        token=token or None,
        ca_file=target.ssl_ca_cert or None,
        cert_file=target.cert_file or None,
        key_file=target.key_file or None,
        verify=bool(target.verify_ssl),
        tls_server_name=getattr(target, "tls_server_name", None) or None,
        expires_at=expiry.timestamp() if expiry is not None else None,
    )


class _NoKubeClientRecords(logging.Filter):
    """Drops what the kubernetes client logs on the root logger (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}kubernetes{os.sep}" not in record.pathname


_TEMP_FILE_LOCK = threading.Lock()


def _lock_temp_file_writer() -> None:
    """Serialise the client's temp-file writer: microseconds, and plugins still run in parallel.

    ``test_same_embedded_certs_resolved_by_many_threads_at_once`` shows the race it closes.
    """
    original: Any = kube_config._create_temp_file_with_content
    if getattr(original, "_fleetwatch_locked", False):
        return

    def locked(*args: Any, **kwargs: Any) -> Any:
        with _TEMP_FILE_LOCK:
            return original(*args, **kwargs)

    locked._fleetwatch_locked = True  # type: ignore[attr-defined]
    kube_config._create_temp_file_with_content = locked


def _silence_root_logs() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoKubeClientRecords) for f in root.filters):
        root.addFilter(_NoKubeClientRecords())


def install_patches() -> None:
    """Install both patches on the client and the root logger, once (idempotent)."""
    _lock_temp_file_writer()
    _silence_root_logs()
