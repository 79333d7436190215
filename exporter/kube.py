"""The one module that imports the kubernetes client, and the patches it needs.

The client resolves kubeconfig contexts exactly as kubectl's users expect (CA, client
certificate and key as files, ``token``, ``tokenFile``, ``insecure-skip-tls-verify``,
auth providers), so :func:`load_context` lets it, on the minimal per-context dict that
discovery kept, and hands back plain data (:class:`LoadedContext`). Two things it does not
do the client's way:

- **Embedded credentials stay in memory.** The client writes every ``*-data`` value (a
  client key among them) to a temporary file that outlives a killed process. The
  ``certificate-authority-data``, ``client-certificate-data`` and ``client-key-data``
  values are taken out of the dict before the client sees it and returned as bytes;
  ``exporter.credentials`` loads them into the TLS context without a file on disk.
- **Exec plugins run under our runner** (``exporter.execplugin``): with a deadline, in a
  process group of their own, killed with their children at the deadline and at shutdown.
  The client would wait for a hung plugin for ever.

The client is synchronous (and a plugin may take up to its deadline): call
:func:`load_context` in a credential worker thread, never on the event loop.

What is left of the client's own habits gets a patch, installed once at start by
:func:`install_patches` (the app factory and the tests call it; it is idempotent):

- its temp-file writer (still used by the OIDC auth provider for its CA) is serialised by
  a lock (it registers a file's name before writing it, so a second thread could read an
  empty file) and writes into a private 0700 folder of ours, removed at exit
  (:func:`remove_temp_files`, on shutdown and by ``atexit``);
- it logs auth failures on the root logger (``logging.error(str(e))``), possibly quoting a
  secret: those records are dropped by a root filter.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import Configuration
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader

from exporter.execplugin import ExecPluginError, PluginRunner


class ContextLoadError(Exception):
    """The client could not resolve the context; ``error`` is what it raised.

    Its text may quote a decoded value or a plugin's stderr: never log it as is.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


@dataclass(frozen=True)
class LoadedContext:
    """What one context resolves to: where, and with which TLS material and token.

    TLS material is a file of the user's (``*_file``) or bytes from the kubeconfig or an
    exec plugin (``*_data``), never a temporary file.
    """

    host: str
    token: str | None = field(repr=False)
    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    verify: bool
    tls_server_name: str | None
    expires_at: float | None
    """Epoch seconds an exec credential expires at (``expirationTimestamp``), if given."""
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = field(default=None, repr=False)
    from_exec: bool = False
    """True when an exec plugin gave the token or the client certificate."""


#: The ``*-data`` keys kept from the client: (entry, file key, data key).
_DATA_KEYS = (
    ("cluster", "certificate-authority", "certificate-authority-data"),
    ("user", "client-certificate", "client-certificate-data"),
    ("user", "client-key", "client-key-data"),
)


def load_context(
    config: Mapping[str, Any],
    context: str,
    base_path: str,
    plugins: PluginRunner | None = None,
) -> LoadedContext:
    """Resolve ``context`` of the kubeconfig dict ``config`` (blocking: run it in a thread).

    ``plugins`` runs the user's exec plugin, if any (without one, an exec user is an
    error). Raises :class:`ContextLoadError` for whatever cannot be resolved.
    """
    cluster, user = _entry(config, "clusters", "cluster"), _entry(config, "users", "user")
    data: dict[str, bytes | None] = {}
    entries = {"cluster": dict(cluster), "user": dict(user)}  # copies: never touch the cache
    for entry, file_key, data_key in _DATA_KEYS:
        held = entries[entry]
        if data_key in held:  # the data wins over the file, present even when empty
            held.pop(file_key, None)
            data[data_key] = _decode(held.pop(data_key), data_key)
    exec_ = entries["user"].pop("exec", None)
    stripped = _with_entries(config, entries["cluster"], entries["user"])
    target = Configuration()
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]  # the client is untyped
            config_dict=stripped,
            active_context=context,
            config_base_path=base_path,
        )
        loader.load_and_set(target)  # type: ignore[no-untyped-call]
    except (ConfigException, KeyError, ValueError, TypeError, OSError) as exc:
        raise ContextLoadError(exc) from None
    token = target.api_key.get("BearerToken") if target.api_key else None
    cert_data, key_data = data.get("client-certificate-data"), data.get("client-key-data")
    cert_file, key_file = target.cert_file or None, target.key_file or None
    expires_at: float | None = None
    # The client's order: auth provider, token or tokenFile, then the exec plugin.
    from_exec = isinstance(exec_, Mapping) and not (
        {"auth-provider", "token", "tokenFile"} & set(entries["user"])
    )
    if from_exec:
        assert isinstance(exec_, Mapping)
        if plugins is None:
            raise ContextLoadError(ExecPluginError("exec: no plugin runner"))
        try:
            answer = plugins.run(exec_, base_path or None, cluster)
        except ExecPluginError as exc:
            raise ContextLoadError(exc) from None
        expires_at = answer.expires_at
        if answer.token:
            token = f"Bearer {answer.token}"
        else:  # a client certificate: it replaces the user's own, as in kubectl
            cert_data, key_data = answer.client_certificate, answer.client_key
            cert_file = key_file = None
    https = str(target.host).startswith("https")
    return LoadedContext(
        host=str(target.host),
        token=token or None,
        ca_file=target.ssl_ca_cert or None,
        cert_file=cert_file,
        key_file=key_file,
        verify=bool(target.verify_ssl),
        tls_server_name=getattr(target, "tls_server_name", None) or None,
        expires_at=expires_at,
        ca_data=data.get("certificate-authority-data") if https else None,
        cert_data=cert_data if https else None,
        key_data=key_data if https else None,
        from_exec=from_exec,
    )


