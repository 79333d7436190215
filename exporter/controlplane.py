"""Control plane of one cluster seen through its API server: etcd members, scrape targets,
kubeadm's localhost-bind trap and CoreDNS spread; and the per-cluster check that publishes them.

kubeadm runs etcd, kube-apiserver, kube-scheduler and kube-controller-manager as static pods
in kube-system (labels ``component=<name>``, ``tier=control-plane``, host network). From
their command lines we learn each component's metrics port and whether it listens on
127.0.0.1 only (kubeadm's default for the scheduler, the controller-manager and etcd's
metrics): such a target is listed with ``localhost_only="true"`` so the README's relabel
rule drops it, instead of Prometheus paging "scheduler down" for a port it cannot reach.

:class:`ControlPlaneCheck` is the exporter's extension seam (``exporter.checks``); it
publishes, per cluster::

    fleetwatch_etcd_members{cluster="prod"} 3
    fleetwatch_etcd_members_healthy{cluster="prod"} 2
    fleetwatch_etcd_quorum_size{cluster="prod"} 2
    fleetwatch_etcd_quorum_state{cluster="prod",state="no_fault_tolerance"} 1
    fleetwatch_etcd_member_healthy{cluster="prod",member="cp-2"} 0
    fleetwatch_controlplane_localhost_only{cluster="prod",component="kube-scheduler",node="cp-1"} 1
    fleetwatch_coredns_replicas{cluster="prod"} 2
    fleetwatch_coredns_nodes{cluster="prod"} 1

and the ``/sd/control-plane`` target groups (one per component and node).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from exporter.checks import CheckResult, MetricFamily, Sample, TargetGroup
from exporter.config import EtcdConfig, ExporterConfig
from exporter.discovery import Cluster
from exporter.etcd import EtcdMember, EtcdReport, QuorumState, build_ssl_context, probe_etcd
from exporter.probe import ApiClient, ApiError, ProbeResult

log = logging.getLogger(__name__)

PODS_PATH = "/api/v1/namespaces/kube-system/pods"
NODES_PATH = "/api/v1/nodes"
#: Label selectors keep the answers small: kube-system of a big cluster holds a CNI and a
#: kube-proxy pod per node, and the node list can be megabytes.
STATIC_POD_SELECTOR = "tier=control-plane"
COREDNS_SELECTOR = "k8s-app=kube-dns"
CONTROL_PLANE_NODE_LABELS = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)


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


# --- kube-system, parsed once --------------------------------------------------------------


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


# --- etcd from the static pods ---------------------------------------------------------------


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


# --- control-plane targets and the localhost trap ---------------------------------------------


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
    values: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1 :])
        elif arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
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
        urls_flag = flag_values(argv, "--listen-metrics-urls") or flag_values(
            argv, "--listen-client-urls"
        )
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
    port = spec.default_port
    if spec.port_flag is not None:
        ports = flag_values(argv, spec.port_flag)
        if ports and ports[-1].isdigit() and 0 < int(ports[-1]) < 65536:
            port = int(ports[-1])
    binds = flag_values(argv, spec.bind_flag) if spec.bind_flag is not None else []
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


# --- CoreDNS ----------------------------------------------------------------------------------


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


# --- the report and its metrics -----------------------------------------------------------------


@dataclass(frozen=True)
class ControlPlaneReport:
    etcd: EtcdReport | None
    targets: tuple[ComponentTarget, ...]
    coredns: CoreDNSSpread | None


def _family(name: str, help_text: str) -> MetricFamily:
    return MetricFamily(name=name, type="gauge", help=help_text)


FAMILIES: tuple[MetricFamily, ...] = (
    _family("fleetwatch_etcd_members", "etcd members of the cluster."),
    _family("fleetwatch_etcd_members_healthy", "etcd members that answer healthy (or are Ready)."),
    _family("fleetwatch_etcd_quorum_size", "Members needed for quorum: floor(members/2)+1."),
    _family("fleetwatch_etcd_has_leader", "1 if an etcd member reports a leader (direct source)."),
    _family("fleetwatch_etcd_member_healthy", "1 if this etcd member is healthy."),
    _family("fleetwatch_etcd_db_size_bytes", "Size of this etcd member's database in bytes."),
    _family("fleetwatch_etcd_raft_term", "Highest raft term the members report; +1 per election."),
    _family(
        "fleetwatch_etcd_quorum_state",
        "1 on the current quorum state: healthy, no_fault_tolerance or lost.",
    ),
    _family(
        "fleetwatch_etcd_source_info",
        "Where the etcd series come from: apiserver (static pods) or direct (etcd itself).",
    ),
    _family(
        "fleetwatch_controlplane_localhost_only",
        "1 when the component serves its metrics on 127.0.0.1 only (kubeadm's default).",
    ),
    _family("fleetwatch_coredns_replicas", "Running CoreDNS pods."),
    _family("fleetwatch_coredns_nodes", "Distinct nodes the running CoreDNS pods are on."),
)


def report_samples(report: ControlPlaneReport) -> tuple[Sample, ...]:
    """The samples of one cluster (the exposition adds the ``cluster`` label)."""
    out: list[Sample] = []
    etcd = report.etcd
    if etcd is not None:
        q = etcd.quorum
        out += [
            Sample("fleetwatch_etcd_members", q.members),
            Sample("fleetwatch_etcd_members_healthy", q.healthy),
            Sample("fleetwatch_etcd_quorum_size", q.size),
            Sample("fleetwatch_etcd_source_info", 1, {"source": etcd.source}),
        ]
        out += [
            Sample("fleetwatch_etcd_quorum_state", 1 if q.state is s else 0, {"state": s.value})
            for s in QuorumState
        ]
        if etcd.has_leader is not None:
            out.append(Sample("fleetwatch_etcd_has_leader", 1 if etcd.has_leader else 0))
        if etcd.raft_term is not None:
            out.append(Sample("fleetwatch_etcd_raft_term", etcd.raft_term))
        for m in etcd.members:
            out.append(
                Sample("fleetwatch_etcd_member_healthy", 1 if m.healthy else 0, {"member": m.name})
            )
            if m.db_size_bytes is not None:
                out.append(
                    Sample("fleetwatch_etcd_db_size_bytes", m.db_size_bytes, {"member": m.name})
                )
    for t in report.targets:
        out.append(
            Sample(
                "fleetwatch_controlplane_localhost_only",
                1 if t.localhost_only else 0,
                {"component": t.component, "node": t.node},
            )
        )
    if report.coredns is not None:
        out += [
            Sample("fleetwatch_coredns_replicas", report.coredns.replicas),
            Sample("fleetwatch_coredns_nodes", report.coredns.nodes),
        ]
    return tuple(out)


def target_groups(targets: Iterable[ComponentTarget]) -> tuple[TargetGroup, ...]:
    """HTTP SD groups, one per target (labels differ by node); ``cluster`` is added for us.

    ``__scheme__`` tells Prometheus to use https for the scheduler, the controller-manager
    and the API server; users still need credentials for those (see the README).
    """
    groups = []
    for t in targets:
        labels = {"component": t.component, "node": t.node, "__scheme__": t.scheme}
        if t.localhost_only:
            labels["localhost_only"] = "true"
        groups.append(TargetGroup(targets=(t.address,), labels=labels))
    return tuple(groups)


# --- the check -----------------------------------------------------------------------------------


class KubeGet(Protocol):
    async def get_json(self, path: str, timeout: float) -> Any: ...  # noqa: ASYNC109


@dataclass(frozen=True)
class KubeSystem:
    pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]


async def read_kube_system(api: KubeGet, timeout_seconds: float) -> KubeSystem:
    """The static pods, the CoreDNS pods and the control-plane nodes: three small reads.

    The pods are required (an ``ApiError`` propagates); the nodes only refine addresses,
    so credentials without ``list nodes`` still get everything, from the pods' hostIP.
    The reads go one after another on purpose: together they would open three TLS
    connections per cluster, and at 10,000 clusters the exporter ran out of descriptors
    (bench/RESULTS.md); one after another they share the probe's kept-alive connection.
    """

    async def nodes() -> Any:
        path = f"{NODES_PATH}?labelSelector={quote(CONTROL_PLANE_NODE_LABELS[0] + '=')}"
        try:
            return await api.get_json(path, timeout_seconds)
        except ApiError:
            return None

    pods = f"{PODS_PATH}?labelSelector="
    static = await api.get_json(pods + quote(STATIC_POD_SELECTOR), timeout_seconds)
    dns = await api.get_json(pods + quote(COREDNS_SELECTOR), timeout_seconds)
    node_list = await nodes()
    return KubeSystem(pods=parse_pods(static) + parse_pods(dns), nodes=parse_nodes(node_list))


def report_from_kube_system(kube: KubeSystem) -> ControlPlaneReport:
    static = [p for p in kube.pods if p.labels.get("component") in COMPONENTS]
    return ControlPlaneReport(
        etcd=etcd_from_static_pods(static),
        targets=control_plane_targets(static, kube.nodes),
        coredns=coredns_spread(kube.pods),
    )


class ControlPlaneCheck:
    """The exporter check: kube-system through the API server, etcd directly when configured.

    When the API server does not answer, the last targets seen for that cluster are still
    served on ``/sd/control-plane`` (that is when scraping etcd matters most), and etcd is
    still asked directly if the config file says how.
    """

    name = "controlplane"
    families: Sequence[MetricFamily] = FAMILIES

    def __init__(self, config: ExporterConfig | None = None, request_timeout: float = 5.0) -> None:
        self.config = config or ExporterConfig()
        self.request_timeout = request_timeout
        self._last_targets: dict[str, tuple[ComponentTarget, ...]] = {}
        self._tls: dict[str, TlsState] = {}

    async def run(self, cluster: Cluster, api: ApiClient, probe: ProbeResult) -> CheckResult | None:
        etcd_config = self.config.etcd_for(cluster.name)
        kube_task = self._kube(cluster, api) if probe.success else _none()
        direct_task = self._direct(cluster.name, api, etcd_config) if etcd_config else _none()
        kube_report, direct = await asyncio.gather(kube_task, direct_task)
        if kube_report is not None:
            self._last_targets[cluster.name] = kube_report.targets
        targets = self._last_targets.get(cluster.name, ())
        etcd = direct if direct is not None else (kube_report.etcd if kube_report else None)
        report = ControlPlaneReport(
            etcd=etcd,
            targets=targets,
            coredns=kube_report.coredns if kube_report else None,
        )
        if kube_report is None and etcd is None and not targets:
            return None
        return CheckResult(samples=report_samples(report), targets=target_groups(targets))

    async def _kube(self, cluster: Cluster, api: ApiClient) -> ControlPlaneReport | None:
        try:
            return report_from_kube_system(await read_kube_system(api, self.request_timeout))
        except ApiError as exc:
            log.info("cluster %s: kube-system not readable: %s", cluster.name, exc.reason)
            return None

    async def _direct(self, cluster: str, api: ApiClient, config: EtcdConfig) -> EtcdReport | None:
        previous = self._tls.get(cluster)
        tls = await asyncio.to_thread(load_tls, config, previous)
        self._tls[cluster] = tls
        if tls.error is not None:
            if tls is not previous:
                # By error type only: the files' content never reaches a log line.
                log.warning(
                    "cluster %s: etcd TLS files unusable (%s); using the API server's view",
                    cluster,
                    tls.error,
                )
            return None
        return await probe_etcd(api.session, config, tls.context)


@dataclass(frozen=True)
class TlsState:
    """The TLS context of one cluster's etcd, and the file stamps it was built from."""

    stamp: tuple[tuple[int, int] | None, ...]
    context: ssl.SSLContext | None
    error: str | None = None
    """Exception type name when the files could not be loaded."""


def _stamp(config: EtcdConfig) -> tuple[tuple[int, int] | None, ...]:
    stamps: list[tuple[int, int] | None] = []
    for path in (config.ca_file, config.cert_file, config.key_file):
        if path is None:
            stamps.append(None)
            continue
        try:
            st = path.stat()
            stamps.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((-1, -1))
    return tuple(stamps)


def load_tls(config: EtcdConfig, previous: TlsState | None) -> TlsState:
    """``previous`` while the CA/certificate/key files are unchanged, else a fresh context.

    Blocking (stat, file reads): run it in a thread. Rebuilding on change picks up a
    rotated client certificate without a restart, and a fixed file after a broken one.
    """
    stamp = _stamp(config)
    if previous is not None and previous.stamp == stamp:
        return previous
    try:
        return TlsState(stamp=stamp, context=build_ssl_context(config))
    except (OSError, ssl.SSLError, ValueError) as exc:
        return TlsState(stamp=stamp, context=None, error=type(exc).__name__)


async def _none() -> None:
    return None


# --- small parsing helpers ---------------------------------------------------------------


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
