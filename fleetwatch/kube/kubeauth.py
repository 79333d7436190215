"""Who fleetwatch is to the management cluster's API: its server, TLS and bearer token.

The list+watch of Secrets (``fleetwatch.kube.informer`` over ``fleetwatch.kube.kubeapi``) needs one
API server and one identity, found as client-go finds them (:func:`load_credentials`):

1. ``--discovery.kubernetes.kubeconfig`` when given: that file's current context;
2. in a pod (``KUBERNETES_SERVICE_HOST`` and ``_PORT`` set, the token file present): the
   service account, ``/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}``;
3. otherwise ``KUBECONFIG`` (kubectl's list, merged as kubectl merges it) or
   ``~/.kube/config``.

The kubeconfig goes through discovery's own parse (``fleetwatch.discovery.kubeconfig``), so it is
read as the fleet's files are. Supported: ``token``, ``tokenFile``, ``username``/
``password``, the CA, client certificate and key (data or files; the key handed to
``ssl`` through an in-memory file, never written to disk), ``insecure-skip-tls-verify``,
``tls-server-name``. An exec plugin or auth provider is refused with a clear reason: the
exporter's plugin runner lives in ``exporter.net``, which discovery may not import, and a
management cluster is usually reached with a service account.

**Tokens rotate.** A projected service-account token is replaced by the kubelet (about
hourly), so :class:`BearerToken` reads a token file again whenever its ``stat`` changes
(checked before each request: one ``stat`` per list or watch, which come minutes apart)
and after a 401.

Nothing here logs a token or a key, and no ``repr`` or exception text holds one. The
paths of the in-cluster files are injectable (:class:`InClusterPaths`) for tests.

I/O (files, ``ssl``): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleetwatch.common.pem import load_cert_chain_pem
from fleetwatch.discovery.contextauth import ContextAuth, Fault
from fleetwatch.discovery.files import ReadError, absolute, main_kubeconfig, read_file
from fleetwatch.discovery.kubeconfig import Document, parse_document, resolve_contexts

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


def load_credentials(
    kubeconfig: str | None,
    env: Mapping[str, str],
    paths: InClusterPaths = InClusterPaths(),
) -> ApiCredentials:
    """The management cluster's credentials, in client-go's order (module docstring)."""
    if kubeconfig:
        return from_kubeconfig([absolute(kubeconfig)], "--discovery.kubernetes.kubeconfig")
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if host and port and paths.token.exists():
        return in_cluster(host, port, paths)
    main = main_kubeconfig(None, {k: v for k, v in env.items() if k != "KUBECONFIG_PATH"})
    if main is None:
        raise KubeAuthError("no in-cluster service account, and KUBECONFIG is empty")
    files = [main] if isinstance(main, Path) else [f for f in main.files if f.exists()]
    if not files:
        raise KubeAuthError(f"no in-cluster service account, and no kubeconfig in {main}")
    return from_kubeconfig(files, "KUBECONFIG")


def in_cluster(host: str, port: str, paths: InClusterPaths = InClusterPaths()) -> ApiCredentials:
    """A pod's service account (``rest.InClusterConfig``)."""
    host = f"[{host}]" if ":" in host else host
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cafile=str(paths.ca))
    except (OSError, ssl.SSLError) as exc:
        raise KubeAuthError(f"service account CA {paths.ca}: {_why(exc)}") from None
    token = BearerToken(path=paths.token)
    token.value()  # unreadable: say so now, not at the first request
    return ApiCredentials(f"https://{host}:{port}", "in-cluster", ctx, token)


def from_kubeconfig(files: list[Path], origin: str) -> ApiCredentials:
    """The current context of ``files`` (merged as kubectl does)."""
    docs: list[tuple[str, Document]] = []
    for path in files:
        try:
            version, data = read_file(path)
        except ReadError as exc:
            raise KubeAuthError(f"{origin} {path}: {exc.reason}") from None
        doc = parse_document(data, version)
        docs.append((str(path), doc))
    current = next((d.current_context for _, d in docs if d.current_context), None)
    if not isinstance(current, str) or not current:
        raise KubeAuthError(f"{origin} {files[0]}: no current-context")
    resolved, problems = resolve_contexts(docs)
    if current not in resolved:
        why = "; ".join(p.reason for p in problems if p.context == current) or "not found"
        raise KubeAuthError(f"{origin} {files[0]}: context {current!r}: {why}")
    context = resolved[current]
    where = f"{context.config.source} (context {current})"
    auth = context.config.auth
    if auth.exec is not None or auth.client is not None:
        raise KubeAuthError(
            f"{where}: exec plugins and auth providers are not supported for the management "
            "cluster; use a token, a token file or a client certificate"
        )
    for fault in (auth.first, auth.late):
        if fault is not None:
            raise KubeAuthError(f"{where}: {fault.text}")
    server = context.endpoint.rstrip("/")
    token = None
    if isinstance(auth.token, str) and auth.token:
        token = BearerToken(token=auth.token)
    elif isinstance(auth.token_file, str):
        token = BearerToken(path=auth.token_file)
    elif isinstance(auth.token_file, Fault):
        raise KubeAuthError(f"{where}: {auth.token_file.text}")
    basic = auth.basic if isinstance(auth.basic, tuple) else None
    ctx = _ssl_context(auth, where) if server.startswith("https://") else None
    name = auth.tls_server_name if isinstance(auth.tls_server_name, str) else None
    return ApiCredentials(server, where, ctx, token, basic, name or None)


def _material(value: object, what: str, where: str) -> bytes | None:
    if isinstance(value, Fault):
        raise KubeAuthError(f"{where}: {value.text}")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return Path(value).read_bytes()
        except OSError as exc:
            raise KubeAuthError(f"{where}: {what} {value}: {exc.strerror}") from None
    return None


def _ssl_context(auth: ContextAuth, where: str) -> ssl.SSLContext:
    ca = _material(auth.ca, "certificate-authority", where)
    cert = _material(auth.cert, "client-certificate", where)
    key = _material(auth.key, "client-key", where)
    try:
        if auth.verify and ca is None:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if auth.verify and ca is not None:
                ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
            if not auth.verify:  # insecure-skip-tls-verify: true, and only then
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        if cert is not None and key is not None:
            load_cert_chain_pem(ctx, cert + b"\n" + key, "management")
    except (ssl.SSLError, ValueError) as exc:
        raise KubeAuthError(f"{where}: TLS material: {_why(exc)}") from None
    return ctx


def _why(exc: Exception) -> str:
    """An exception's kind and library reason, never PEM content."""
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None)
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
