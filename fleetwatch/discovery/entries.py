"""A kubeconfig's cluster and user entries, reduced as they are parsed, and the
:class:`~fleetwatch.discovery.contextauth.ContextAuth` of a context made of them.

Made here, once per file change, because it needs no I/O:

- the ``*-data`` values are decoded (bytes: three quarters of the base64 text, and what
  loading them needs); equal values of one file share one ``bytes`` object, laid side by
  side (:class:`DataArena`), and one that is not base64 is a
  :class:`~fleetwatch.discovery.contextauth.Fault` raised when the context is resolved;
- file paths are made absolute as the client makes them (``normpath(join(base, path))``,
  ``base`` being the folder of the context's file; an entry taken from another file of
  kubectl's merged list has its relative paths rebased on that file's folder first);
- which value wins where the client lets one win (``*-data`` over the file, even empty;
  ``token`` over ``tokenFile``, even empty), and the values the client refuses (``null``)
  as faults raised in the order the client would raise them.

``tests/exporter/test_exporter_kubeauth.py`` checks the result against the client's
``KubeConfigLoader`` over a table of kubeconfig shapes.

Pure: entries in, plain data out; no I/O. Nothing here is ever logged, and no repr
shows a value.

Longer than most modules: the entries are shaped for the one reading that follows them,
the client's rules for a context's credentials, so both are read (and tested) together.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.discovery.contextauth import (
    ContextAuth,
    Fault,
    KubeconfigError,
    Material,
    PackedConfig,
)

#: The ``*-data`` keys: (entry, data key, file key).
DATA_KEYS = (
    ("cluster", "certificate-authority-data", "certificate-authority"),
    ("user", "client-certificate-data", "client-certificate"),
    ("user", "client-key-data", "client-key"),
)

#: Where one decoded value lies in a :class:`DataArena` (start, end).
Span = tuple[int, int]


class DataArena:
    """The decoded ``*-data`` values of one parse: one buffer while it runs, then bytes.

    Each value is decoded when its entry is parsed, between the parse's own temporary
    objects (the base64 text among them). Kept there as ``bytes`` objects of its own, each
    would pin the heap around it once those temporaries are freed, keeping resident far
    more than the live values. So values go into one growing buffer during the parse and
    become ``bytes`` after it (:meth:`finish`), side by side (figures: docs/exporter.md,
    "Kubeconfig sources"). Equal values are stored once and give one ``bytes`` object.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._spans: dict[int, list[Span]] = {}  #: hash of a value -> where such values are
        self._bytes: dict[Span, bytes] = {}

    def decode(self, value: object, key: str) -> Span | Fault | None:
        """A ``*-data`` value (base64) -> where its bytes are; None when empty (no data,
        though the key still wins over its file key); a :class:`Fault` when not base64."""
        if not value:
            return None
        try:
            raw = base64.b64decode(str(value))
        except (binascii.Error, ValueError):
            return Fault(ValueError, f"Invalid {key}: not base64")
        spans = self._spans.setdefault(hash(raw), [])
        with memoryview(self._buffer) as view:  # released before the buffer grows
            for span in spans:
                if view[span[0] : span[1]] == raw:
                    return span
        start = len(self._buffer)
        self._buffer += raw
        span = (start, len(self._buffer))
        spans.append(span)
        return span

    def finish(self) -> None:
        """Turn every value into bytes, giving the buffer back as it goes (from its end,
        so the buffer and the bytes made of it are never both whole)."""
        spans = sorted((s for same in self._spans.values() for s in same), reverse=True)
        for start, end in spans:
            with memoryview(self._buffer) as view:
                self._bytes[(start, end)] = bytes(view[start:end])
            del self._buffer[start:]
        self._spans.clear()

    def get(self, value: object) -> object:
        """``value`` with a :data:`Span` replaced by its bytes (after :meth:`finish`)."""
        return self._bytes[value] if isinstance(value, tuple) else value


