"""The resources the management cluster serves, and the discovery documents naming them.

One table (:data:`KINDS`) says what each resource is (group, version, plural, kind, scope,
short names, whether it is a custom resource with a ``status`` subresource); routing,
validation, errors and discovery all read it. Discovery is the legacy, unaggregated kind
(``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``): kubectl 1.32 asks for the
aggregated ``apidiscovery.k8s.io/v2`` documents first and, answered with plain
``application/json``, falls back to these, as it does against servers before 1.26.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwatch.standin.management import events, validation
from fleetwatch.standin.management.status import Resource
from fleetwatch.standin.management.validation import Validator

#: Verbs of every resource here (``deletecollection`` is not served).
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Kind:
    """One served resource."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    validate: Validator
    short_names: tuple[str, ...] = ()
    #: A custom resource: ``generation`` bumped on spec changes, no unconditional update,
    #: no strategic merge patch (as the apiextensions server treats every CR).
    custom: bool = False
    #: ``status`` is a subresource: writes to the object keep the old status.
    status_subresource: bool = False
    #: Top-level fields besides apiVersion, kind and metadata; others are unknown.
    fields: tuple[str, ...] = ("spec", "status")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def resource(self) -> Resource:
        return Resource(self.plural, self.group, self.kind)

    @property
    def key(self) -> str:
        """``secrets`` or ``kustomizations.kustomize.toolkit.fluxcd.io``, as in request counts."""
        return self.resource.qualified


KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "namespaces", "Namespace", False, validation.validate_namespace, ("ns",)),
    Kind(
        "",
        "v1",
        "secrets",
        "Secret",
        True,
        validation.validate_secret,
        fields=("data", "stringData", "type", "immutable"),
    ),
    Kind(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        True,
        validation.validate_lease,
        fields=("spec",),
    ),
    Kind(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "kustomizations",
        "Kustomization",
        True,
        validation.validate_kustomization,
        ("ks",),
        custom=True,
        status_subresource=True,
    ),
    Kind(
        "helm.toolkit.fluxcd.io",
        "v2",
        "helmreleases",
        "HelmRelease",
        True,
        validation.validate_helmrelease,
        ("hr",),
        custom=True,
        status_subresource=True,
    ),
    Kind(
        "argoproj.io",
        "v1alpha1",
        "applications",
        "Application",
        True,
        validation.validate_application,
        ("app", "apps"),
        custom=True,
    ),
    Kind(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        events.validate_event,
        ("ev",),
        fields=(
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ),
    ),
    Kind(
        "",
        "v1",
        "events",
        "Event",
        True,
        events.validate_core_event,
        ("ev",),
        fields=(
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ),
    ),
)

BY_PATH: dict[tuple[str, str, str], Kind] = {(k.group, k.version, k.plural): k for k in KINDS}
BY_API_KIND: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in KINDS}
NAMESPACES = BY_PATH[("", "v1", "namespaces")]
SECRETS = BY_PATH[("", "v1", "secrets")]
#: The Events the reactor writes, and the core view kubectl reads (``events.py``).
EVENTS = BY_PATH[("events.k8s.io", "v1", "events")]
CORE_EVENTS = BY_PATH[("", "v1", "events")]


def group_versions() -> dict[str, list[str]]:
    """Versions of each group ("" the core group), in table order."""
    out: dict[str, list[str]] = {}
    for kind in KINDS:
        versions = out.setdefault(kind.group, [])
        if kind.version not in versions:
            versions.append(kind.version)
    return out


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list() -> dict[str, Any]:
    """``/apis``: every named group."""
    groups = [_group(name, v) for name, v in group_versions().items() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str) -> dict[str, Any] | None:
    """``/apis/<group>``, or None for a group not served."""
    versions = group_versions().get(name)
    if not name or versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``, or None for a version not served."""
    kinds = [k for k in KINDS if k.group == group and k.version == version]
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for kind in kinds:
        entry: dict[str, Any] = {
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": list(VERBS),
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        resources.append(entry)
        if kind.status_subresource:
            resources.append(
                {
                    "name": f"{kind.plural}/status",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    body: dict[str, Any] = {"kind": "APIResourceList", "groupVersion": kinds[0].api_version}
    if group:
        body["apiVersion"] = "v1"
    body["resources"] = resources
    return body
