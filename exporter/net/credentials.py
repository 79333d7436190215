"""A kubeconfig context -> the TLS context and headers of an authenticated request.

``exporter.net.kubeclient.load_context`` resolves the context from what discovery kept of it
(``fleetwatch.discovery.contextauth.ContextAuth``), as the kubernetes client would. It is
synchronous (it reads files, and may run an exec plugin for up to the probe timeout), so
it runs on the credential workers (``exporter.net.workers``): a bounded pool of its own, never
the event loop and never the default executor that discovery and rendering need. Contexts
that share a resolution wait for one build in flight, so a fleet behind one hung plugin
starts one plugin per cycle, not one per cluster.

Embedded CA, client certificate and key come as bytes and are loaded from memory: the CA
with ``cadata``, the certificate and key through an anonymous in-memory file
(``memfd_create``, read by path ``/proc/self/fd/N``, gone with its descriptor), so no key
is ever written to disk, not even for a moment. Where there is no ``memfd_create``, a file
in a private 0700 folder is written and removed at once.

Results are cached per (file version, context), and contexts whose credentials are equal
(:class:`~fleetwatch.discovery.contextauth.ContextAuth`: the cluster but for its ``server``, and
the user) share one resolution, across files too: a fleet whose kubeconfigs repeat one CA,
client certificate, token file or exec plugin resolves it once, not once per cluster.
``ssl.SSLContext`` objects are shared between contexts with the same CA, client
certificate and verification: connections are pooled per SSL context, so a stable context
is what makes keep-alive work across cycles.

A real fleet (every kubeadm cluster with a CA and an admin certificate of its own) needs
one ``SSLContext`` per cluster: a kept-alive connection holds its context anyway, and
CPython's ``ssl`` sets a client certificate per context only, so that is the floor with
one connection per cluster (what it costs: docs/exporter.md,
``bench/discovery_credentials.py --cases sslcontexts``).
Tokens are stripped of surrounding whitespace (kubectl does; the client does not and then
fails on the trailing newline of a ``tokenFile``).

Longer than most modules: building credentials, sharing one build between the contexts
of one user, the failure memory and the two worker pools are one mechanism whose parts
must agree on the same keys and lifetimes.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.net.execplugin import ExecPluginError, PluginRunner
from exporter.net.kubeclient import ContextLoadError, LoadedContext, load_context
from exporter.net.turns import sliced
from exporter.net.workers import Workers
from fleetwatch.discovery.clusters import ContextConfig
from fleetwatch.discovery.contextauth import ContextAuth
from fleetwatch.discovery.files import FileVersion
from fleetwatch.kube.kubeauth import client_ssl_context

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


#: (CA file, cert file, key file, verify, the files' mtimes: a renewed file is reloaded,
#: and the in-memory CA, certificate and key themselves: the objects discovery keeps, so
#: the key costs no copy and no digest)
_SslKey = tuple[str | None, str | None, str | None, bool, tuple[int, ...], tuple[bytes | None, ...]]


@dataclass(frozen=True)
class _TlsMaterial:
    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    verify: bool
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = field(default=None, repr=False)

    def key(self) -> _SslKey:
        mtimes = _mtimes(self.ca_file, self.cert_file, self.key_file)
        data = (self.ca_data, self.cert_data, self.key_data)
        return (self.ca_file, self.cert_file, self.key_file, self.verify, mtimes, data)


class _SslContexts:
    """One ``SSLContext`` per TLS material (files and their mtimes, or data): shared, stable."""

    def __init__(self) -> None:
        self._cache: dict[_SslKey, ssl.SSLContext] = {}
        #: credential workers build at once: two with the same material must get one context
        self._lock = threading.Lock()

    def get(self, material: _TlsMaterial) -> ssl.SSLContext:
        key = material.key()
        ctx = self._cache.get(key)
        if ctx is None:
            built = _make_ssl_context(material)  # outside the lock: 1 ms of CPU each
            with self._lock:
                ctx = self._cache.setdefault(key, built)
        return ctx

    def clear(self) -> None:
        self._cache.clear()

    async def retain(self, used: set[int]) -> None:
        """Forget the contexts (by ``id``) no cached credentials use: clusters gone, files
        renewed (a new mtime makes a new key). Each holds its CA's certificates. A slice
        a turn, as the rest of :meth:`CredentialCache.prune`; a context built meanwhile (a
        timed-out probe's build ending) may be dropped, and is built again when needed."""
        async for key, ctx in sliced(list(self._cache.items())):
            if id(ctx) not in used:
                self._cache.pop(key, None)


def _make_ssl_context(tls: _TlsMaterial) -> ssl.SSLContext:
    """The one kubeconfig-to-TLS builder (``fleetwatch.kube.kubeauth``), the management
    cluster's client's too."""
    return client_ssl_context(
        verify=tls.verify,
        ca_data=tls.ca_data,
        ca_file=tls.ca_file,
        cert_data=tls.cert_data,
        key_data=tls.key_data,
        cert_file=tls.cert_file,
        key_file=tls.key_file,
    )


def build_credentials(
    ctx: ContextConfig,
    ssl_contexts: _SslContexts | None = None,
    plugins: PluginRunner | None = None,
) -> Credentials:
    """Resolve one context (blocking: call it on a worker thread).

    ``plugins`` runs exec plugins (the exporter's one runner); without it, one with a
    10 s deadline is made for this call.
    """
    runner = plugins if plugins is not None else PluginRunner(10.0)
    try:
        loaded = load_context(ctx.auth, runner)
    except ContextLoadError as exc:
        raise CredentialsError(_safe_reason(exc.error)) from None
    finally:
        if plugins is None:
            runner.close()
    return _credentials_of(loaded, ssl_contexts or _SslContexts())


def _credentials_of(loaded: LoadedContext, ssl_contexts: _SslContexts) -> Credentials:
    token = loaded.token
    headers: dict[str, str] = {}
    if token:
        token = token.strip()
        if "\n" in token or "\r" in token:
            raise CredentialsError("the token has a line break inside it")
        headers["Authorization"] = token
    ssl_context: ssl.SSLContext | None = None
    if loaded.https:
        material = _TlsMaterial(
            loaded.ca_file,
            loaded.cert_file,
            loaded.key_file,
            loaded.verify,
            loaded.ca_data,
            loaded.cert_data,
            loaded.key_data,
        )
        try:
            ssl_context = ssl_contexts.get(material)
        except (ssl.SSLError, OSError) as exc:
            raise CredentialsError(f"cannot load the TLS material: {_safe_reason(exc)}") from None
    return Credentials(
        ssl_context=ssl_context,
        headers=headers,
        server_hostname=loaded.tls_server_name,
        expires_at=loaded.expires_at,
        from_exec=loaded.from_exec,
    )


def _mtimes(*paths: str | None) -> tuple[int, ...]:
    out: list[int] = []
    for path in paths:
        try:
            out.append(os.stat(path).st_mtime_ns if path else 0)
        except OSError:
            out.append(0)
    return tuple(out)


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
    if isinstance(exc, ExecPluginError):
        return str(exc)[:200]  # our own words, never the plugin's output
    text = str(exc)
    for safe in ("File does not exist", "exec: process returned", "exec: malformed", "Invalid"):
        if text.startswith(safe):
            return text.split(".")[0][:160]
    return type(exc).__name__


_Key = tuple[str, str, FileVersion]


def shared_key(ctx: ContextConfig) -> ContextAuth:
    """What the resolution of ``ctx`` depends on: contexts with equal ones share it.

    The cluster entry without its ``server`` (only its scheme matters), the user entry;
    an exec plugin that asks for the cluster's info (``provideClusterInfo``) sees the
    server, so then the server counts too (``fleetwatch.discovery.contextauth``).
    """
    return ctx.auth


#: Threads resolving contexts without an exec plugin: milliseconds of CPU each.
CREDENTIAL_WORKERS = 4
#: Threads running exec plugins (and auth providers), each up to the probe timeout:
#: threads that wait cost little, and as many plugins as this may hang before another
#: plugin has to queue.
PLUGIN_WORKERS = 32


class CredentialCache:
    """Credentials per (file, context, file version), built on the credential workers.

    Contexts with the same :func:`shared_key` share one entry, built once, and callers
    that ask while it is being built wait for that build. Entries of an older version of
    a file are dropped by :meth:`prune`; an exec credential is built again when it
    expires. Files a kubeconfig points to (a rotated ``tokenFile``, a renewed exec token)
    can change without the kubeconfig changing, so the cycle calls :meth:`invalidate` when
    the API server refuses cached credentials. :meth:`close` kills the plugins in flight.
    """

    def __init__(self, plugin_timeout: float = 10.0) -> None:
        self._shared: dict[_Key, ContextAuth] = {}  #: context -> its shared key
        self._entries: dict[ContextAuth, Credentials] = {}  #: shared key -> credentials
        self._building: dict[ContextAuth, asyncio.Future[Credentials]] = {}
        #: shared key -> (the error, loop time until which it is given again at once)
        self._failed: dict[ContextAuth, tuple[CredentialsError, float]] = {}
        self._ssl = _SslContexts()
        #: runs exec plugins, with the probe timeout as their deadline
        self.plugins = PluginRunner(plugin_timeout)
        self.workers = Workers(CREDENTIAL_WORKERS, "fleetwatch credentials")
        self.plugin_workers = Workers(PLUGIN_WORKERS, "fleetwatch exec plugins")
        self.builds = 0  #: how many times a context was resolved (tests check caching)

    @staticmethod
    def key(ctx: ContextConfig) -> _Key:
        return (ctx.source, ctx.context, ctx.version)

    def _shared_key(self, ctx: ContextConfig) -> ContextAuth:
        key = self.key(ctx)
        known = self._shared.get(key)
        if known is None:
            known = self._shared[key] = shared_key(ctx)
        return known

    def cached(self, ctx: ContextConfig) -> Credentials | None:
        """The credentials of ``ctx`` if built and not expired: no await, no worker.

        The probe's fast path: nearly every probe of a steady cycle finds them here, and
        then needs neither the workers nor a bound of its own on resolving them.
        """
        shared = self._shared.get(self.key(ctx))
        creds = None if shared is None else self._entries.get(shared)
        return None if creds is None or creds.expired() else creds

    async def resolve(self, ctx: ContextConfig) -> tuple[Credentials, bool]:
        """``(credentials, fresh)``: fresh when built for this call rather than cached.

        Cancelling the caller (its probe timed out) leaves the build running for the
        others that wait for it; the plugin's own deadline ends it.
        """
        shared = self._shared_key(ctx)
        creds = self._entries.get(shared)
        if creds is not None and not creds.expired():
            return creds, False
        now = asyncio.get_running_loop().time()
        failed = self._failed.get(shared)
        if failed is not None and now < failed[1]:
            raise failed[0]  # the same error, at once: one hung plugin costs one timeout
        building = self._building.get(shared)
        if building is None or building.done():  # a finished one nobody took: start again
            self.builds += 1
            # A plugin or an auth provider may block up to the probe timeout: those run on
            # threads of their own, and the rest never wait behind them.
            workers = self.plugin_workers if shared.may_block else self.workers
            building = asyncio.wrap_future(
                workers.submit(build_credentials, ctx, self._ssl, self.plugins)
            )
            building.add_done_callback(_retrieve)
            building.add_done_callback(lambda done: self._remember_failure(shared, done))
            self._building[shared] = building
        try:
            creds = await asyncio.shield(building)
        except CredentialsError as exc:
            # Given again to the contexts that share it for one plugin timeout: a cycle
            # whose clusters all wait on one hung plugin then ends after one timeout.
            until = asyncio.get_running_loop().time() + self.plugins.timeout
            self._failed[shared] = (exc, until)
            raise
        finally:
            if building.done() and self._building.get(shared) is building:
                del self._building[shared]
        self._failed.pop(shared, None)
        self._entries[shared] = creds
        return creds, True

    def _remember_failure(self, shared: ContextAuth, done: asyncio.Future[Credentials]) -> None:
        """A failed build is given again for one plugin timeout, even when every caller
        had given up before it ended (their probes' bounds, on a loaded machine): else the
        next context that shares it would start the hung plugin a second time."""
        exc = None if done.cancelled() else done.exception()
        if isinstance(exc, CredentialsError):
            self._failed[shared] = (exc, asyncio.get_running_loop().time() + self.plugins.timeout)

    def close(self) -> None:
        """Kill the plugins in flight, cancel the builds not started (the exporter stops)."""
        self.plugins.close()
        self.workers.shutdown(cancel_futures=True)
        self.plugin_workers.shutdown(cancel_futures=True)
        for building in self._building.values():
            building.cancel()  # a late answer of a killed plugin then lands nowhere
        self._building.clear()

    def invalidate(self, ctx: ContextConfig, refused: Credentials | None = None) -> None:
        """Forget the credentials of ``ctx`` (only if they are ``refused``, when given:
        another cluster sharing them may have fetched new ones meanwhile)."""
        shared = self._shared.get(self.key(ctx))
        if shared is None:
            return
        if refused is None or self._entries.get(shared) is refused:
            self._entries.pop(shared, None)

    async def prune(self, live: set[_Key]) -> None:
        """Forget the credentials of contexts that are gone or whose file changed.

        Every pass a slice a turn (``exporter.net.turns.sliced``): at 20,000 clusters the
        passes after the contexts' in one step were 40-75 ms under cProfile after every
        Secret was rotated, the probe loop's longest turns on a loaded machine
        (bench/RESULTS.md); the shared keys' hashes are computed once
        (``ContextAuth``). Between cycles nothing looks credentials up; a build that
        ends meanwhile (a probe that timed out left it running) may have its entry
        dropped, and is built again when a probe needs it.
        """
        gone = [k async for k in sliced(list(self._shared)) if k not in live]
        async for key in sliced(gone):
            self._shared.pop(key, None)
        used = {s async for s in sliced(list(self._shared.values()))}
        async for shared in sliced(list(self._entries)):
            if shared not in used:
                self._entries.pop(shared, None)
        self._failed = {s: f async for s, f in sliced(list(self._failed.items())) if s in used}
        contexts = {
            id(c.ssl_context) async for c in sliced(list(self._entries.values())) if c.ssl_context
        }
        await self._ssl.retain(contexts)


def _retrieve(future: asyncio.Future[Credentials]) -> None:
    """Mark the outcome of a build seen: all its callers may have given up (timed out)."""
    if not future.cancelled():
        future.exception()
