"""One Secret of the management cluster -> the clusters it names, and its problems.

Platform teams keep their clusters' credentials as Secrets in a management cluster; the
list+watch of them (the API source) hands each Secret object, as the API returns it (a
JSON dict, ``data`` in base64), to :func:`read_secret` once per ``resourceVersion``.
Three kinds are recognised, in this order (a Secret is of the first kind it fits):

============================  =========================================  ======================
kind                          how it is recognised                       clusters
============================  =========================================  ======================
Argo CD cluster Secret        label ``argocd.argoproj.io/secret-type``   one: key ``name``, at
                              ``= cluster``                              key ``server``, as
                                                                         ``config`` says
                                                                         (``fleetwatch.discovery.argocd``)
Cluster API kubeconfig        type ``cluster.x-k8s.io/secret``, label    one: the label's
                              ``cluster.x-k8s.io/cluster-name: C``,      value, at the current
                              name ``C-kubeconfig``                      context of key
                                                                         ``value``
labelled by the user          ``--discovery.kubernetes.label-selector``  every context of every
                              (default ``fleetwatch.io/kubeconfig``)     key (keys in name
                                                                         order), as for files
============================  =========================================  ======================

Anything else is ignored (None): Cluster API's other Secrets of a cluster (``C-ca``,
``C-etcd``, ``C-sa``, ``C-proxy``, ``C-user-kubeconfig``) carry the same type and label,
and are read only if the user labels them.

**References.** Every cluster's ``kubeconfig_secret_ref`` and its config's ``source`` is
``secret://NAMESPACE/NAME`` (:func:`secret_ref`); a labelled Secret's always end in
``#KEY``, even with one key, so adding a second key renames nothing. Argo CD and Cluster
API Secrets hold one cluster at a known key: no ``#KEY``.

**Versions.** ``ContextConfig.version`` is a hash of the Secret's ``uid`` and
``resourceVersion`` (:func:`secret_version`): any change of the Secret, or a Secret
deleted and made again, is a new version, so the exporter's credential cache (keyed by
source, context and version) builds the new credentials and prunes the old ones.

**Same credentials as a file.** Kubeconfigs, and the one an Argo CD config says, go
through the kubeconfig parse (``fleetwatch.discovery.kubeconfig``) as a file does, so the same
``ContextAuth`` comes out; the exporter's credential code is unchanged, and embedded
credentials stay in memory. A Secret has no folder: plugins run in the exporter's own.

**Not probeable, listed.** A cluster whose auth form fleetwatch does not run is listed
with :attr:`~fleetwatch.discovery.clusters.Cluster.not_probeable` saying why, and no config: Argo
CD's
``awsAuthConfig`` and in-cluster server; a kubeconfig that names a file (``tokenFile``,
``certificate-authority``, ``client-certificate``, ``client-key``: a file of the
exporter's pod, not the Secret's, and a way to send its own service account token to any
server); an ``auth-provider`` (the kubernetes client would read and write files for it);
an exec plugin unless ``exec_plugins`` is True. Exec plugins are refused by default (the
``--discovery.kubernetes.exec-plugins`` flag turns them on, as Argo CD honours
``execProviderConfig``): whoever may write a Secret the source reads could otherwise run
a command in the exporter, with its service account.

**A version that cannot be read keeps the last good one** (:func:`with_last_good`), as a
file's does: a key whose content is no kubeconfig at all (empty, not base64, not YAML, not
a kubeconfig) or an Argo CD Secret no cluster can be made of keeps that key's (or that
Secret's) clusters of the last version that could be read, and its problems say so, until
a version can be read or the Secret, its key or its label is gone. Which sources could not
be read is :attr:`SecretClusters.unreadable`. A kubeconfig that parses is taken as it is,
as a file that held still is: one cut short that still parses cannot be told from a
smaller fleet (``fleetwatch.discovery.apisource.SecretReads`` says why no settle time applies).

**Names** (Argo CD's ``name``, the Cluster API label, a context) and servers follow
``fleetwatch.common.names``' rule: one that breaks it (a control or bidi character) is a problem.
**Labels**: a cluster keeps the allowlisted ones of its Secret and context
(``fleetwatch.discovery.clusterlabels``), the context's winning.

**Problems.** A Secret that cannot be read (a key missing or not base64, a ``config``
Argo CD would refuse, a kubeconfig that does not parse) is a
:class:`~fleetwatch.discovery.clusters.DiscoveryProblem` whose source is the reference, whose
context is the cluster's name when known (shards filter on it), and whose reason names
keys, never a value: nothing read from a Secret is in a problem, a ``repr`` or an
exception.

Pure: a dict in, plain data out; no I/O, no ``kubernetes`` client.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fleetwatch.common.names import char_flaw, name_problem
from fleetwatch.discovery import argocd
from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist, Labels, combined
from fleetwatch.discovery.clusters import SECRET_SCHEME, Cluster, ContextConfig, DiscoveryProblem
from fleetwatch.discovery.files import FileVersion, ReadError
from fleetwatch.discovery.kubeconfig import Document, document_of, parse_document, resolve_contexts
from fleetwatch.discovery.labels import LabelSelector
from fleetwatch.discovery.secretauth import refused as _refused
from fleetwatch.discovery.secretauth import without_folder as _without_folder

ARGOCD_LABEL = "argocd.argoproj.io/secret-type"
ARGOCD_CLUSTER = "cluster"
CAPI_TYPE = "cluster.x-k8s.io/secret"
CAPI_LABEL = "cluster.x-k8s.io/cluster-name"
CAPI_KEY = "value"
#: ``--discovery.kubernetes.label-selector``'s default
DEFAULT_SELECTOR = LabelSelector.parse("fleetwatch.io/kubeconfig")

Kind = Literal["argocd", "cluster-api", "labelled"]
NO_LABELS_KEPT: Labels = ()


def secret_ref(namespace: str, name: str, key: str | None = None) -> str:
    """``secret://NAMESPACE/NAME`` and, given a key, ``#KEY``."""
    ref = f"{SECRET_SCHEME}{namespace}/{name}"
    return ref if key is None else f"{ref}#{key}"