@dataclass(slots=True, repr=False)
class ClusterEntry:
    """One named cluster of a parse: what contexts take from it (made once per file, its
    decoded data given as bytes once the parse is over)."""

    #: the entry's ``cluster`` body is a mapping (else the context has no server)
    body: bool
    server: object
    proxy_url: object
    #: ``certificate-authority-data`` decoded (``...`` when the key is absent)
    ca_data: object
    #: ``certificate-authority``, raw (``...`` when absent)
    ca_file: object
    insecure: object
    tls_server_name: object
    #: the body but its CA data (kept only while the parse is: a plugin that asks for
    #: its cluster's information and the kubernetes client get it from here)
    rest: Mapping[str, Any] = field(default_factory=dict)
    #: the entry has more than ``MAX_ENTRY_NODES`` nodes (``fleetwatch.discovery.kubeconfig``)
    too_big: bool = False


@dataclass(slots=True, repr=False)
class UserEntry:
    """One named user of a parse: what contexts take from it (made once per file, its
    decoded data given as bytes once the parse is over)."""

    #: the entry has a ``user`` key (the client refuses one that has not)
    has_body: bool
    #: its ``user`` is not a mapping: discovery says the user is missing
    not_a_mapping: bool
    #: the ``user`` body is empty, or not a mapping (the client then reads no credential)
    empty: bool
    #: the ``user`` body, but its ``*-data`` values (``{}`` if it is not a mapping)
    body: Mapping[str, Any]
    cert_data: object
    key_data: object
    too_big: bool = False


_ABSENT: Any = ...  #: a key the entry does not have (``None`` is a value: ``key: null``)


def with_bytes(entry: ClusterEntry | UserEntry, arena: DataArena) -> None:
    """Give ``entry`` its decoded values as bytes (after the parse: see :class:`DataArena`)."""
    if isinstance(entry, ClusterEntry):
        entry.ca_data = arena.get(entry.ca_data)
    else:
        entry.cert_data, entry.key_data = arena.get(entry.cert_data), arena.get(entry.key_data)


def cluster_entry(entry: Mapping[str, Any], arena: DataArena, too_big: bool) -> ClusterEntry:
    body = entry.get("cluster")
    if not isinstance(body, dict):
        return ClusterEntry(False, None, None, _ABSENT, _ABSENT, _ABSENT, _ABSENT, {}, too_big)
    data_key = "certificate-authority-data"
    ca_data: object = _ABSENT
    if data_key in body:
        ca_data = arena.decode(body[data_key], data_key)
    rest = {k: v for k, v in body.items() if k != data_key or not body[k]}
    return ClusterEntry(
        True,
        body.get("server"),
        body.get("proxy-url"),
        ca_data,
        _ABSENT if data_key in body else body.get("certificate-authority", _ABSENT),
        body.get("insecure-skip-tls-verify", _ABSENT),
        body.get("tls-server-name", _ABSENT),
        rest,
        too_big,
    )


def user_entry(entry: Mapping[str, Any], arena: DataArena, too_big: bool) -> UserEntry:
    if "user" not in entry:
        return UserEntry(False, False, True, {}, _ABSENT, _ABSENT, too_big)
    if not isinstance(entry["user"], dict):
        return UserEntry(True, True, True, {}, _ABSENT, _ABSENT, too_big)
    body: Mapping[str, Any] = entry["user"]
    data: dict[str, object] = {}
    for _, data_key, file_key in DATA_KEYS[1:]:
        if data_key in body:
            data[data_key] = arena.decode(body[data_key], data_key)
            body = {k: v for k, v in body.items() if k not in (data_key, file_key)}
    return UserEntry(
        True,
        False,
        not entry["user"],
        body,
        data.get("client-certificate-data", _ABSENT),
        data.get("client-key-data", _ABSENT),
        too_big,
    )


def _config_fault(key: str, where: str) -> Fault:
    """The client's error for ``key: null`` (its ``ConfigNode`` refuses ``None``)."""
    return Fault(KubeconfigError, f"Invalid kube-config file. Expected key {key} in {where}")


