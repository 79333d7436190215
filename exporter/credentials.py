"""A kubeconfig context -> the TLS context and headers of an authenticated request.

The kubernetes client resolves the context (``exporter.kube.load_context``, on the minimal
per-context dict that discovery kept: 0.7 ms, versus seconds for ``new_client_from_config``
on a big file). It is synchronous and may run a plugin, so it runs in a worker thread,
never on the event loop.

Results are cached per (file version, context), and contexts whose cluster (but for its
``server``) and user are identical share one resolution: a fleet whose kubeconfigs repeat
one CA, client certificate, token file or exec plugin resolves it once, not once per
cluster (at 10,000 clusters that is 10 s of CPU). ``ssl.SSLContext`` objects are shared
between contexts with the same CA, client certificate and verification: connections are
pooled per SSL context, so a stable context is what makes keep-alive work across cycles.
Tokens are stripped of surrounding whitespace (kubectl does; the client does not and then
fails on the trailing newline of a ``tokenFile``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.discovery import ContextConfig, FileVersion, unpack
from exporter.kube import ContextLoadError, load_context

#: Seconds before an exec credential's ``expirationTimestamp`` at which it is renewed.
EXPIRY_MARGIN = 30.0


class CredentialsError(Exception):
    """The context cannot be turned into credentials; the message never holds one."""


@dataclass(frozen=True)
class Credentials:
    """Everything a request to one API server needs besides the URL."""

    #: None for a plain-HTTP endpoint
    ssl_context: ssl.SSLContext | None
    #: the ``Authorization`` header, if any (kept out of ``repr``: it is a secret)
    headers: Mapping[str, str] = field(repr=False)
    #: ``tls-server-name`` of the cluster, to verify a name other than the URL's host
    server_hostname: str | None = None
    #: epoch seconds after which an exec credential must be fetched again
    expires_at: float | None = None
    #: True when an exec plugin produced them (a 401 then means "fetch them again")
    from_exec: bool = False

    def expired(self, now: float | None = None) -> bool:
        if self.expires_at is None:
            return False
        return (now if now is not None else time.time()) >= self.expires_at - EXPIRY_MARGIN


#: (CA file, cert file, key file, verify, and the files' mtimes: a renewed file is reloaded)
_SslKey = tuple[str | None, str | None, str | None, bool, tuple[int, ...]]


class _SslContexts:
    """One ``SSLContext`` per (CA file, cert file, key file, verify): shared and stable."""

    def __init__(self) -> None:
        self._cache: dict[_SslKey, ssl.SSLContext] = {}

    def get(self, key: _SslKey) -> ssl.SSLContext:
        ctx = self._cache.get(key)
        if ctx is None:
            ctx = _make_ssl_context(*key[:4])
            self._cache[key] = ctx
        return ctx

    def clear(self) -> None:
        self._cache.clear()

    def retain(self, used: set[int]) -> None:
        """Forget the contexts (by ``id``) no cached credentials use: clusters gone, files
        renewed (a new mtime makes a new key). Each holds its CA's certificates."""
        for key, ctx in list(self._cache.items()):  # list(): a timed-out build may add
            if id(ctx) not in used:
                self._cache.pop(key, None)


def _make_ssl_context(
    ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool
) -> ssl.SSLContext:
    if verify and not ca_file:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)  # the system store
    else:
        # The kubeconfig's CA replaces the system store, as in client-go; not loading the
        # system store also makes a context cost 0.3 ms instead of 65 ms.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if ca_file and verify:
            ctx.load_verify_locations(cafile=ca_file)
        if not verify:  # insecure-skip-tls-verify: true, and only then
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def build_credentials(ctx: ContextConfig, ssl_contexts: _SslContexts | None = None) -> Credentials:
    """Resolve one context with the kubernetes client (blocking: call it in a thread)."""
    config_dict = unpack(ctx.config)
    user = _user_of(config_dict)  # before the client sees the dict (it may change it)
    try:
        loaded = load_context(config_dict, ctx.context, ctx.base_path)
    except ContextLoadError as exc:
        raise CredentialsError(_safe_reason(exc.error)) from None
    from_exec = isinstance(user.get("exec"), dict)
    token = loaded.token
    headers: dict[str, str] = {}
    if token:
        token = token.strip()
        if "\n" in token or "\r" in token:
            raise CredentialsError("the token has a line break inside it")
        headers["Authorization"] = token
    if from_exec and not token and not loaded.cert_file:
        # The client logs the plugin's own error and carries on without credentials.
        raise CredentialsError("the exec plugin gave no token and no client certificate")
    ssl_context: ssl.SSLContext | None = None
    if loaded.host.startswith("https"):
        key: _SslKey = (
            loaded.ca_file,
            loaded.cert_file,
            loaded.key_file,
            loaded.verify,
            _mtimes(loaded.ca_file, loaded.cert_file, loaded.key_file),
        )
        try:
            ssl_context = (ssl_contexts or _SslContexts()).get(key)
        except (ssl.SSLError, OSError) as exc:
            raise CredentialsError(f"cannot load the TLS material: {_safe_reason(exc)}") from None
    return Credentials(
        ssl_context=ssl_context,
        headers=headers,
        server_hostname=loaded.tls_server_name,
        expires_at=loaded.expires_at,
        from_exec=from_exec,
    )


