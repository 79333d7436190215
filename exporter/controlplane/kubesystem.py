"""kube-system as the API server lists it -> pods and nodes, and what they say, pure.

The control-plane check (``exporter.controlplane.check``) reads three lists: the control-plane
static pods (``tier=control-plane``), the CoreDNS pods (``k8s-app=kube-dns``) and the
control-plane nodes. They are parsed here once into :class:`Pod` and :class:`Node`;
malformed items are skipped (the API server is not ours). From them:

- :func:`etcd_from_static_pods`: kubeadm runs etcd as a static pod per control-plane node
  (label ``component=etcd``), so etcd's members and their health are visible without
  reaching etcd itself;
- :func:`coredns_spread`: how many CoreDNS replicas run and on how many nodes (two
  replicas on one node are one node failure away from a cluster without DNS).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from exporter.controlplane.quorum import EtcdMember, EtcdReport

CONTROL_PLANE_NODE_LABELS = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)


@dataclass(frozen=True)
class Pod:
    name: str
    labels: Mapping[str, str]
    node: str
    host_ip: str
    phase: str
    ready: bool
    deleting: bool
    argv: tuple[str, ...]
    """Command and args of the first container: the flags kubeadm wrote into the manifest."""


@dataclass(frozen=True)
class Node:
    name: str
    internal_ip: str | None
    control_plane: bool


def parse_pods(body: Any) -> tuple[Pod, ...]:
    """A ``PodList`` -> pods; malformed items are skipped (the API server is not ours)."""
    pods: list[Pod] = []
    for item in _items(body):
        meta, spec, status = (
            _dict(item.get("metadata")),
            _dict(item.get("spec")),
            _dict(item.get("status")),
        )
        containers = spec.get("containers")
        first = _dict(containers[0]) if isinstance(containers, list) and containers else {}
        argv = [*_strings(first.get("command")), *_strings(first.get("args"))]
        pods.append(
            Pod(
                name=str(meta.get("name") or ""),
                labels={str(k): str(v) for k, v in _dict(meta.get("labels")).items()},
                node=str(spec.get("nodeName") or ""),
                host_ip=str(status.get("hostIP") or ""),
                phase=str(status.get("phase") or ""),
                ready=_condition_true(status, "Ready"),
                deleting=meta.get("deletionTimestamp") is not None,
                argv=tuple(argv),
            )
        )
    return tuple(pods)


def parse_nodes(body: Any) -> tuple[Node, ...]:
    nodes: list[Node] = []
    for item in _items(body):
        meta, status = _dict(item.get("metadata")), _dict(item.get("status"))
        labels = _dict(meta.get("labels"))
        addresses = status.get("addresses")
        internal = next(
            (
                str(a.get("address"))
                for a in (addresses if isinstance(addresses, list) else [])
                if isinstance(a, dict) and a.get("type") == "InternalIP" and a.get("address")
            ),
            None,
        )
        nodes.append(
            Node(
                name=str(meta.get("name") or ""),
                internal_ip=internal,
                control_plane=any(label in labels for label in CONTROL_PLANE_NODE_LABELS),
            )
        )
    return tuple(nodes)


def etcd_from_static_pods(pods: Iterable[Pod]) -> EtcdReport | None:
    """One member per etcd static pod, healthy when Ready; None when there is none.

    No etcd pod means etcd is not ours to see (managed control planes, external etcd), not
    that it is gone: nothing is published rather than "0 members, quorum lost".
    The member is named after its node, as kubeadm names etcd members.
    """
    members = tuple(
        EtcdMember(name=p.node or p.name, healthy=p.ready and p.phase == "Running")
        for p in sorted(pods, key=lambda p: (p.node, p.name))
        if p.labels.get("component") == "etcd" and not p.deleting
    )
    if not members:
        return None
    return EtcdReport(source="apiserver", members=members, has_leader=None)


@dataclass(frozen=True)
class KubeSystem:
    pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class CoreDNSSpread:
    replicas: int
    """Running, scheduled CoreDNS pods (label k8s-app=kube-dns)."""
    nodes: int
    """Distinct nodes they run on: 1 with 2 replicas is the single point of failure."""


def coredns_spread(pods: Iterable[Pod]) -> CoreDNSSpread | None:
    dns = [
        p
        for p in pods
        if p.labels.get("k8s-app") == "kube-dns"
        and p.phase == "Running"
        and p.node
        and not p.deleting
    ]
    seen = [p for p in pods if p.labels.get("k8s-app") == "kube-dns"]
    if not seen:
        return None  # no CoreDNS of kubeadm's labelling here: nothing to say
    return CoreDNSSpread(replicas=len(dns), nodes=len({p.node for p in dns}))


def _items(body: Any) -> list[dict[str, Any]]:
    items = body.get("items") if isinstance(body, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    conditions = status.get("conditions")
    return any(
        isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )
