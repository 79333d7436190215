"""One kubeconfig (or kubectl's merged list of them) -> its contexts, or why not.

Pure: bytes in, entries and problems out; no network, no ``kubernetes`` client.
:func:`parse_document` reads one file's bytes within bounds (``fleetwatch.discovery.boundedyaml``)
into its named clusters, users and contexts; :func:`resolve_contexts` merges one or more
parsed files map by map (the first file naming an entry wins, as kubectl does) and makes
each context's :class:`~fleetwatch.discovery.clusters.ContextConfig`, whose credentials part
(``fleetwatch.discovery.contextauth``) has its relative paths made absolute against the file that
defines them. A bad context is a :class:`~fleetwatch.discovery.clusters.DiscoveryProblem` (file and
reason, never a credential). ``fleetwatch.discovery.scan`` decides when to call them (once per
file change). A context whose name breaks ``fleetwatch.common.names``' rule (a control character, a
bidi override, over 253 characters) is one: its name would be a label value, an alert's
``cluster`` and a line on a terminal. So is a server URL with a character no name may
hold: it is the ``endpoint`` label and a cell of ``fleetwatch discover``'s table.

The entries are reduced as they are parsed: each item of the ``clusters`` and ``users``
lists, built on its own (``boundedyaml.load_streaming``), becomes a small
:class:`~fleetwatch.discovery.entries.ClusterEntry` or
:class:`~fleetwatch.discovery.entries.UserEntry` (its ``*-data`` decoded) before the next is
built, so a file of thousands of contexts never exists as a whole tree of Python objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwatch.common.names import char_flaw, name_problem
from fleetwatch.discovery import boundedyaml
from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist, Labels, context_labels
from fleetwatch.discovery.clusters import ContextConfig, DiscoveryProblem
from fleetwatch.discovery.entries import (
    ClusterEntry,
    DataArena,
    UserEntry,
    cluster_entry,
    context_auth,
    user_entry,
    with_bytes,
)
from fleetwatch.discovery.files import FileVersion, ReadError

#: The top-level lists whose items are reduced one by one, in the order kubectl reads them.
_LISTS = ("clusters", "users", "contexts")


@dataclass
class Document:
    """One good parse of a kubeconfig file: its named entries, in file order."""

    version: FileVersion
    clusters: dict[str, ClusterEntry]
    users: dict[str, UserEntry]
    contexts: dict[str, Mapping[str, Any]]
    #: what is wrong with the file that does not stop it counting (an entry with no name)
    problems: list[str]
    #: contexts whose entry is over ``MAX_ENTRY_NODES``
    big_contexts: set[str] = field(default_factory=set)
    #: the ``current-context`` value, as found (Cluster API Secrets name their cluster by it)
    current_context: object = None


class _Entries:
    """The named entries of one document, taken item by item as the parse hands them."""

    def __init__(self, nodes: int | None = None) -> None:
        """``nodes``: of the whole document, aliases expanded, when known beforehand."""
        self.clusters: dict[str, ClusterEntry] = {}
        self.users: dict[str, UserEntry] = {}
        self.contexts: dict[str, Mapping[str, Any]] = {}
        self.big_contexts: set[str] = set()
        self.errors: dict[str, list[str]] = {kind: [] for kind in _LISTS}
        self.arena = DataArena()
        #: no entry can be over the bound of a document under it: no entry is counted
        self.small = nodes is not None and nodes <= MAX_ENTRY_NODES

    def _too_big(self, item: Mapping[str, Any]) -> bool:
        return not self.small and _count(item, MAX_ENTRY_NODES) > MAX_ENTRY_NODES

    def add(self, kind: str, index: int, item: Any) -> None:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            self.errors[kind].append(f"{kind} entry #{index + 1} has no name")
            return
        name: str = item["name"]
        if kind == "clusters":
            if name not in self.clusters:  # the first of a name wins
                self.clusters[name] = cluster_entry(item, self.arena, self._too_big(item))
        elif kind == "users":
            if name not in self.users:
                self.users[name] = user_entry(item, self.arena, self._too_big(item))
        elif name not in self.contexts:
            self.contexts[name] = item
            if self._too_big(item):
                self.big_contexts.add(name)

    def document(
        self, version: FileVersion, problems: list[str], current: object = None
    ) -> Document:
        """The entries, their decoded values as bytes, now that the parse is over."""
        self.arena.finish()
        for cluster in self.clusters.values():
            with_bytes(cluster, self.arena)
        for user in self.users.values():
            with_bytes(user, self.arena)
        return Document(
            version,
            self.clusters,
            self.users,
            self.contexts,
            problems,
            self.big_contexts,
            current,
        )

    def not_a_list(self, doc: Mapping[Any, Any]) -> None:
        for kind in _LISTS:
            if doc.get(kind) is not None:  # still there: it was not a list
                self.errors[kind].append(f"'{kind}' is not a list")


def parse_document(data: bytes | str, version: FileVersion) -> Document:
    """The entries of one kubeconfig; raises :class:`ReadError` when it is not one."""
    entries = _Entries()
    try:
        try:
            doc = boundedyaml.load_streaming(data, _LISTS, entries.add)
        except boundedyaml.NotStreamable:
            doc, nodes = boundedyaml.load_counted(data)
            entries = _Entries(nodes)  # start again from the whole document, as yaml.load has it
            if isinstance(doc, dict):
                doc = {
                    k: boundedyaml.hand_items(k, v, entries.add) if k in _LISTS else v
                    for k, v in doc.items()
                }
    except boundedyaml.YamlLimitError as exc:
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
    entries.not_a_list(doc)
    problems = [e for kind in _LISTS for e in entries.errors[kind]]
    if not entries.contexts and not entries.errors["contexts"]:
        problems.append("no contexts")
    return entries.document(version, problems, doc.get("current-context"))


def document_of(doc: Mapping[str, Any], version: FileVersion) -> Document:
    """The entries of a kubeconfig already made as a dict (one built in memory from an
    Argo CD cluster Secret, a tool's or a test's): what :func:`parse_document` makes of
    the same document as text."""
    entries = _Entries()
    for kind in _LISTS:
        boundedyaml.hand_items(kind, doc.get(kind), entries.add)
    return entries.document(version, [], doc.get("current-context"))


def _reader_reason(exc: yaml.reader.ReaderError) -> str:
    """Why libyaml refused the bytes, with the offending character's code, not the text."""
    char = exc.character
    code = f"#x{char:04x}" if isinstance(char, int) else f"#x{bytes(char).hex()}"
    what = "unacceptable character" if isinstance(char, int) else "invalid bytes"
    return f"{what} {code} at byte {exc.position}: {exc.reason}"


