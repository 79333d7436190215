"""Control-plane scrape targets from the static pods' command lines, and kubeadm's trap.

kubeadm runs etcd, kube-apiserver, kube-scheduler and kube-controller-manager as static pods
in kube-system (labels ``component=<name>``, ``tier=control-plane``, host network). From
their command lines we learn each component's metrics port and whether it listens on
127.0.0.1 only (kubeadm's default for the scheduler, the controller-manager and etcd's
metrics): such a target is listed with ``localhost_only="true"`` so a relabel rule can drop
it, instead of Prometheus paging "scheduler down" for a port it cannot reach. Pure: pods
and nodes in, targets out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from exporter.controlplane.kubesystem import Node, Pod


@dataclass(frozen=True)
class ComponentSpec:
    """Where a control-plane component serves its metrics, and which flags say otherwise."""

    default_port: int
    scheme: str
    port_flag: str | None
    bind_flag: str | None


#: Metrics endpoints of the kubeadm static pods (kube-apiserver: its secure port).
COMPONENTS: dict[str, ComponentSpec] = {
    "kube-apiserver": ComponentSpec(6443, "https", "--secure-port", "--bind-address"),
    "kube-controller-manager": ComponentSpec(10257, "https", "--secure-port", "--bind-address"),
    "kube-scheduler": ComponentSpec(10259, "https", "--secure-port", "--bind-address"),
    "etcd": ComponentSpec(2381, "http", None, None),  # --listen-metrics-urls, see below
}


@dataclass(frozen=True)
class ComponentTarget:
    component: str
    node: str
    address: str
    """``host:port`` Prometheus should scrape."""
    scheme: str
    localhost_only: bool


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of ``flag`` in ``--flag=value`` or ``--flag value`` form, in order."""
    return _flag_values(argv, (flag,)).get(flag, [])


def _flag_values(argv: Sequence[str], flags: Iterable[str]) -> dict[str, list[str]]:
    """:func:`flag_values` of several flags in one pass over ``argv``.

    A kube-apiserver's command line has dozens of flags and the first read of a fleet
    reads four of them for every static pod: one pass, because a pass per flag would be
    most of the report's cost.
    """
    wanted = set(flags)
    out: dict[str, list[str]] = {}
    last = len(argv) - 1
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg.partition("=")
        if name not in wanted:
            continue
        if eq:
            out.setdefault(name, []).append(value)
        elif i < last:
            out.setdefault(name, []).append(argv[i + 1])
    return out


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in ("localhost", "127.0.0.1", "::1"):  # what kubeadm writes, without parsing
        return True
    if host in ("0.0.0.0", "::", ""):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def component_endpoint(component: str, argv: Sequence[str]) -> tuple[int, str, bool]:
    """(metrics port, scheme, bound to loopback only) from a static pod's command line.

    Go flags: the last occurrence wins. etcd serves metrics on ``--listen-metrics-urls``
    (kubeadm: ``http://127.0.0.1:2381``) and, without it, on its client URLs.
    """
    spec = COMPONENTS[component]
    if component == "etcd":
        flags = _flag_values(argv, ("--listen-metrics-urls", "--listen-client-urls"))
        urls_flag = flags.get("--listen-metrics-urls") or flags.get("--listen-client-urls")
        urls = [u.strip() for u in urls_flag[-1].split(",") if u.strip()] if urls_flag else []
        parsed = []
        for url in urls:
            try:
                parts = urlsplit(url)
                parsed.append((parts.hostname or "", parts.port, parts.scheme))
            except ValueError:
                continue
        if not parsed:
            return spec.default_port, spec.scheme, False
        reachable = [p for p in parsed if not is_loopback(p[0])]
        _host, port, scheme = (reachable or parsed)[0]
        return port or spec.default_port, scheme or spec.scheme, not reachable
    wanted = [f for f in (spec.port_flag, spec.bind_flag) if f is not None]
    flags = _flag_values(argv, wanted)
    port = spec.default_port
    if spec.port_flag is not None:
        ports = flags.get(spec.port_flag)
        if ports and ports[-1].isdigit() and 0 < int(ports[-1]) < 65536:
            port = int(ports[-1])
    binds = flags.get(spec.bind_flag, []) if spec.bind_flag is not None else []
    return port, spec.scheme, bool(binds) and is_loopback(binds[-1])


def control_plane_targets(
    pods: Iterable[Pod], nodes: Iterable[Node]
) -> tuple[ComponentTarget, ...]:
    """One target per control-plane static pod, at its node's InternalIP.

    The node object gives the address; a static pod runs on the host network, so its
    ``hostIP`` is the same address and serves when the node is not listed.
    """
    ips = {n.name: n.internal_ip for n in nodes if n.internal_ip}
    targets: list[ComponentTarget] = []
    for pod in pods:
        component = pod.labels.get("component", "")
        if component not in COMPONENTS or pod.deleting:
            continue
        ip = ips.get(pod.node) or pod.host_ip
        if not ip:
            continue
        port, scheme, local = component_endpoint(component, pod.argv)
        host = f"[{ip}]" if ":" in ip else ip
        targets.append(
            ComponentTarget(
                component=component,
                node=pod.node or pod.name,
                address=f"{host}:{port}",
                scheme=scheme,
                localhost_only=local,
            )
        )
    targets.sort(key=lambda t: (t.component, t.node))
    return tuple(targets)
