"""Who fleetwatch is to a Kubernetes API server: its address, TLS and credentials.

The one place an identity becomes a client's TLS context and ``Authorization`` header:
:func:`client_ssl_context` builds the ``SSLContext`` from a CA, a client certificate and
key (in memory or in files) for the management cluster's client here *and* for the
exporter's network stack (``exporter.net.credentials``), so that both trust, present and
skip verification alike; :func:`credentials` bundles it with a bearer token or basic
auth into :class:`ApiCredentials`, which ``fleetwatch.kube.kubeapi`` sends.

Where the identity comes from is the caller's: ``fleetwatch.discovery.kubecreds`` reads
it from a kubeconfig (discovery's parse, client-go's order), :func:`in_cluster` from a
pod's service account, ``/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}``
(paths injectable, :class:`InClusterPaths`). So this package reads no kubeconfig itself
and imports nothing of discovery.

**Tokens rotate.** A projected service-account token is replaced by the kubelet (about
hourly), so :class:`BearerToken` reads a token file again whenever its ``stat`` changes
(checked before each request: one ``stat`` per list or watch, which come minutes apart)
and after a 401.

Nothing here logs a token or a key, and no ``repr`` or exception text holds one; the
client key reaches ``ssl`` through an in-memory file (``fleetwatch.common.pem``), never
written to disk.

I/O (files, ``ssl``): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import base64
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from fleetwatch.common.files import ReadError, read_file
from fleetwatch.common.pem import load_cert_chain_pem

_SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeAuthError(Exception):
    """The management cluster's credentials cannot be had; the text names files, not values."""


@dataclass(frozen=True)
class InClusterPaths:
    """Where a pod's service account is mounted (tests point these elsewhere)."""

    token: Path = _SA / "token"
    ca: Path = _SA / "ca.crt"


class BearerToken:
    """A bearer token: fixed, or a file read again when it changes (rotation)."""

    __slots__ = ("_path", "_stamp", "_token")

    def __init__(self, token: str | None = None, path: str | Path | None = None) -> None:
        self._token = token
        self._path = None if path is None else Path(path)
        self._stamp: tuple[int, int, int] | None = None

    def __repr__(self) -> str:  # never the token
        return f"BearerToken(file={str(self._path)!r})" if self._path else "BearerToken(fixed)"

    def invalidate(self) -> None:
        """Read the file again before the next request (after a 401)."""
        self._stamp = None

    def value(self) -> str | None:
        """The current token; a file's re-read when its stat changed. Raises KubeAuthError."""
        if self._path is None:
            return self._token
        try:
            st = os.stat(self._path)
        except OSError as exc:
            raise KubeAuthError(f"token file {self._path}: {exc.strerror}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                _, data = read_file(self._path, 1 << 20)
            except ReadError as exc:
                raise KubeAuthError(f"token file {self._path}: {exc.reason}") from None
            # kubectl strips the trailing newline; the Python client would send it
            self._token = data.decode("utf-8", "replace").strip()
            self._stamp = stamp
        return self._token


@dataclass(frozen=True)
class ApiCredentials:
    """The management cluster's API server and how to authenticate to it."""

    server: str  #: ``https://host:port``, no trailing slash
    #: where they came from, for logs: ``in-cluster`` or ``FILE (context NAME)``
    origin: str
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    token: BearerToken | None = field(default=None, repr=False)
    basic: tuple[str, str] | None = field(default=None, repr=False)
    server_hostname: str | None = None

    def authorization(self) -> str | None:
        """The ``Authorization`` header's value (token re-read if its file changed)."""
        if self.token is not None:
            token = self.token.value()
            if token:
                return f"Bearer {token}"
        if self.basic is not None:
            raw = f"{self.basic[0]}:{self.basic[1]}".encode()
            return "Basic " + base64.b64encode(raw).decode("ascii")
        return None

    def unauthorized(self) -> None:
        """A 401: the token file may have rotated under us."""
        if self.token is not None:
            self.token.invalidate()


def in_cluster(host: str, port: str, paths: InClusterPaths = InClusterPaths()) -> ApiCredentials:
    """A pod's service account (``rest.InClusterConfig``)."""
    host = f"[{host}]" if ":" in host else host
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cafile=str(paths.ca))
    except (OSError, ssl.SSLError) as exc:
        raise KubeAuthError(f"service account CA {paths.ca}: {why(exc)}") from None
    token = BearerToken(path=paths.token)
    token.value()  # unreadable: say so now, not at the first request
    return ApiCredentials(f"https://{host}:{port}", "in-cluster", ctx, token)


def client_ssl_context(
    *,
    verify: bool,
    ca_data: bytes | None = None,
    ca_file: str | None = None,
    cert_data: bytes | None = None,
    key_data: bytes | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    label: str = "client",
) -> ssl.SSLContext:
    """A client's TLS context as client-go builds it from a kubeconfig's cluster and user.

    No CA and verification on: the system store. A CA (data, PEM or DER, before a file)
    *replaces* the system store, as in client-go; not loading the system store also makes
    a context cost 0.3 ms instead of 65 ms. ``insecure-skip-tls-verify: true``, and only
    then, verifies nothing. A client certificate counts only with its key: both files are
    loaded by ``ssl`` itself; data (either side) goes through memory, ``label`` naming it
    in errors. Raises ``ssl.SSLError``, ``ValueError`` or ``OSError``; the caller words
    them (:func:`why`), never with PEM content.
    """
    has_ca = bool(ca_file or ca_data)
    if verify and not has_ca:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)  # the system store
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if verify and ca_data:
            ctx.load_verify_locations(cadata=_ca_text(ca_data))
        elif verify and ca_file:
            ctx.load_verify_locations(cafile=ca_file)
        if not verify:  # insecure-skip-tls-verify: true, and only then
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    if (cert_file or cert_data) and (key_file or key_data):
        if cert_data is None and key_data is None:
            assert cert_file is not None and key_file is not None
            ctx.load_cert_chain(cert_file, key_file)
        else:
            cert = cert_data or Path(str(cert_file)).read_bytes()
            key = key_data or Path(str(key_file)).read_bytes()
            load_cert_chain_pem(ctx, cert + b"\n" + key, label)
    return ctx


def _ca_text(data: bytes) -> str | bytes:
    """``cadata`` takes PEM as text, DER as bytes."""
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        return data


def credentials(
    server: str,
    origin: str,
    *,
    verify: bool = True,
    ca: bytes | None = None,
    cert: bytes | None = None,
    key: bytes | None = None,
    token: BearerToken | None = None,
    basic: tuple[str, str] | None = None,
    server_hostname: str | None = None,
) -> ApiCredentials:
    """An API server's :class:`ApiCredentials`: TLS built (https only) by
    :func:`client_ssl_context`, its failure a :class:`KubeAuthError` naming ``origin``."""
    server = server.rstrip("/")
    ctx = None
    if server.startswith("https://"):
        try:
            ctx = client_ssl_context(
                verify=verify, ca_data=ca, cert_data=cert, key_data=key, label="management"
            )
        except (ssl.SSLError, ValueError) as exc:
            raise KubeAuthError(f"{origin}: TLS material: {why(exc)}") from None
    return ApiCredentials(server, origin, ctx, token, basic, server_hostname or None)


def why(exc: Exception) -> str:
    """An exception's kind and library reason, never PEM content."""
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None)
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