def _path(value: object, key: str, where: str, base: str, entry_dir: str | None) -> str | Fault:
    """A file key's value as the client resolves it against ``base`` (its faults too).

    ``entry_dir``: the folder of the file defining the entry when it is not the context's
    own (kubectl's merged list): its relative paths are relative to that file.
    """
    if value is None:
        return _config_fault(key, where)
    if not isinstance(value, str):
        return Fault(TypeError, f"{key} is not a string")
    if entry_dir is not None and value and not os.path.isabs(value):
        value = os.path.join(entry_dir, value)
    return os.path.normpath(os.path.join(base, value))


def _data_only(data: object, https: bool) -> bytes | None:
    return data if https and isinstance(data, bytes) else None


def _material(
    data: object, file: object, key: str, where: str, base: str, entry_dir: str | None
) -> Material:
    if data is not _ABSENT:
        return data if isinstance(data, bytes) else None  # the data key wins, even empty
    if file is _ABSENT:
        return None
    return _path(file, key, where, base, entry_dir)


def context_auth(
    cluster: ClusterEntry,
    cluster_name: str,
    user: UserEntry | None,
    user_name: str | None,
    base: str,
    cluster_dir: str | None = None,
    user_dir: str | None = None,
    context_entry: Mapping[str, Any] | None = None,
) -> ContextAuth:
    """The :class:`ContextAuth` of a context of ``cluster`` and ``user`` (None: anonymous).

    ``base``: the folder of the context's file; ``cluster_dir`` and ``user_dir``: the
    folders of the files defining those entries when not the context's own file.
    ``context_entry`` is needed for an auth provider's minimal kubeconfig only.
    """
    server = str(cluster.server)
    https = server.rstrip("/").startswith("https")
    cluster_where = f"kube-config/clusters[name={cluster_name}]/cluster"
    faults = [d for d in (cluster.ca_data,) if isinstance(d, Fault)]
    body: Mapping[str, Any] = {}
    if user is not None:
        faults += [d for d in (user.cert_data, user.key_data) if isinstance(d, Fault)]
        if not user.has_body:
            faults.append(_config_fault("user", f"kube-config/users[name={user_name}]"))
        body = user.body
    first = faults[0] if faults else None
    late = next(
        (
            _config_fault(key, cluster_where)
            for key, value in (
                ("insecure-skip-tls-verify", cluster.insecure),
                ("tls-server-name", cluster.tls_server_name),
                ("proxy-url", cluster.rest.get("proxy-url", _ABSENT)),
            )
            if value is None
        ),
        None,
    )
    verify = cluster.insecure is _ABSENT or cluster.insecure is None or not cluster.insecure
    tls_server_name = None if cluster.tls_server_name is _ABSENT else cluster.tls_server_name
    common: dict[str, Any] = {
        "https": https,
        "first": first,
        "late": late,
        "verify": verify,
        "tls_server_name": tls_server_name or None,
    }
    if "auth-provider" in body:
        assert user is not None
        # The client resolves the files; the data, decoded here, is loaded from memory.
        return ContextAuth(
            **common,
            ca=_data_only(cluster.ca_data, https),
            cert=_data_only(user.cert_data, https),
            key=_data_only(user.key_data, https),
            client=_client_config(
                cluster, cluster_name, user, user_name, context_entry, user_dir, cluster_dir
            ),
            client_base=base,
        )
    ca = (
        _material(
            cluster.ca_data,
            cluster.ca_file,
            "certificate-authority",
            cluster_where,
            base,
            cluster_dir,
        )
        if https
        else None
    )
    if user is None or user.empty:  # no credential at all (the client's reading)
        return ContextAuth(**common, ca=ca)
    user_where = f"kube-config/users[name={user_name}]/user"
    token: object = None
    token_file: str | Fault | None = None
    if "token" in body:
        value = body["token"]
        if value is None:
            token = _config_fault("token", user_where)
        elif isinstance(value, dict | list) and value:
            # The client would send the repr of its own wrapper object as the token.
            token = Fault(ValueError, "Invalid token: not a string")
        else:
            token = value or None
    elif "tokenFile" in body:
        token_file = _path(body["tokenFile"], "tokenFile", user_where, base, user_dir)
    basic: object = None
    if "username" in body and "password" in body:
        for key in ("username", "password"):
            if body[key] is None:
                basic = _config_fault(key, user_where)
                break
        else:
            basic = (body["username"], body["password"])
    exec_ = body.get("exec")
    runs_exec = isinstance(exec_, dict) and not ({"token", "tokenFile"} & set(body))
    exec_cluster: Mapping[str, Any] | None = None
    if runs_exec:
        assert isinstance(exec_, dict)
        command = exec_.get("command")
        relative = isinstance(command, str) and "/" in command and not os.path.isabs(command)
        if user_dir is not None and relative:
            exec_ = {**exec_, "command": os.path.join(user_dir, str(command))}
        if exec_.get("provideClusterInfo"):
            exec_cluster = _cluster_info(cluster, cluster_dir)
    assert user is not None
    return ContextAuth(
        **common,
        ca=ca,
        token=token,
        token_file=token_file,
        basic=basic,
        cert=_material(
            user.cert_data,
            body.get("client-certificate", _ABSENT),
            "client-certificate",
            user_where,
            base,
            user_dir,
        )
        if https
        else None,
        key=_material(
            user.key_data, body.get("client-key", _ABSENT), "client-key", user_where, base, user_dir
        )
        if https
        else None,
        exec=exec_ if runs_exec else None,
        exec_cluster=exec_cluster,
        exec_cwd=base if runs_exec else "",
    )


