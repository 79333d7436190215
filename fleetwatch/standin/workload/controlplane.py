"""kube-system as a kubeadm cluster shows it: nodes, static control-plane pods, CoreDNS.

kubeadm runs etcd, kube-apiserver, kube-scheduler and kube-controller-manager as static
pods on every control-plane node (labels ``component=<name>``, ``tier=control-plane``,
host network, so pod IP = node IP). By default it binds the scheduler's and the
controller-manager's metrics (``--bind-address``) and etcd's (``--listen-metrics-urls``)
to 127.0.0.1, which a Prometheus scraping node IPs cannot reach; kubeadm ``init`` on the
first node also schedules both CoreDNS replicas there. ``ControlPlane()`` reproduces
those defaults; ``ControlPlane.hardened()`` is the fixed cluster.

Every address is loopback (``127.<a>.<b>.<node>``, distinct per cluster): a real
Prometheus in the tests scrapes these targets, and no traffic may leave the machine.

Long because it renders kube-system as an API server does (pods, nodes,
label selectors, static pods' command lines) in every shape the checks must handle.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

#: Static pods of a kubeadm control-plane node, and the metrics port of each.
COMPONENTS: dict[str, int] = {
    "etcd": 2381,
    "kube-apiserver": 6443,
    "kube-controller-manager": 10257,
    "kube-scheduler": 10259,
}
#: Components whose metrics kubeadm binds to 127.0.0.1 unless told otherwise.
LOCALHOST_BY_DEFAULT = frozenset({"etcd", "kube-controller-manager", "kube-scheduler"})
KUBELET_VERSION = "v1.30.2"
IMAGES = {
    "etcd": "registry.k8s.io/etcd:3.5.12-0",
    "kube-apiserver": f"registry.k8s.io/kube-apiserver:{KUBELET_VERSION}",
    "kube-controller-manager": f"registry.k8s.io/kube-controller-manager:{KUBELET_VERSION}",
    "kube-scheduler": f"registry.k8s.io/kube-scheduler:{KUBELET_VERSION}",
    "coredns": "registry.k8s.io/coredns/coredns:v1.11.1",
}
_CREATED = "2026-01-05T09:00:00Z"


def _cp_names(count: int) -> tuple[str, ...]:
    return tuple(f"cp-{i}" for i in range(1, count + 1))


@dataclass(frozen=True)
class ControlPlane:
    """The kube-system topology one stand-in cluster reports (immutable; use ``with_*``)."""

    nodes: int = 3
    """Control-plane nodes, named ``cp-1`` ... (each runs the four static pods)."""
    workers: int = 0
    """Worker nodes, named ``worker-1`` ..."""
    localhost_bound: frozenset[str] = LOCALHOST_BY_DEFAULT
    """Components whose metrics listen on 127.0.0.1 only (kubeadm's default for three)."""
    etcd_not_ready: frozenset[str] = frozenset()
    """Nodes whose etcd pod is not Ready (a failed member)."""
    nodes_not_ready: frozenset[str] = frozenset()
    """Nodes whose own Ready condition is False."""
    coredns_nodes: tuple[str, ...] = field(default=("cp-1", "cp-1"))
    """Node of each CoreDNS replica; kubeadm init leaves both on the first node."""
    serve_metrics: bool = False
    """Really listen at the node addresses where the components would answer a scrape
    (see ``metrics.py``); off by default: it costs four sockets per control-plane node."""

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.workers < 0 or self.nodes + self.workers > 200:
            raise ValueError("a control plane needs 1 to 200 nodes, and workers >= 0")
        unknown = set(self.localhost_bound) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)}; known: {sorted(COMPONENTS)}")
        names = set(self.node_names)
        for what, given in (
            ("etcd_not_ready", set(self.etcd_not_ready) - set(self.control_plane_nodes)),
            ("nodes_not_ready", set(self.nodes_not_ready) - names),
            ("coredns_nodes", set(self.coredns_nodes) - names),
        ):
            if given:
                raise ValueError(f"{what} names unknown nodes {sorted(given)}")

    @classmethod
    def hardened(cls, nodes: int = 3, workers: int = 0) -> ControlPlane:
        """Metrics bound to 0.0.0.0 and CoreDNS spread over two nodes: nothing to alert on."""
        names = _cp_names(nodes) + tuple(f"worker-{i}" for i in range(1, workers + 1))
        return cls(
            nodes=nodes,
            workers=workers,
            localhost_bound=frozenset(),
            coredns_nodes=(names[0], names[1 % len(names)]),
        )

    @property
    def control_plane_nodes(self) -> tuple[str, ...]:
        return _cp_names(self.nodes)

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.control_plane_nodes + tuple(f"worker-{i}" for i in range(1, self.workers + 1))

    def with_etcd_ready(self, node: str, ready: bool) -> ControlPlane:
        changed = self.etcd_not_ready - {node} if ready else self.etcd_not_ready | {node}
        return replace(self, etcd_not_ready=frozenset(changed))

    def with_localhost_bound(self, component: str, bound: bool) -> ControlPlane:
        """``bound=False`` is the fix: the component's metrics listen on 0.0.0.0."""
        changed = (
            self.localhost_bound | {component} if bound else self.localhost_bound - {component}
        )
        return replace(self, localhost_bound=frozenset(changed))

    def with_coredns_nodes(self, *nodes: str) -> ControlPlane:
        return replace(self, coredns_nodes=tuple(nodes))