def _entry(config: Mapping[str, Any], section: str, key: str) -> Mapping[str, Any]:
    """The first (the only, in discovery's minimal dict) entry's body of ``section``."""
    items = config.get(section) or []
    if items and isinstance(items[0], Mapping) and isinstance(items[0].get(key), Mapping):
        body: Mapping[str, Any] = items[0][key]
        return body
    return {}


def _with_entries(
    config: Mapping[str, Any], cluster: dict[str, Any], user: dict[str, Any]
) -> dict[str, Any]:
    """A copy of ``config`` whose first cluster and user entries are the ones given."""
    out = dict(config)
    for section, key, body in (("clusters", "cluster", cluster), ("users", "user", user)):
        items = list(config.get(section) or [])
        if items and isinstance(items[0], Mapping) and isinstance(items[0].get(key), Mapping):
            items[0] = {**items[0], key: body}
            out[section] = items
    return out


def _decode(value: object, key: str) -> bytes | None:
    """A ``*-data`` value (base64) -> bytes; None when empty (the client's reading)."""
    if not value:
        return None
    try:
        return base64.b64decode(str(value))
    except (binascii.Error, ValueError):
        raise ContextLoadError(ValueError(f"Invalid {key}: not base64")) from None


class _NoKubeClientRecords(logging.Filter):
    """Drops what the kubernetes client logs on the root logger (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}kubernetes{os.sep}" not in record.pathname


_TEMP_FILE_LOCK = threading.Lock()
#: The private folder, once made. Process-wide, as the client's own temp-file table is.
_TEMP_DIR: list[str] = []


def _private_temp_dir() -> str:
    """A 0700 folder of ours under ``$TMPDIR``, made on first use (call under the lock)."""
    if not _TEMP_DIR:
        _TEMP_DIR.append(tempfile.mkdtemp(prefix=f"fleetwatch-exporter-{os.getpid()}-"))
        atexit.unregister(remove_temp_files)  # once, however many times the folder is made
        atexit.register(remove_temp_files)
    return _TEMP_DIR[0]


def remove_temp_files() -> None:
    """Remove the client's temporary files (our private folder): at shutdown and exit."""
    with _TEMP_FILE_LOCK:
        if _TEMP_DIR:
            shutil.rmtree(_TEMP_DIR.pop(), ignore_errors=True)
            kube_config._temp_files.clear()  # the names it remembers are gone


def _lock_temp_file_writer() -> None:
    """Serialise the client's temp-file writer and send its files to our private folder.

    ``test_same_embedded_certs_resolved_by_many_threads_at_once`` shows the race the lock
    closes.
    """
    original: Any = kube_config._create_temp_file_with_content
    if getattr(original, "_fleetwatch_locked", False):
        return

    def locked(content: Any, temp_file_path: str | None = None, **kwargs: Any) -> Any:
        with _TEMP_FILE_LOCK:
            return original(content, temp_file_path or _private_temp_dir(), **kwargs)

    locked._fleetwatch_locked = True  # type: ignore[attr-defined]
    kube_config._create_temp_file_with_content = locked  # type: ignore[assignment]


def _silence_root_logs() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoKubeClientRecords) for f in root.filters):
        root.addFilter(_NoKubeClientRecords())


def install_patches() -> None:
    """Install the patches on the client and the root logger, once (idempotent)."""
    _lock_temp_file_writer()
    _silence_root_logs()