def _cluster_info(cluster: ClusterEntry, cluster_dir: str | None) -> dict[str, Any]:
    """The cluster entry as a plugin that asks for it gets it (``provideClusterInfo``).

    The CA data, decoded at parse, is encoded again (client-go sends it the same way:
    base64 of the bytes).
    """
    info = dict(cluster.rest)
    if isinstance(cluster.ca_data, bytes):
        info["certificate-authority-data"] = base64.b64encode(cluster.ca_data).decode()
    path = info.get("certificate-authority")
    if cluster_dir is not None and isinstance(path, str) and path and not os.path.isabs(path):
        info["certificate-authority"] = os.path.join(cluster_dir, path)
    return info


def _client_config(
    cluster: ClusterEntry,
    cluster_name: str,
    user: UserEntry | None,
    user_name: str | None,
    context_entry: Mapping[str, Any] | None,
    user_dir: str | None,
    cluster_dir: str | None,
) -> PackedConfig:
    """The minimal kubeconfig the kubernetes client resolves an auth provider's context from.

    The ``*-data`` values are not in it (decoded here, loaded from memory: the client
    would write them to temporary files), and the server is reduced to its scheme, which
    is all that is taken from the client's answer: contexts of one user share one
    resolution (an OIDC refresh) whatever their servers.
    """
    body = dict(cluster.rest)
    body.pop("certificate-authority-data", None)
    if isinstance(cluster.ca_data, bytes) or cluster.ca_data is None:
        body.pop("certificate-authority", None)  # the data wins over the file, even empty
    body["server"] = str(cluster.server).partition(":")[0] + "://"
    for key in ("certificate-authority",):
        path = body.get(key)
        if cluster_dir is not None and isinstance(path, str) and path and not os.path.isabs(path):
            body[key] = os.path.join(cluster_dir, path)
    user_body = dict(user.body) if user is not None else {}
    for key in ("client-certificate", "client-key", "tokenFile"):
        path = user_body.get(key)
        if user_dir is not None and isinstance(path, str) and path and not os.path.isabs(path):
            user_body[key] = os.path.join(user_dir, path)
    user_body.pop("exec", None)  # run by exporter.net.execplugin, never by the client
    name = str((context_entry or {}).get("name", ""))
    mini: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": cluster_name, "cluster": body}],
        "contexts": [dict(context_entry or {})],
        "users": [{"name": user_name, "user": user_body}],
    }
    return PackedConfig(mini)