def _mtimes(*paths: str | None) -> tuple[int, ...]:
    out: list[int] = []
    for path in paths:
        try:
            out.append(os.stat(path).st_mtime_ns if path else 0)
        except OSError:
            out.append(0)
    return tuple(out)


def _user_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    users = config.get("users") or []
    if users and isinstance(users[0], dict) and isinstance(users[0].get("user"), dict):
        user: Mapping[str, Any] = users[0]["user"]
        return user
    return {}


def _safe_reason(exc: BaseException) -> str:
    """A short reason for a resolution error that cannot carry a secret.

    Exceptions from the client may quote the plugin's stderr or a decoded value, so only
    well-known shapes are passed through, cut short; the rest is named by type.
    """
    if isinstance(exc, OSError) and exc.strerror:
        name = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror.lower()}{name}"
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}" if exc.args else "missing key"
    text = str(exc)
    for safe in ("File does not exist", "exec: process returned", "exec: malformed", "Invalid"):
        if text.startswith(safe):
            return text.split(".")[0][:160]
    return type(exc).__name__


_Key = tuple[str, str, FileVersion]


def shared_key(ctx: ContextConfig) -> str:
    """What the resolution of ``ctx`` depends on, hashed (the dict holds secrets).

    The cluster entry without its ``server`` (only its scheme matters), the user entry and
    the folder relative paths start from. An exec plugin that asks for the cluster's info
    (``provideClusterInfo``) sees the server, so then the server counts too.
    """
    config = unpack(ctx.config)
    clusters = config.get("clusters") or [{}]
    cluster = dict(clusters[0].get("cluster") or {}) if isinstance(clusters[0], dict) else {}
    user = _user_of(config)
    exec_ = user.get("exec")
    if not (isinstance(exec_, dict) and exec_.get("provideClusterInfo")):
        server = str(cluster.pop("server", ""))
        cluster["server"] = server.partition(":")[0]
    text = json.dumps([cluster, user, ctx.base_path], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class CredentialCache:
    """Credentials per (file, context, file version), built off the event loop.

    Contexts with the same :func:`shared_key` share one entry, built once. Entries of an
    older version of a file are dropped by :meth:`prune`; an exec credential is built
    again when it expires. Files a kubeconfig points to (a rotated ``tokenFile``, a
    renewed exec token) can change without the kubeconfig changing, so the cycle calls
    :meth:`invalidate` when the API server refuses cached credentials.
    """

    def __init__(self) -> None:
        self._shared: dict[_Key, str] = {}  #: context -> its shared key
        self._entries: dict[str, Credentials] = {}  #: shared key -> credentials
        self._ssl = _SslContexts()
        self.builds = 0  #: how many times a context was resolved (tests check caching)

    @staticmethod
    def key(ctx: ContextConfig) -> _Key:
        return (ctx.source, ctx.context, ctx.version)

    def _shared_key(self, ctx: ContextConfig) -> str:
        key = self.key(ctx)
        shared = self._shared.get(key)
        if shared is None:
            shared = self._shared[key] = shared_key(ctx)
        return shared

    async def resolve(self, ctx: ContextConfig) -> tuple[Credentials, bool]:
        """``(credentials, fresh)``: fresh when built by this call rather than cached."""
        shared = self._shared_key(ctx)
        creds = self._entries.get(shared)
        if creds is not None and not creds.expired():
            return creds, False
        self.builds += 1
        creds = await asyncio.to_thread(build_credentials, ctx, self._ssl)
        self._entries[shared] = creds
        return creds, True

    def invalidate(self, ctx: ContextConfig, refused: Credentials | None = None) -> None:
        """Forget the credentials of ``ctx`` (only if they are ``refused``, when given:
        another cluster sharing them may have fetched new ones meanwhile)."""
        shared = self._shared.get(self.key(ctx))
        if shared is None:
            return
        if refused is None or self._entries.get(shared) is refused:
            self._entries.pop(shared, None)

    def prune(self, live: set[_Key]) -> None:
        """Forget the credentials of contexts that are gone or whose file changed."""
        for key in [k for k in self._shared if k not in live]:
            del self._shared[key]
        used = set(self._shared.values())
        for shared in [s for s in self._entries if s not in used]:
            del self._entries[shared]
        self._ssl.retain({id(c.ssl_context) for c in self._entries.values() if c.ssl_context})
