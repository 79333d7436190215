"""What resolving one context's credentials needs, kept per context for as long as its file is.

Discovery keeps, for every context and for as long as its file is unchanged, what
``exporter.net.kubeclient`` needs to resolve its credentials (after a 401, an exec credential's
expiry, a restart of the probes), so that resolving never parses a kubeconfig again. At
10,000 contexts that is kept 10,000 times, so it is one small object per context
(:class:`ContextAuth`) rather than a copy of the context's kubeconfig entries: the
entries' values as the kubernetes client would read them, nothing else. The values the
client refuses are :class:`Fault` objects, raised when the context is resolved, in the
order the client would raise them. A user with an ``auth-provider`` (gcp, oidc) keeps a
minimal kubeconfig instead (:class:`PackedConfig`): only the kubernetes client speaks those.

``fleetwatch.discovery.entries`` makes them from a file's entries; what needs the file system or a
process (a ``tokenFile``'s content, whether a CA file exists, an exec plugin) is left to
resolution (``exporter.net.kubeclient``), which follows the client's order.

Pure: plain data, no I/O. Nothing here is ever logged, and no repr shows a value.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class KubeconfigError(Exception):
    """What the kubernetes client's ``ConfigException`` says for the same kubeconfig."""


@dataclass(frozen=True, slots=True)
class Fault:
    """An error resolving the context raises; its text never holds a value of the file."""

    kind: type[Exception]
    text: str

    def error(self) -> Exception:
        return self.kind(self.text)


#: A TLS material as resolution sees it: decoded data, an absolute file path to check, a
#: fault, or none.
Material = bytes | str | Fault | None


class PackedConfig(Mapping[str, Any]):
    """A minimal kubeconfig kept pickled until the kubernetes client resolves it.

    Only contexts with an auth provider keep one (:attr:`ContextAuth.client`). Pickled, it
    takes about a fifth of the memory of the same kubeconfig as Python dicts, and it is
    read only when the client resolves the context. Reading it unpickles a fresh copy each
    time (:meth:`load` does it once).
    """

    __slots__ = ("_blob",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        # Our own parse of the file, never foreign bytes: pickle is safe and keeps types.
        self._blob = pickle.dumps(dict(config), protocol=pickle.HIGHEST_PROTOCOL)

    def load(self) -> dict[str, Any]:
        value: dict[str, Any] = pickle.loads(self._blob)  # our own bytes (see __init__)
        return value

    def __getitem__(self, key: str) -> Any:
        return self.load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PackedConfig) and other._blob == self._blob

    def __hash__(self) -> int:
        return hash(self._blob)

    def __repr__(self) -> str:  # never the content: it holds credentials
        return f"PackedConfig({len(self._blob)} bytes)"


@dataclass(frozen=True, slots=True)
class ContextAuth:
    """What resolving one context's credentials needs (``exporter.net.kubeclient.load_context``).

    Equal objects resolve alike, so contexts with equal ones (one CA, client certificate,
    token file or plugin for many clusters) share one resolution: the server is not in it,
    only whether it is ``https`` (unless an exec plugin is given the cluster's
    information). Every value holding a secret is out of ``repr``, and so out of logs.
    """

    https: bool
    #: raised before anything else: a ``*-data`` value that is not base64, a user entry
    #: without ``user``
    first: Fault | None = None
    #: ``token``'s value when truthy (``"Bearer %s" % token``), or its fault
    token: object = field(default=None, repr=False, hash=False)
    #: ``tokenFile``, absolute, or its fault; ``None`` when ``token`` is given (it wins)
    token_file: str | Fault | None = None
    #: ``(username, password)`` when both are given, or the fault of a ``null`` one
    basic: object = field(default=None, repr=False, hash=False)
    #: TLS material (https only): decoded data, an absolute path, a fault or none; out of
    #: ``repr`` all three (a certificate is no secret, but its PEM is a Secret's value)
    ca: Material = field(default=None, repr=False)
    cert: Material = field(default=None, repr=False)
    key: Material = field(default=None, repr=False)
    #: raised after the TLS files are checked (``insecure-skip-tls-verify``,
    #: ``tls-server-name`` or ``proxy-url`` given as ``null``)
    late: Fault | None = None
    verify: bool = True
    tls_server_name: object = field(default=None, hash=False)
    #: the user's exec plugin, run by ``exporter.net.execplugin`` (None: no plugin to run)
    exec: Mapping[str, Any] | None = field(default=None, repr=False, hash=False)
    #: the cluster's information the plugin asked for (``provideClusterInfo``)
    exec_cluster: Mapping[str, Any] | None = field(default=None, repr=False, hash=False)
    #: the folder a plugin runs in (the folder of the context's file)
    exec_cwd: str = ""
    #: an auth provider's context: its minimal kubeconfig for the kubernetes client
    client: PackedConfig | None = field(default=None, repr=False)
    #: the folder the client resolves relative paths against
    client_base: str = ""
    #: :meth:`__hash__`'s value, computed once (:meth:`__post_init__`)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Every field but the plugin's mappings, the token and the password included.

        Leaving the token out (it may be a value of any YAML type, so unhashable) gave
        every context of a fleet with one CA and a token per cluster (Argo CD's Secrets)
        one hash: each look-up of the credential cache then compared it with all the
        others, seconds of the event loop per cycle at 5,000 clusters. A value that
        cannot be hashed counts by its type (equality still tells such contexts apart).

        Computed once: it is a tuple of 14 fields hashed in Python, and the credential
        cache hashes every cluster's twice when it prunes after a cycle (at 20,000
        clusters that prune took 0.33 s of one turn of the probe loop under cProfile,
        most of it these hashes; bench/RESULTS.md).
        """
        value = hash(
            (
                self.https, self.first, _hashable(self.token), self.token_file,
                _hashable(self.basic), self.ca, self.cert, self.key, self.late, self.verify,
                _hashable(self.tls_server_name), self.exec_cwd, self.client, self.client_base,
            )
        )  # fmt: skip
        object.__setattr__(self, "_hash", value)

    def __hash__(self) -> int:
        return self._hash

    @property
    def may_block(self) -> bool:
        """Resolving it runs a plugin or an auth provider (up to the probe timeout)."""
        return self.exec is not None or self.client is not None


def _hashable(value: object) -> object:
    """``value`` if it can be hashed, else its type's name (``ContextAuth.__hash__``)."""
    try:
        hash(value)
    except TypeError:
        return type(value).__name__
    return value
