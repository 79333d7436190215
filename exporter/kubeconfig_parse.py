"""One kubeconfig (or kubectl's merged list of them) -> its contexts, or why not.

Pure: bytes in, entries and problems out; no network, no ``kubernetes`` client.
:func:`parse_document` reads one file's bytes within bounds (``exporter.kubeconfig_yaml``)
into its named clusters, users and contexts; :func:`resolve_contexts` merges one or more
parsed files map by map (the first file naming an entry wins, as kubectl does) and makes
each context's minimal kubeconfig (:class:`~exporter.discovered.ContextConfig`), with
relative credential paths made absolute against the file that defines them. A bad
context is a :class:`~exporter.discovered.DiscoveryProblem` (file and reason, never a
credential). ``exporter.discovery`` decides when to call them (once per file change).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from exporter import kubeconfig_yaml
from exporter.discovered import ContextConfig, DiscoveryProblem, PackedConfig
from exporter.kubeconfig_files import FileVersion, ReadError


@dataclass
class Document:
    """One good parse of a kubeconfig file: its named entries, in file order."""

    version: FileVersion
    clusters: dict[str, Mapping[str, Any]]
    users: dict[str, Mapping[str, Any]]
    contexts: dict[str, Mapping[str, Any]]
    #: what is wrong with the file that does not stop it counting (an entry with no name)
    problems: list[str]


def parse_document(data: bytes | str, version: FileVersion) -> Document:
    """The entries of one kubeconfig; raises :class:`ReadError` when it is not one."""
    try:
        doc = kubeconfig_yaml.load(data)
    except kubeconfig_yaml.YamlLimitError as exc:
        raise ReadError(f"refused: {exc}") from None
    except yaml.reader.ReaderError as exc:
        raise ReadError(f"not YAML text ({_reader_reason(exc)})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or type(exc).__name__
        # The message names the place, never the content: a broken line may hold a key.
        raise ReadError(f"invalid YAML{where}: {what}") from None
    if not isinstance(doc, dict):
        raise ReadError(f"not a kubeconfig ({_found(doc)}, not a mapping)")
    kind = doc.get("kind")
    if kind is not None and kind != "Config":
        raise ReadError(f"not a kubeconfig: kind is {str(kind)[:40]!r}, expected 'Config'")
    if "contexts" not in doc and kind != "Config":
        # Say what was found (how many keys, never their names: a stray line may be a
        # secret), so "no contexts" stays the message of a real, empty kubeconfig.
        keys = f"{len(doc)} key" + ("" if len(doc) == 1 else "s")
        raise ReadError(f"not a kubeconfig (a mapping of {keys}, none of them 'contexts')")
    clusters, errs = _named(doc.get("clusters"), "clusters")
    users, user_errs = _named(doc.get("users"), "users")
    contexts, ctx_errs = _named(doc.get("contexts"), "contexts")
    problems = [*errs, *user_errs, *ctx_errs]
    if not contexts and not ctx_errs:
        problems.append("no contexts")
    return Document(version, clusters, users, contexts, problems)


def _reader_reason(exc: yaml.reader.ReaderError) -> str:
    """Why libyaml refused the bytes, with the offending character's code, not the text."""
    char = exc.character
    code = f"#x{char:04x}" if isinstance(char, int) else f"#x{bytes(char).hex()}"
    what = "unacceptable character" if isinstance(char, int) else "invalid bytes"
    return f"{what} {code} at byte {exc.position}: {exc.reason}"


def _named(items: Any, kind: str) -> tuple[dict[str, Mapping[str, Any]], list[str]]:
    """Index a kubeconfig list (``clusters``, ``users``, ``contexts``) by name."""
    index: dict[str, Mapping[str, Any]] = {}
    errors: list[str] = []
    if items is None:
        return index, errors
    if not isinstance(items, list):
        errors.append(f"'{kind}' is not a list")
        return index, errors
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            errors.append(f"{kind} entry #{i + 1} has no name")
            continue
        index.setdefault(item["name"], item)
    return index, errors


def _found(doc: object) -> str:
    """What a YAML document holds instead of a kubeconfig, in a few words, no content."""
    if doc is None:
        return "an empty document"
    if isinstance(doc, list):
        return f"a list of {len(doc)} items"
    if isinstance(doc, str):
        return "a line of text"
    return f"a {type(doc).__name__}"


@dataclass(frozen=True)
class ResolvedContext:
    """A context ready to probe: its API server, its minimal kubeconfig, its proxy."""

    endpoint: str
    config: ContextConfig
    proxy_url: str | None = field(default=None, repr=False)


#: Fields holding a path that kubectl resolves against the folder of the file defining
#: the entry (client-go's ResolveLocalPaths); an exec command only when it has a ``/``.
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