def _found(doc: object) -> str:
    """What a YAML document holds instead of a kubeconfig, in a few words, no content."""
    if doc is None:
        return "an empty document"
    if isinstance(doc, list):
        return f"a list of {len(doc)} items"
    if isinstance(doc, str):
        return "a line of text"
    return f"a {type(doc).__name__}"


@dataclass(frozen=True, slots=True)
class ResolvedContext:
    """A context ready to probe: its API server, its credentials' part, its proxy."""

    endpoint: str
    config: ContextConfig
    proxy_url: str | None = field(default=None, repr=False)
    #: its allowlisted labels from the context's extension (``fleetwatch.discovery.clusterlabels``)
    labels: Labels = ()


#: Nodes one cluster, user or context entry may hold, aliases expanded. What a context
#: keeps of its entries is compared and hashed (contexts that resolve alike share one
#: resolution), and an auth provider's entries are copied into its minimal kubeconfig:
#: an entry shared by thousands of contexts must stay small, or that work multiplies. A
#: real entry holds tens of nodes (an exec plugin with its arguments and environment, a
#: hundred).
MAX_ENTRY_NODES = 1000


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


def _has_userinfo(server: str) -> bool:
    """Whether ``server`` carries ``user@`` or ``user:password@`` before its host."""
    _, sep, rest = server.partition("://")
    authority = (rest if sep else server).split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return "@" in authority