def node_ip(cluster_index: int, node_number: int) -> str:
    """Loopback address of node ``node_number`` (1-based) of the cluster at ``cluster_index``.

    127.0.x.x is left alone (127.0.0.1 serves everything else); 254 x 256 clusters get
    distinct addresses before they repeat.
    """
    return f"{_place(cluster_index).prefix}.{node_number}"


class _Place(NamedTuple):
    """What of a cluster's kube-system depends on its index: its addresses and machine ids."""

    prefix: str  #: ``127.<a>.<b>``: node ``n`` is ``<prefix>.<n>``
    hex8: str  #: the index as 8 hex digits (boot and system UUIDs)
    hex16: str  #: the index as 16 hex digits (machine ids)


def _place(cluster_index: int) -> _Place:
    prefix = f"127.{1 + (cluster_index // 256) % 254}.{cluster_index % 256}"
    return _Place(prefix, f"{cluster_index:08x}", f"{cluster_index:016x}")


#: Stand-ins rendered into a list body once, replaced by each cluster's own (``ListTemplate``).
#: No JSON string the stand-in writes holds "@@".
_MARKS = _Place("@@P@@", "@@H8@@", "@@H16@@")


def node_ips(plane: ControlPlane, cluster_index: int) -> dict[str, str]:
    """Node name -> its loopback InternalIP."""
    return _node_ips(plane, _place(cluster_index))


def _node_ips(plane: ControlPlane, place: _Place) -> dict[str, str]:
    return {name: f"{place.prefix}.{i}" for i, name in enumerate(plane.node_names, start=1)}


def _condition(kind: str, ready: bool) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True" if ready else "False",
        "lastProbeTime": None,  # type: ignore[dict-item]
        "lastTransitionTime": _CREATED,
    }


def _node_list(plane: ControlPlane, place: _Place, selector: str) -> dict[str, Any]:
    """``GET /api/v1/nodes?labelSelector=...`` (a real API server filters nodes too)."""
    items = []
    control = set(plane.control_plane_nodes)
    for number, (name, ip) in enumerate(_node_ips(plane, place).items(), start=1):
        labels = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        spec: dict[str, Any] = {}
        if name in control:
            labels["node-role.kubernetes.io/control-plane"] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
            spec["taints"] = [
                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
            ]
        ready = name not in plane.nodes_not_ready
        items.append(
            {
                "metadata": {"name": name, "labels": labels, "creationTimestamp": _CREATED},
                "spec": spec,
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": ip},
                        {"type": "Hostname", "address": name},
                    ],
                    "conditions": [_condition("Ready", ready)],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": f"{place.hex8}-0000-4000-8000-{number:012x}",
                        "containerRuntimeVersion": "containerd://1.7.18",
                        "kernelVersion": "6.1.0-21-amd64",
                        "kubeProxyVersion": KUBELET_VERSION,
                        "kubeletVersion": KUBELET_VERSION,
                        "machineID": f"{place.hex16}{number:016x}",
                        "operatingSystem": "linux",
                        "osImage": "Debian GNU/Linux 12 (bookworm)",
                        "systemUUID": f"{place.hex8}-0000-4000-8000-{number:012x}",
                    },
                },
            }
        )
    items = [n for n in items if _matches(n["metadata"]["labels"], parse_selector(selector))]
    return {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"},
        "items": items,
    }