def _rebased(entry: Mapping[str, Any], key: str, fields: tuple[str, ...], base: str) -> Any:
    """``entry`` with its relative file paths made absolute against ``base``."""
    inner = entry.get(key)
    if not isinstance(inner, dict):
        return entry
    changed = dict(inner)
    for name in fields:
        value = changed.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            changed[name] = os.path.join(base, value)
    exec_ = changed.get("exec")
    if isinstance(exec_, dict):
        command = exec_.get("command")
        if isinstance(command, str) and "/" in command and not os.path.isabs(command):
            changed["exec"] = {**exec_, "command": os.path.join(base, command)}
    return {**entry, key: changed}


#: Nodes one cluster, user or context entry may hold, aliases expanded. Each context's
#: entries are copied into its own minimal kubeconfig and serialised (to hash credentials)
#: once per context: an entry shared by thousands of contexts must stay small, or that
#: work multiplies. A real entry holds tens of nodes (an exec plugin with its arguments
#: and environment, a hundred).
MAX_ENTRY_NODES = 1000


def _too_big(entry: object, cache: dict[int, bool]) -> bool:
    """Whether ``entry`` holds more than :data:`MAX_ENTRY_NODES` nodes, aliases expanded."""
    known = cache.get(id(entry))
    if known is None:
        known = cache[id(entry)] = _count(entry, MAX_ENTRY_NODES) > MAX_ENTRY_NODES
    return known


def _count(value: object, budget: int) -> int:
    """Nodes of ``value`` counted up to just past ``budget`` (stops there: no bomb walk)."""
    seen = 0
    stack = [value]
    while stack and seen <= budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def resolve_contexts(
    docs: list[tuple[str, Document]],
) -> tuple[dict[str, ResolvedContext], list[DiscoveryProblem]]:
    """Every context of ``docs`` merged map by map (first file wins for a name)."""
    oversized: dict[int, bool] = {}
    clusters: dict[str, tuple[str, Mapping[str, Any]]] = {}
    users: dict[str, tuple[str, Mapping[str, Any]]] = {}
    contexts: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for source, doc in docs:
        for merged, entries in (
            (clusters, doc.clusters),
            (users, doc.users),
            (contexts, doc.contexts),
        ):
            for name, entry in entries.items():
                merged.setdefault(name, (source, entry))
    if len(docs) == 1:
        version: FileVersion = docs[0][1].version
    else:
        version = tuple(n for _, doc in docs for n in doc.version)
    resolved: dict[str, ResolvedContext] = {}
    problems: list[DiscoveryProblem] = []
    for name, (source, entry) in contexts.items():

        def problem(reason: str, source: str = source, name: str = name) -> None:
            problems.append(DiscoveryProblem(source, name, reason))

        ctx = entry.get("context")
        if not isinstance(ctx, dict):
            problem("context has no 'context' mapping")
            continue
        cluster_name = ctx.get("cluster")
        if not isinstance(cluster_name, str) or not cluster_name:
            problem("context names no cluster")
            continue
        found = clusters.get(cluster_name)
        if found is None:
            problem(f"cluster {cluster_name!r} is missing")
            continue
        cluster_source, cluster_entry = found
        if _too_big(entry, oversized) or _too_big(cluster_entry, oversized):
            problem(f"context or cluster {cluster_name!r} entry over {MAX_ENTRY_NODES} YAML nodes")
            continue
        cluster = cluster_entry.get("cluster")
        server = cluster.get("server") if isinstance(cluster, dict) else None
        if not isinstance(server, str) or not server:
            problem(f"cluster {cluster_name!r} has no server")
            continue
        base = os.path.dirname(source)
        if cluster_source != source:
            cluster_entry = _rebased(
                cluster_entry, "cluster", _CLUSTER_PATHS, os.path.dirname(cluster_source)
            )
        user_name = ctx.get("user")
        mini: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [cluster_entry],
            "contexts": [entry],
        }
        if user_name:  # no user at all is anonymous access: allowed, as kubectl does
            user_found = users.get(user_name) if isinstance(user_name, str) else None
            user_entry = user_found[1] if user_found is not None else None
            if user_entry is None or not isinstance(user_entry.get("user", {}), dict):
                problem(f"user {str(user_name)[:80]!r} is missing")
                continue
            if _too_big(user_entry, oversized):
                problem(f"user {str(user_name)[:80]!r} entry over {MAX_ENTRY_NODES} YAML nodes")
                continue
            if user_found is not None and user_found[0] != source:
                user_entry = _rebased(
                    user_entry, "user", _USER_PATHS, os.path.dirname(user_found[0])
                )
            mini["users"] = [user_entry]
        config = ContextConfig(source, name, version, PackedConfig(mini), base)
        proxy_url = cluster.get("proxy-url") if isinstance(cluster, dict) else None
        if proxy_url is not None and not isinstance(proxy_url, str):
            problem(f"cluster {cluster_name!r} has a proxy-url that is not a string")
            continue
        resolved[name] = ResolvedContext(server, config, proxy_url or None)
    return resolved, problems