def resolve_contexts(
    docs: list[tuple[str, Document]], allowlist: Allowlist = NO_LABELS
) -> tuple[dict[str, ResolvedContext], list[DiscoveryProblem]]:
    """Every context of ``docs`` merged map by map (first file wins for a name), with
    the labels ``allowlist`` keeps of each context's extension."""
    clusters: dict[str, tuple[str, ClusterEntry]] = {}
    users: dict[str, tuple[str, UserEntry]] = {}
    contexts: dict[str, tuple[str, Mapping[str, Any], bool]] = {}
    for source, doc in docs:
        for name, named_cluster in doc.clusters.items():
            clusters.setdefault(name, (source, named_cluster))
        for name, named_user in doc.users.items():
            users.setdefault(name, (source, named_user))
        for name, entry in doc.contexts.items():
            contexts.setdefault(name, (source, entry, name in doc.big_contexts))
    if len(docs) == 1:
        version: FileVersion = docs[0][1].version
    else:
        version = tuple(n for _, doc in docs for n in doc.version)
    folders = {source: os.path.dirname(source) for source, _ in docs}  # one str per file
    resolved: dict[str, ResolvedContext] = {}
    problems: list[DiscoveryProblem] = []
    for name, (source, entry, big) in contexts.items():

        def problem(reason: str, source: str = source, name: str = name) -> None:
            problems.append(DiscoveryProblem(source, name, reason))

        refused = name_problem(name, "context name", show=False)
        if refused is not None:
            problem(refused)
            continue
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
        cluster_source, cluster = found
        if big or cluster.too_big:
            problem(f"context or cluster {cluster_name!r} entry over {MAX_ENTRY_NODES} YAML nodes")
            continue
        server = cluster.server
        if not isinstance(server, str) or not server:
            problem(f"cluster {cluster_name!r} has no server")
            continue
        if _has_userinfo(server):
            # Go's client sends user:password@ of a URL as basic auth: a credential, which
            # the endpoint (a label, a log line, an API answer) must never carry.
            problem(
                f"cluster {cluster_name!r} has credentials in its server URL (user@ or "
                "user:password@): put them in the user entry; the URL is not shown"
            )
            continue
        unprintable = char_flaw(server)
        if unprintable is not None:
            problem(f"cluster {cluster_name!r} has a server URL that {unprintable}")
            continue
        base = folders[source]
        user_name = ctx.get("user")
        user: UserEntry | None = None
        user_source = source
        if user_name:  # no user at all is anonymous access: allowed, as kubectl does
            user_found = users.get(user_name) if isinstance(user_name, str) else None
            if user_found is None or user_found[1].not_a_mapping:
                problem(f"user {str(user_name)[:80]!r} is missing")
                continue
            user_source, user = user_found
            if user.too_big:
                problem(f"user {str(user_name)[:80]!r} entry over {MAX_ENTRY_NODES} YAML nodes")
                continue
        proxy_url = cluster.proxy_url
        if proxy_url is not None and not isinstance(proxy_url, str):
            problem(f"cluster {cluster_name!r} has a proxy-url that is not a string")
            continue
        auth = context_auth(
            cluster,
            cluster_name,
            user,
            str(user_name) if user is not None else None,
            base,
            cluster_dir=None if cluster_source == source else folders[cluster_source],
            user_dir=None if user_source == source else folders[user_source],
            context_entry=entry,
        )
        config = ContextConfig(source, name, version, auth, base)
        labels, label_problems = context_labels(entry, allowlist)
        for reason in label_problems:  # skipped and counted: the context stays
            problem(reason)
        resolved[name] = ResolvedContext(server, config, proxy_url or None, labels)
    return resolved, problems


def context_config(
    doc: Mapping[str, Any], context: str, source: str, version: FileVersion = (0, 0, 0, 0)
) -> ContextConfig:
    """The :class:`ContextConfig` of one context of a kubeconfig given as a dict.

    What discovery makes of that context in a file at ``source`` (tools and tests build
    contexts without a file). Raises ``KeyError`` for a context that is not usable.
    """
    resolved, problems = resolve_contexts([(source, document_of(doc, version))])
    if context not in resolved:
        raise KeyError(f"context {context!r}: {[p.reason for p in problems]}")
    return resolved[context].config
