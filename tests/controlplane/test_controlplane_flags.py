"""Reading a static pod's command line: metrics port, scheme, and the localhost trap.

Every address here is loopback (127.0.0.0/8) but where the point is one that is not: those
are in 192.0.2.0/24, the range RFC 5737 keeps for documentation (nobody's network).
"""

from __future__ import annotations

import pytest

from exporter.controlplane.components import (
    component_endpoint,
    control_plane_targets,
    flag_values,
    is_loopback,
)
from exporter.controlplane.kubesystem import Node, Pod, coredns_spread, etcd_from_static_pods


@pytest.mark.parametrize(
    ("component", "argv", "expected"),
    [
        # kubeadm defaults
        ("kube-scheduler", ["kube-scheduler", "--bind-address=127.0.0.1"], (10259, "https", True)),
        ("kube-controller-manager", ["kcm", "--bind-address=127.0.0.1"], (10257, "https", True)),
        (
            "etcd",
            ["etcd", "--listen-metrics-urls=http://127.0.0.1:2381"],
            (2381, "http", True),
        ),
        ("kube-apiserver", ["kube-apiserver", "--secure-port=6443"], (6443, "https", False)),
        # the fix
        ("kube-scheduler", ["kube-scheduler", "--bind-address=0.0.0.0"], (10259, "https", False)),
        ("etcd", ["etcd", "--listen-metrics-urls=http://0.0.0.0:2381"], (2381, "http", False)),
        # flag forms, last occurrence wins (Go's flag package)
        ("kube-scheduler", ["s", "--bind-address", "127.0.0.1"], (10259, "https", True)),
        (
            "kube-scheduler",
            ["s", "--bind-address=127.0.0.1", "--bind-address=0.0.0.0"],
            (10259, "https", False),
        ),
        ("kube-scheduler", ["s", "--bind-address=localhost"], (10259, "https", True)),
        ("kube-scheduler", ["s", "--bind-address=::1"], (10259, "https", True)),
        ("kube-scheduler", ["s", "--bind-address=127.0.0.2"], (10259, "https", True)),
        ("kube-scheduler", ["s"], (10259, "https", False)),  # no flag: 0.0.0.0 by default
        ("kube-scheduler", ["s", "--secure-port=11259"], (11259, "https", False)),
        ("kube-scheduler", ["s", "--secure-port=nope"], (10259, "https", False)),
        ("kube-apiserver", ["a", "--secure-port=443"], (443, "https", False)),
        # etcd: one reachable URL is enough; without metrics URLs, the client URLs serve
        (
            "etcd",
            ["etcd", "--listen-metrics-urls=http://127.0.0.1:2381,http://192.0.2.5:2381"],
            (2381, "http", False),
        ),
        (
            "etcd",
            ["etcd", "--listen-client-urls=https://127.0.0.1:2379,https://192.0.2.5:2379"],
            (2379, "https", False),
        ),
        ("etcd", ["etcd", "--listen-client-urls=https://127.0.0.1:2379"], (2379, "https", True)),
        ("etcd", ["etcd"], (2381, "http", False)),
    ],
)
def test_component_endpoint(
    component: str, argv: list[str], expected: tuple[int, str, bool]
) -> None:
    assert component_endpoint(component, argv) == expected


def test_flag_values_does_not_match_prefixes() -> None:
    assert flag_values(["--bind-address-x=1", "--bind-address=2"], "--bind-address") == ["2"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("[::1]", True), ("LOCALHOST", True),
     ("0.0.0.0", False), ("192.0.2.1", False), ("127.0.0.1.example", False),
     ("cp-1.example", False), ("", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def pod(name: str, node: str, ip: str, **kw: object) -> Pod:
    fields: dict[str, object] = {
        "labels": {"component": "etcd", "tier": "control-plane"},
        "phase": "Running",
        "ready": True,
        "deleting": False,
        "argv": ("etcd", "--listen-metrics-urls=http://127.0.0.1:2381"),
    }
    fields.update(kw)
    return Pod(name=name, node=node, host_ip=ip, **fields)  # type: ignore[arg-type]


def test_targets_prefer_the_node_internal_ip_and_format_ipv6() -> None:
    pods = [pod("etcd-a", "a", "192.0.2.1"), pod("etcd-b", "b", "fd00::2")]
    nodes = [Node(name="a", internal_ip="127.0.0.1", control_plane=True)]
    targets = control_plane_targets(pods, nodes)
    assert [t.address for t in targets] == ["127.0.0.1:2381", "[fd00::2]:2381"]


def test_etcd_members_skip_pods_being_deleted_and_pending_ones_are_unhealthy() -> None:
    report = etcd_from_static_pods(
        [
            pod("etcd-a", "a", "127.0.0.1"),
            pod("etcd-b", "b", "127.0.0.2", phase="Pending", ready=False),
            pod("etcd-c", "c", "127.0.0.3", deleting=True),
        ]
    )
    assert report is not None
    assert [(m.name, m.healthy) for m in report.members] == [("a", True), ("b", False)]
    assert etcd_from_static_pods([]) is None  # managed control plane: nothing to say


def test_coredns_counts_running_scheduled_pods() -> None:
    dns = {"k8s-app": "kube-dns"}
    spread = coredns_spread(
        [
            pod("coredns-1", "a", "127.0.0.1", labels=dns),
            pod("coredns-2", "a", "127.0.0.1", labels=dns),
            pod("coredns-3", "", "", labels=dns, phase="Pending"),
        ]
    )
    assert spread is not None
    assert (spread.replicas, spread.nodes) == (2, 1)
    assert coredns_spread([pod("etcd-a", "a", "127.0.0.1")]) is None