def _command(component: str, node: str, ip: str, plane: ControlPlane) -> list[str]:
    """The container command kubeadm 1.30 writes into the static pod manifest."""
    local = component in plane.localhost_bound
    pki = "/etc/kubernetes/pki"
    if component == "etcd":
        peers = ",".join(
            f"{n}=https://{i}:2380"
            for n, i in zip(plane.control_plane_nodes, _cp_ips(plane, ip), strict=True)
        )
        return [
            "etcd",
            f"--advertise-client-urls=https://{ip}:2379",
            f"--cert-file={pki}/etcd/server.crt",
            "--client-cert-auth=true",
            "--data-dir=/var/lib/etcd",
            "--experimental-initial-corrupt-check=true",
            "--experimental-watch-progress-notify-interval=5s",
            f"--initial-advertise-peer-urls=https://{ip}:2380",
            f"--initial-cluster={peers}",
            f"--key-file={pki}/etcd/server.key",
            f"--listen-client-urls=https://127.0.0.1:2379,https://{ip}:2379",
            "--listen-metrics-urls=http://" + ("127.0.0.1" if local else "0.0.0.0") + ":2381",
            f"--listen-peer-urls=https://{ip}:2380",
            f"--name={node}",
            f"--peer-cert-file={pki}/etcd/peer.crt",
            "--peer-client-cert-auth=true",
            f"--peer-key-file={pki}/etcd/peer.key",
            f"--peer-trusted-ca-file={pki}/etcd/ca.crt",
            "--snapshot-count=10000",
            f"--trusted-ca-file={pki}/etcd/ca.crt",
        ]
    if component == "kube-apiserver":
        bind_flags = ["--bind-address=127.0.0.1"] if local else []
        return [
            "kube-apiserver",
            f"--advertise-address={ip}",
            *bind_flags,
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            f"--client-ca-file={pki}/ca.crt",
            "--enable-admission-plugins=NodeRestriction",
            "--enable-bootstrap-token-auth=true",
            f"--etcd-cafile={pki}/etcd/ca.crt",
            f"--etcd-certfile={pki}/apiserver-etcd-client.crt",
            f"--etcd-keyfile={pki}/apiserver-etcd-client.key",
            "--etcd-servers=https://127.0.0.1:2379",
            "--secure-port=6443",
            "--service-cluster-ip-range=127.96.0.0/12",
            f"--tls-cert-file={pki}/apiserver.crt",
            f"--tls-private-key-file={pki}/apiserver.key",
        ]
    conf = "/etc/kubernetes/" + (
        "scheduler.conf" if component == "kube-scheduler" else "controller-manager.conf"
    )
    bind = "--bind-address=" + ("127.0.0.1" if local else "0.0.0.0")
    if component == "kube-scheduler":
        return [
            "kube-scheduler",
            f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}",
            bind,
            f"--kubeconfig={conf}",
            "--leader-elect=true",
        ]
    return [
        "kube-controller-manager",
        "--allocate-node-cidrs=true",
        f"--authentication-kubeconfig={conf}",
        f"--authorization-kubeconfig={conf}",
        bind,
        f"--client-ca-file={pki}/ca.crt",
        "--cluster-cidr=127.244.0.0/16",
        "--cluster-name=kubernetes",
        f"--cluster-signing-cert-file={pki}/ca.crt",
        f"--cluster-signing-key-file={pki}/ca.key",
        "--controllers=*,bootstrapsigner,tokencleaner",
        f"--kubeconfig={conf}",
        "--leader-elect=true",
        f"--requestheader-client-ca-file={pki}/front-proxy-ca.crt",
        f"--root-ca-file={pki}/ca.crt",
        f"--service-account-private-key-file={pki}/sa.key",
        "--service-cluster-ip-range=127.96.0.0/12",
        "--use-service-account-credentials=true",
    ]


def _cp_ips(plane: ControlPlane, some_ip: str) -> list[str]:
    prefix = some_ip.rsplit(".", 1)[0]
    return [f"{prefix}.{i}" for i in range(1, plane.nodes + 1)]


