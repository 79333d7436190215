"""A kubeconfig context -> the TLS material and token it resolves to, as the client resolves it.

:func:`load_context` resolves what discovery kept of a context
(:class:`~fleetwatch.discovery.contextauth.ContextAuth`) and hands back plain data
(:class:`LoadedContext`), following the kubernetes client's ``KubeConfigLoader`` step by
step: ``token`` (or else ``tokenFile``, read now) or else ``username`` and ``password``,
then the CA, client certificate and key (``*-data`` decoded at discovery, files checked
now), ``insecure-skip-tls-verify`` and ``tls-server-name``, then the exec plugin; the
same values win and the same inputs fail, in the same order, with the same reasons
(``tests/exporter/test_exporter_kubeauth.py`` holds the client to it, kubeconfig shape by
shape). It differs from the client on purpose in two ways:

- **Embedded credentials stay in memory.** The client writes every ``*-data`` value (a
  client key among them) to a temporary file that outlives a killed process; here they
  are bytes, which ``exporter.net.credentials`` loads into the TLS context without a file.
- **Exec plugins run under our runner** (``exporter.net.execplugin``): with a deadline, in a
  process group of their own, killed with their children at the deadline and at shutdown.
  The client would wait for a hung plugin for ever.

**The kubernetes client itself** is imported here, and only here, and only for a context
whose user has an ``auth-provider`` (gcp, oidc: they call out to the network from inside
the client, which alone speaks them): importing it costs 36 MiB of memory and 0.25 s,
and loads pydantic and every API model, which an exporter without such a context never
needs. What is left of the client's habits gets a patch, installed when the client is
imported (:func:`install_patches` asks for it at start and installs what needs no client):

- its temp-file writer (still used by the OIDC auth provider for its CA) is serialised by
  a lock (it registers a file's name before writing it, so a second thread could read an
  empty file) and writes into a private 0700 folder of ours, removed at exit
  (:func:`remove_temp_files`, on shutdown and by ``atexit``);
- it logs auth failures on the root logger (``logging.error(str(e))``), possibly quoting a
  secret: those records are dropped by a root filter.

Resolving is synchronous (it reads files, and a plugin may take up to its deadline): call
:func:`load_context` in a credential worker thread, never on the event loop.
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

from exporter.net.execplugin import ExecPluginError, PluginRunner
from fleetwatch.discovery.contextauth import ContextAuth, Fault, KubeconfigError


class ContextLoadError(Exception):
    """The context could not be resolved; ``error`` is what was raised.

    Its text may quote a decoded value or a plugin's stderr: never log it as is.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


@dataclass(frozen=True)
class LoadedContext:
    """What one context resolves to: with which TLS material and token.

    TLS material is a file of the user's (``*_file``) or bytes from the kubeconfig or an
    exec plugin (``*_data``), never a temporary file.
    """

    https: bool
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


def load_context(auth: ContextAuth, plugins: PluginRunner | None = None) -> LoadedContext:
    """Resolve a context (blocking: run it in a thread).

    ``plugins`` runs the user's exec plugin, if any (without one, an exec user is an
    error). Raises :class:`ContextLoadError` for whatever cannot be resolved.
    """
    try:
        if auth.client is not None:
            return _load_with_client(auth)
        return _load(auth, plugins)
    except (KubeconfigError, KeyError, ValueError, TypeError, OSError, ExecPluginError) as exc:
        raise ContextLoadError(exc) from None


def _load(auth: ContextAuth, plugins: PluginRunner | None) -> LoadedContext:
    """The client's ``load_and_set``, on what discovery kept (see the module docstring)."""
    if auth.first is not None:
        raise auth.first.error()
    token = _user_token(auth)
    data: list[bytes | None] = [None, None, None]
    files: list[str | None] = [None, None, None]
    for i, material in enumerate((auth.ca, auth.cert, auth.key)):  # https only (discovery)
        if isinstance(material, bytes):
            data[i] = material
        else:
            files[i] = _existing(material)
    if auth.late is not None:
        raise auth.late.error()
    expires_at: float | None = None
    if auth.exec is not None:
        if plugins is None:
            raise ExecPluginError("exec: no plugin runner")
        answer = plugins.run(auth.exec, auth.exec_cwd or None, auth.exec_cluster)
        expires_at = answer.expires_at
        if answer.token:
            token = f"Bearer {answer.token}"
        else:  # a client certificate: it replaces the user's own, as in kubectl
            data[1], data[2] = answer.client_certificate, answer.client_key
            files[1] = files[2] = None
    tls_server_name: Any = auth.tls_server_name
    return LoadedContext(
        https=auth.https,
        token=token,
        ca_file=files[0],
        cert_file=files[1],
        key_file=files[2],
        verify=auth.verify,
        tls_server_name=tls_server_name,
        expires_at=expires_at,
        ca_data=data[0] if auth.https else None,
        cert_data=data[1] if auth.https else None,
        key_data=data[2] if auth.https else None,
        from_exec=auth.exec is not None,
    )