def parse_secret_ref(ref: str) -> tuple[str, str, str | None] | None:
    """``(namespace, name, key or None)`` of a :func:`secret_ref`; None for anything else."""
    if not ref.startswith(SECRET_SCHEME):
        return None
    path, hash_, key = ref[len(SECRET_SCHEME) :].partition("#")
    namespace, slash, name = path.partition("/")
    if not namespace or not slash or not name or "/" in name or (hash_ and not key):
        return None
    return namespace, name, key if hash_ else None


def secret_version(metadata: Mapping[str, Any]) -> FileVersion:
    """What changes whenever the Secret does (``resourceVersion``), or is made anew (``uid``).

    ``resourceVersion`` is opaque (not always a number), hence a hash, of the shape of a
    file's version (a tuple of ints).
    """
    text = f"{metadata.get('uid', '')}\0{metadata.get('resourceVersion', '')}"
    return (int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"),)


def kind_of(secret: Mapping[str, Any], selector: LabelSelector = DEFAULT_SELECTOR) -> Kind | None:
    """Which kind of Secret ``secret`` is (see the table above); None: not one of ours."""
    metadata = secret.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    if labels.get(ARGOCD_LABEL) == ARGOCD_CLUSTER:
        return "argocd"
    cluster = labels.get(CAPI_LABEL)
    if (
        secret.get("type") == CAPI_TYPE
        and cluster
        and metadata.get("name") == f"{cluster}-kubeconfig"
    ):
        return "cluster-api"
    return "labelled" if selector.matches(labels) else None


@dataclass(frozen=True, slots=True)
class SecretCluster:
    """A cluster a Secret names, and what its credentials are built from."""

    cluster: Cluster
    #: None when it cannot be probed (``cluster.not_probeable`` says why)
    config: ContextConfig | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class SecretShape:
    """A Secret as the CD mirror resolves a Flux ``spec.kubeConfig.secretRef`` against it
    (``reactor.cd.targets``): its kind and the names of its keys, never a value."""

    kind: Kind
    keys: frozenset[str]


@dataclass(frozen=True)
class SecretClusters:
    """What one Secret names: its clusters in order, and its problems."""

    namespace: str
    name: str
    kind: Kind
    version: FileVersion
    clusters: tuple[SecretCluster, ...] = ()
    problems: tuple[DiscoveryProblem, ...] = ()
    #: the sources (the Secret's reference, or one of its keys') whose content could not
    #: be read at all: no kubeconfig, or no Argo CD cluster (see :func:`with_last_good`)
    unreadable: frozenset[str] = frozenset()
    #: the names of its keys (``data``), whatever they hold
    keys: frozenset[str] = frozenset()

    @property
    def ref(self) -> str:
        return secret_ref(self.namespace, self.name)

    @property
    def shape(self) -> SecretShape:
        return SecretShape(self.kind, self.keys)


def read_secret(
    secret: Mapping[str, Any],
    selector: LabelSelector = DEFAULT_SELECTOR,
    *,
    exec_plugins: bool = False,
    allowlist: Allowlist = NO_LABELS,
) -> SecretClusters | None:
    """The clusters and problems of one Secret object; None when it is none of ours.

    ``selector``: which Secrets the user labels (``--discovery.kubernetes.label-selector``).
    ``exec_plugins``: whether a Secret may name an exec plugin for its cluster (see the
    module docstring). ``allowlist``: the labels each cluster keeps of the Secret's and
    its context's (``fleetwatch.discovery.clusterlabels``). Never raises for what the Secret holds.
    """
    kind = kind_of(secret, selector)
    if kind is None:
        return None
    metadata: Mapping[str, Any] = secret["metadata"]
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None  # not an object the API returns: nothing can be named after it
    reader = _Reader(namespace, name, secret_version(metadata), exec_plugins, allowlist)
    reader.labels, why = allowlist.pick(metadata.get("labels"), "the Secret's label")
    reader.problems.extend(DiscoveryProblem(reader.ref, None, reason) for reason in why)
    data = secret.get("data")
    if data is not None and not isinstance(data, Mapping):
        reader.problem("its data is not a mapping of keys")
        reader.unreadable.add(reader.ref)
    elif kind == "argocd":
        reader.argocd(data or {})
    elif kind == "cluster-api":
        reader.cluster_api(data or {}, str(metadata["labels"][CAPI_LABEL]))
    else:
        reader.labelled(data or {})
    return SecretClusters(
        namespace,
        name,
        kind,
        reader.version,
        tuple(reader.clusters),
        tuple(reader.problems),
        frozenset(reader.unreadable),
        frozenset(str(k) for k in data) if isinstance(data, Mapping) else frozenset(),
    )


#: What a problem of a source kept at its last good version says (:func:`with_last_good`).
KEPT = "its last good version is used until it can be read again"


def with_last_good(read: SecretClusters, last: SecretClusters) -> SecretClusters:
    """``read`` (a new version of a Secret) with the clusters that ``last`` (what its
    previous version gave) has of each source ``read`` could not read at all.

    The rule of files (``fleetwatch.discovery.scan``): a version that cannot be read keeps the last
    good one, and says so in its problems, until a version can be read or the Secret (or
    the key) is gone. ``last`` is what the previous version gave, itself kept or not, so
    a second unreadable version keeps the same clusters.
    """

    def unreadable(source: str) -> bool:
        return source in read.unreadable or source.partition("#")[0] in read.unreadable

    found = {c.cluster.kubeconfig_secret_ref for c in read.clusters}
    kept = [
        c
        for c in last.clusters
        if c.cluster.kubeconfig_secret_ref not in found
        and unreadable(c.cluster.kubeconfig_secret_ref)
    ]
    if not kept:
        return read
    sources = {c.cluster.kubeconfig_secret_ref for c in kept} | {read.ref}
    problems = tuple(
        dataclasses.replace(p, reason=f"{p.reason}; {KEPT}") if p.source in sources else p
        for p in read.problems
    )
    # By source, as read (a labelled Secret's keys in name order), each in its own order.
    clusters = sorted((*read.clusters, *kept), key=lambda c: c.cluster.kubeconfig_secret_ref)
    return dataclasses.replace(read, clusters=tuple(clusters), problems=problems)


class _Reader:
    """The clusters and problems of one Secret, gathered as its keys are read."""

    def __init__(
        self, namespace: str, name: str, version: FileVersion, exec: bool, allowlist: Allowlist
    ):
        self.namespace, self.name = namespace, name
        self.allowlist, self.labels = allowlist, NO_LABELS_KEPT
        self.ref = secret_ref(namespace, name)
        self.version = version
        self.exec_plugins = exec
        self.clusters: list[SecretCluster] = []
        self.problems: list[DiscoveryProblem] = []
        self.unreadable: set[str] = set()

    def problem(self, reason: str, context: str | None = None, source: str | None = None) -> None:
        self.problems.append(DiscoveryProblem(source or self.ref, context, reason))

    def decode(self, data: Mapping[str, Any], key: str, context: str | None = None) -> bytes | None:
        """The bytes of ``data[key]`` (None and a problem when it is not base64)."""
        try:
            return base64.b64decode(str(data[key]), validate=True)
        except (binascii.Error, ValueError):
            self.problem(f"key {key!r} is not base64", context)
            return None

    def text(self, data: Mapping[str, Any], key: str, context: str | None = None) -> str | None:
        """``data[key]`` as UTF-8 text; None (and a problem) when it is absent or empty."""
        raw = self.decode(data, key, context) if data.get(key) else b""
        if raw is None:
            return None
        if not raw:
            self.problem(f"no {key!r} key", context)
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.problem(f"key {key!r} is not UTF-8 text", context)
            return None

    # -- the kinds --

    def argocd(self, data: Mapping[str, Any]) -> None:
        if not self._argocd(data):
            self.unreadable.add(self.ref)

    def _argocd(self, data: Mapping[str, Any]) -> bool:
        """Read an Argo CD cluster Secret; False when no cluster can be made of it."""
        name = self.text(data, "name")
        if name is None:
            return False
        server = self.text(data, "server", name)
        if server is None:
            return False
        server = server.rstrip("/")  # as Argo CD reads it
        why = name_problem(name, "Argo CD cluster name (key 'name')", show=False)
        if why is not None or (why := char_flaw(server, "key 'server'")) is not None:
            self.problem(why, name)
            return False
        config_bytes = self.decode(data, "config", name) if data.get("config") else b""
        if config_bytes is None:
            return False
        try:
            config = argocd.parse_config(config_bytes)
            doc = argocd.kubeconfig(name, server, config, exec_plugins=self.exec_plugins)
        except argocd.ArgoConfigError as exc:
            self.problem(f"Argo CD cluster config: {exc}", name)
            return False
        except argocd.NotProbeable as exc:
            self.clusters.append(
                SecretCluster(Cluster(name, server, self.ref, name, None, str(exc), self.labels))
            )
            return True
        self.contexts(self.ref, document_of(doc, self.version))
        return True

    def cluster_api(self, data: Mapping[str, Any], cluster: str) -> None:
        why = name_problem(cluster, f"Cluster API cluster name (label {CAPI_LABEL!r})", show=False)
        if why is not None:
            self.problem(why, cluster)
            return
        if not data.get(CAPI_KEY):
            self.problem(f"no {CAPI_KEY!r} key (Cluster API keeps the kubeconfig there)", cluster)
            self.unreadable.add(self.ref)
            return
        doc = self.parse(data, CAPI_KEY, self.ref, cluster)
        if doc is None:
            return
        current = doc.current_context
        if not isinstance(current, str) or not current:
            self.problem("its kubeconfig has no current-context", cluster)
        elif current not in doc.contexts:
            self.problem("its kubeconfig's current-context names none of its contexts", cluster)
        else:
            self.contexts(self.ref, doc, only=current, name=cluster)

    def labelled(self, data: Mapping[str, Any]) -> None:
        if not data:
            self.problem("no keys: a labelled Secret holds kubeconfigs in its keys")
        for key in sorted(data):
            source = secret_ref(self.namespace, self.name, str(key))
            doc = self.parse(data, str(key), source)
            if doc is not None:
                self.contexts(source, doc)

    # -- kubeconfigs --

    def parse(
        self, data: Mapping[str, Any], key: str, source: str, context: str | None = None
    ) -> Document | None:
        """The kubeconfig of ``data[key]``, its problems noted (None: it is not one)."""
        raw = self.decode(data, key, context)
        if raw is None:
            self.unreadable.add(source)
            return None
        try:
            doc = parse_document(raw, self.version)
        except ReadError as exc:
            self.problem(exc.reason, context, source)
            self.unreadable.add(source)
            return None
        for reason in doc.problems:
            self.problem(reason, None, source)
        return doc

    def contexts(
        self, source: str, doc: Document, only: str | None = None, name: str | None = None
    ) -> None:
        """The clusters of ``doc``'s contexts (``only`` that one, called ``name``)."""
        resolved, problems = resolve_contexts([(source, doc)], self.allowlist)
        for p in problems:
            if only is None or p.context == only:
                self.problem(p.reason, name or p.context, source)
        for context, found in resolved.items():
            if only is not None and context != only:
                continue
            config = _without_folder(found.config)
            refused = _refused(config.auth, self.exec_plugins)
            labels = combined(self.labels, found.labels)  # the context's win
            cluster = Cluster(
                name or context, found.endpoint, source, context, found.proxy_url, refused, labels
            )
            self.clusters.append(SecretCluster(cluster, None if refused else config))