def _pod(
    name: str,
    labels: dict[str, str],
    node: str,
    host_ip: str,
    pod_ip: str,
    ready: bool,
    command: list[str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container = labels.get("component", "coredns")
    image = IMAGES[container]
    return {
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": labels,
            "annotations": annotations or {},
            "creationTimestamp": _CREATED,
        },
        "spec": {
            "nodeName": node,
            "hostNetwork": pod_ip == host_ip,
            "containers": [{"name": container, "image": image, "command": command}],
        },
        "status": {
            "phase": "Running",
            "hostIP": host_ip,
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "conditions": [_condition("Ready", ready), _condition("ContainersReady", ready)],
            "containerStatuses": [
                {
                    "name": container,
                    "image": image,
                    "imageID": f"{image}@sha256:{'0' * 64}",
                    "ready": ready,
                    "restartCount": 0,
                }
            ],
        },
    }


def _all_pods(plane: ControlPlane, place: _Place) -> list[dict[str, Any]]:
    """Every kube-system pod the stand-in knows: static pods per control-plane node, CoreDNS."""
    ips = _node_ips(plane, place)
    pods = []
    for node in plane.control_plane_nodes:
        ip = ips[node]
        node_ready = node not in plane.nodes_not_ready
        for component in COMPONENTS:
            annotations = {"kubernetes.io/config.source": "file"}
            if component == "etcd":
                annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = (
                    f"https://{ip}:2379"
                )
            if component == "kube-apiserver":
                annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = (
                    f"{ip}:6443"
                )
            ready = node_ready and not (component == "etcd" and node in plane.etcd_not_ready)
            pods.append(
                _pod(
                    f"{component}-{node}",
                    {"component": component, "tier": "control-plane"},
                    node,
                    ip,
                    ip,
                    ready,
                    _command(component, node, ip, plane),
                    annotations,
                )
            )
    for i, node in enumerate(plane.coredns_nodes):
        # Pod addresses are loopback too (.201, .202, ...): nothing may leave the machine.
        pod_ip = ips[node].rsplit(".", 1)[0] + f".{201 + i % 50}"
        pods.append(
            _pod(
                f"coredns-7db6d8ff4d-{i:05d}",
                {"k8s-app": "kube-dns", "pod-template-hash": "7db6d8ff4d"},
                node,
                ips[node],
                pod_ip,
                node not in plane.nodes_not_ready,
                ["/coredns", "-conf", "/etc/coredns/Corefile"],
            )
        )
    return pods


def parse_selector(selector: str) -> list[tuple[str, str, str]]:
    """``a=b,c!=d`` -> ``[(a, "=", b), (c, "!=", d)]``; set-based selectors are refused."""
    requirements = []
    for part in filter(None, (p.strip() for p in selector.split(","))):
        for op in ("!=", "==", "="):
            key, found, value = part.partition(op)
            if found:
                break
        else:
            raise ValueError(
                f"unable to parse requirement {part!r}: the stand-in supports "
                "only equality selectors (k=v, k==v, k!=v)"
            )
        key, value = key.strip(), value.strip()
        if not key or " " in key or " " in value:
            raise ValueError(f"unable to parse requirement {part!r}")
        requirements.append((key, "!=" if op == "!=" else "=", value))
    return requirements


def pod_list(plane: ControlPlane, cluster_index: int, selector: str = "") -> dict[str, Any]:
    """``GET /api/v1/namespaces/kube-system/pods?labelSelector=...``."""
    return _pod_list(plane, _place(cluster_index), selector)


def _pod_list(plane: ControlPlane, place: _Place, selector: str) -> dict[str, Any]:
    requirements = parse_selector(selector)
    items = [p for p in _all_pods(plane, place) if _matches(p["metadata"]["labels"], requirements)]
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"},
        "items": items,
    }


def _matches(labels: dict[str, str], requirements: list[tuple[str, str, str]]) -> bool:
    """Equality selectors as the API server applies them (a missing label is ``!=`` any value)."""
    return all((labels.get(key) == value) == (op == "=") for key, op, value in requirements)


class ListTemplate(NamedTuple):
    """A list body with ``_MARKS`` in place of a cluster's own values, cut at the prefix.

    Rendered once per topology and selector; :meth:`render` joins in one cluster's
    addresses and ids, far cheaper than building and encoding the list, and nothing is
    kept per cluster.
    """

    parts: tuple[bytes, ...]  #: the body split where the address prefix goes
    hex_ids: bool  #: whether it holds machine ids too (node lists)

    def render(self, cluster_index: int) -> bytes:
        prefix, hex8, hex16 = _place_bytes(cluster_index)
        body = prefix.join(self.parts)
        if self.hex_ids:
            body = body.replace(b"@@H8@@", hex8).replace(b"@@H16@@", hex16)
        return body


@functools.cache
def _place_bytes(cluster_index: int) -> tuple[bytes, bytes, bytes]:
    place = _place(cluster_index)
    return place.prefix.encode(), place.hex8.encode(), place.hex16.encode()


@functools.lru_cache(maxsize=4096)
def list_template(kind: str, plane: ControlPlane, selector: str) -> ListTemplate:
    """The body of a node list (kind ``nodes``) or of ``pod_list`` (``pods``), to render.

    A real API server answers lists from its watch cache; the stand-in shares the
    benchmark's cores with the exporter it serves, so it builds and encodes a list once,
    not on every request. The planes are immutable, so a template is never stale.
    ``ValueError`` for a selector the stand-in does not take (never cached).
    """
    lister = _node_list if kind == "nodes" else _pod_list
    body = json.dumps(lister(plane, _MARKS, selector)).encode()
    return ListTemplate(tuple(body.split(_MARKS.prefix.encode())), b"@@H" in body)