def _user_token(auth: ContextAuth) -> str | None:
    """``token``, else ``tokenFile``'s content, else ``username:password``: the client's order.

    The token is as the client has it (a ``tokenFile``'s newline included):
    ``exporter.net.credentials`` strips it, as kubectl does.
    """
    token: object = auth.token
    if isinstance(token, Fault):
        raise token.error()
    if not token and auth.token_file is not None:
        if isinstance(auth.token_file, Fault):
            raise auth.token_file.error()
        with open(auth.token_file) as f:  # text, as the client reads it
            token = f.read()
    if token:
        return f"Bearer {token!s}"  # the client's "Bearer %s", whatever the value's type
    basic = auth.basic
    if isinstance(basic, Fault):
        raise basic.error()
    if isinstance(basic, tuple):
        username, password = basic
        pair = username + ":" + password  # what the client adds (a TypeError if not text)
        return f"Basic {base64.b64encode(pair.encode('latin-1')).decode()}"
    return None


def _existing(material: str | Fault | None) -> str | None:
    """A TLS file as the client checks it: it must exist when it is named."""
    if isinstance(material, Fault):
        raise material.error()
    if material is not None and not os.path.isfile(material):
        raise KubeconfigError(f"File does not exist: {material}")
    return material


def _load_with_client(auth: ContextAuth) -> LoadedContext:
    """An auth provider's context, resolved by the kubernetes client (imported here only).

    Its ``*-data`` were decoded at discovery and are not in the minimal kubeconfig the
    client sees (it would write them to temporary files); its exec plugin is not given to
    the client, whose order puts the auth provider first anyway.
    """
    if auth.first is not None:
        raise auth.first.error()
    assert auth.client is not None
    client = _client()
    target = client.Configuration()
    config = auth.client.load()
    try:
        loader = client.KubeConfigLoader(
            config_dict=config,
            active_context=config["current-context"],
            config_base_path=auth.client_base,
        )
        loader.load_and_set(target)
    except client.ConfigException as exc:
        raise ContextLoadError(exc) from None
    token = target.api_key.get("BearerToken") if target.api_key else None
    https = auth.https
    return LoadedContext(
        https=https,
        token=token or None,
        ca_file=target.ssl_ca_cert or None,
        cert_file=target.cert_file or None,
        key_file=target.key_file or None,
        verify=bool(target.verify_ssl),
        tls_server_name=getattr(target, "tls_server_name", None) or None,
        expires_at=None,
        ca_data=auth.ca if https and isinstance(auth.ca, bytes) else None,
        cert_data=auth.cert if https and isinstance(auth.cert, bytes) else None,
        key_data=auth.key if https and isinstance(auth.key, bytes) else None,
    )


class _Client:
    """The parts of the kubernetes client used here, imported on first need."""

    def __init__(self) -> None:
        from kubernetes.client import Configuration
        from kubernetes.config import kube_config
        from kubernetes.config.config_exception import ConfigException

        self.Configuration: Any = Configuration
        self.KubeConfigLoader: Any = kube_config.KubeConfigLoader
        self.ConfigException: type[Exception] = ConfigException
        self.kube_config: Any = kube_config


_CLIENT_LOCK = threading.Lock()
#: The client, once imported (process-wide, as the client's own module state is).
_CLIENT: list[_Client] = []


def _client() -> _Client:
    """The kubernetes client, imported and patched on the first call (thread-safe)."""
    with _CLIENT_LOCK:
        if not _CLIENT:
            loaded = _Client()
            _lock_temp_file_writer(loaded.kube_config)
            _CLIENT.append(loaded)
        return _CLIENT[0]


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
            if _CLIENT:
                _CLIENT[0].kube_config._temp_files.clear()  # the names it remembers are gone


def _lock_temp_file_writer(kube_config: Any) -> None:
    """Serialise the client's temp-file writer and send its files to our private folder.

    ``test_client_temp_files_written_by_many_threads_at_once`` shows the race the lock
    closes.
    """
    original: Any = kube_config._create_temp_file_with_content
    if getattr(original, "_fleetwatch_locked", False):
        return

    def locked(content: Any, temp_file_path: str | None = None, **kwargs: Any) -> Any:
        with _TEMP_FILE_LOCK:
            return original(content, temp_file_path or _private_temp_dir(), **kwargs)

    locked._fleetwatch_locked = True  # type: ignore[attr-defined]
    kube_config._create_temp_file_with_content = locked


def _silence_root_logs() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoKubeClientRecords) for f in root.filters):
        root.addFilter(_NoKubeClientRecords())


def install_patches() -> None:
    """Install what must be in place before any credential is built, once (idempotent).

    The root-logger filter now; the client's own patch when the client is first imported
    (:func:`_client`), which never happens in an exporter without an auth provider.
    """
    _silence_root_logs()
