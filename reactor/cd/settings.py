"""``--cd.*``: which CD objects the reactor mirrors and acts on, and how.

==========================  ===========  =================================================
flag                        default      meaning
==========================  ===========  =================================================
``--cd.flux``               off          mirror Flux ``Kustomization`` and ``HelmRelease``
                                         objects, pause and resume them
``--cd.argocd``             off          the same for Argo CD ``Application`` objects
``--cd.argocd.pause``       application  where Argo CD's pause goes: on each ``Application``,
                                         or ``cluster-secret``: once per cluster, on its Argo
                                         CD cluster Secret (honoured by Argo CD 3.4.0 and
                                         later only: ``reactor.cd.clustersecrets``)
``--cd.resync-interval``    60s          every interval, every object is checked against
                                         the store again (a pause its owner undid, an
                                         action an API error stopped)
``--cd.dry-run``            off          decide, log and count, and write nothing: no
                                         store row, no object, no Event, no Lease
``--cd.kubeconfig``         (see right)  the management cluster's kubeconfig; default: the
                                         pod's service account, else ``KUBECONFIG``
``--cd.leader-election``    on           replicas act one at a time, by a Lease of the
                                         management cluster (``reactor.cd.lease``); off:
                                         this replica acts alone (one replica only)
``--cd.leader-election.     (see right)  the Lease's namespace; default: the pod's, else
namespace``                              ``default``
``--cd.leader-election.     fleetwatch-  the Lease's name
lease-name``                reactor-cd
``--cd.leader-election.     15s          a dead replica's hand-over time; the holder stops
lease-duration``                         acting after two thirds of it without renewal
==========================  ===========  =================================================

Neither ``--cd.flux`` nor ``--cd.argocd``: no CD integration at all (nothing is listed).

With ``cluster-secret``, the Argo CD cluster Secrets are watched where discovery reads
Secrets (``--discovery.kubernetes.namespace``, every namespace without it): the clusters
the Applications resolve to are the ones discovery found there, and its RBAC already lets
the reactor list them.
A dry run takes no part in leader election: it writes nothing to the management cluster,
not even a Lease, so a dry run beside acting replicas never takes their turn.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.kube.informer import BESIDE_REQUESTS, InformerSettings
from reactor.cd.lease import DEFAULT_LEASE_DURATION_S, DEFAULT_LEASE_NAME, LeaderElection
from reactor.cd.objects import APPLICATION, HELMRELEASE, KUSTOMIZATION, CdKind

DEFAULT_RESYNC_INTERVAL_S = 60.0

#: ``--cd.argocd.pause``: on each Application, or on the cluster's Argo CD cluster Secret.
PAUSE_APPLICATION = "application"
PAUSE_CLUSTER_SECRET = "cluster-secret"
ARGOCD_PAUSES = (PAUSE_APPLICATION, PAUSE_CLUSTER_SECRET)


@dataclass(frozen=True)
class CdSettings:
    """The CD integration's settings (module docstring)."""

    flux: bool = False
    """Mirror and act on Flux Kustomizations and HelmReleases."""
    argocd: bool = False
    """Mirror and act on Argo CD Applications."""
    argocd_pause: str = PAUSE_APPLICATION
    """Where Argo CD is paused: each Application, or each cluster's Argo CD cluster Secret
    (one patch per cluster; Argo CD 3.4.0 and later honour it there)."""
    secret_namespaces: tuple[str, ...] = ()
    """With ``cluster-secret``: the namespaces whose Argo CD cluster Secrets are watched
    (discovery's ``--discovery.kubernetes.namespace``); empty: every namespace."""
    resync_interval_s: float = DEFAULT_RESYNC_INTERVAL_S
    """Seconds between two checks of every object; bounds how long a pause an owner undid,
    or a resume an API error stopped, goes unnoticed."""
    dry_run: bool = False
    """Log and count what would be paused or resumed; write nothing: the mirror is
    previewed in memory (``reactor.cd.mirror.preview``), no store row, no object, no
    Event, no Lease."""
    kubeconfig: str | None = None
    """The management cluster's kubeconfig; None: in-cluster, then ``KUBECONFIG``."""
    patches_in_flight: int = 16
    """Patches sent at once: an outage of a cluster with 1,000 objects is 1,000 patches,
    which must not wait for each other nor open 1,000 connections."""
    request_timeout_s: float = 10.0
    """Longest wait for one patch (or list page)."""
    informer: InformerSettings = BESIDE_REQUESTS
    """How the list+watch of the objects paces itself: as a process answering requests."""
    process: bool = True
    """List and watch the objects in a process of their own (``reactor.cd.objectchild``);
    False (``--no-cd.process``): an informer in this process."""
    leader_election: LeaderElection | None = field(default_factory=LeaderElection)
    """The Lease that makes replicas act one at a time; None: this replica acts alone."""

    @property
    def enabled(self) -> bool:
        return self.flux or self.argocd

    @property
    def pause_cluster_secrets(self) -> bool:
        """Argo CD is paused on its cluster Secrets, not on each Application."""
        return self.argocd and self.argocd_pause == PAUSE_CLUSTER_SECRET

    @property
    def kinds(self) -> tuple[CdKind, ...]:
        flux = (KUSTOMIZATION, HELMRELEASE) if self.flux else ()
        return (*flux, *((APPLICATION,) if self.argocd else ()))


def add_cd_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cd.flux",
        dest="cd_flux",
        action="store_true",
        help="mirror the management cluster's Flux Kustomizations and HelmReleases as apps of "
        "their clusters (spec.kubeConfig.secretRef); suspend them when an outage degrades "
        "them, resume exactly those when it ends",
    )
    parser.add_argument(
        "--cd.argocd",
        dest="cd_argocd",
        action="store_true",
        help="the same for Argo CD Applications (spec.destination), paused with the "
        "annotation argocd.argoproj.io/skip-reconcile",
    )
    parser.add_argument(
        "--cd.argocd.pause",
        dest="cd_argocd_pause",
        choices=ARGOCD_PAUSES,
        default=None,
        help="where Argo CD's skip-reconcile annotation goes: on each Application "
        "(default), or cluster-secret: once per cluster, on its Argo CD cluster Secret "
        "(honoured by Argo CD 3.4.0 and later only; older versions ignore it there)",
    )
    parser.add_argument(
        "--cd.resync-interval",
        dest="cd_resync_interval",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_RESYNC_INTERVAL_S,
        help="seconds between two checks of every object against the store: a pause undone "
        "by the object's owner is applied again, an action an API error stopped is retried "
        f"(default: {DEFAULT_RESYNC_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--cd.dry-run",
        dest="cd_dry_run",
        action="store_true",
        help="log and count what would be paused or resumed, and write nothing: no store "
        "row, no object, no Event, no Lease",
    )
    parser.add_argument(
        "--cd.kubeconfig",
        dest="cd_kubeconfig",
        metavar="FILE",
        help="kubeconfig of the management cluster holding the Flux and Argo CD objects "
        "(default: the pod's service account, else $KUBECONFIG)",
    )
    parser.add_argument(
        "--cd.process",
        dest="cd_process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="list and watch the Flux and Argo CD objects in a process of the reactor's own, "
        "so that its requests never share the interpreter with them (default: on)",
    )
    add_leader_election_flags(parser)


def cd_settings_from(args: Any) -> CdSettings | None:
    """The checked settings; None without ``--cd.flux`` or ``--cd.argocd``; ValueError."""
    if not (args.cd_flux or args.cd_argocd):
        for flag, given in (
            ("--cd.dry-run", args.cd_dry_run),
            ("--cd.kubeconfig", args.cd_kubeconfig),
            ("--cd.argocd.pause", args.cd_argocd_pause),
            ("--cd.leader-election.namespace", args.cd_leader_election_namespace),
        ):
            if given:
                raise ValueError(f"{flag} needs --cd.flux or --cd.argocd")
        return None
    if args.cd_argocd_pause is not None and not args.cd_argocd:
        raise ValueError("--cd.argocd.pause needs --cd.argocd")
    if not 1 <= args.cd_resync_interval < float("inf"):
        raise ValueError("--cd.resync-interval must be at least 1 second")
    pause = args.cd_argocd_pause or PAUSE_APPLICATION
    return CdSettings(
        flux=bool(args.cd_flux),
        argocd=bool(args.cd_argocd),
        argocd_pause=pause,
        secret_namespaces=tuple(getattr(args, "discovery_kubernetes_namespaces", None) or ())
        if pause == PAUSE_CLUSTER_SECRET
        else (),
        resync_interval_s=float(args.cd_resync_interval),
        dry_run=bool(args.cd_dry_run),
        kubeconfig=args.cd_kubeconfig or None,
        process=bool(args.cd_process),
        leader_election=leader_election_from(args),
    )


def add_leader_election_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cd.leader-election",
        dest="cd_leader_election",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="act on the CD objects only while holding a Lease of the management cluster, so "
        "that of several replicas one acts at a time (default: on; off only for a single "
        "replica without the Lease's RBAC)",
    )
    parser.add_argument(
        "--cd.leader-election.namespace",
        dest="cd_leader_election_namespace",
        metavar="NS",
        help="namespace of the Lease (default: the reactor pod's namespace, else default)",
    )
    parser.add_argument(
        "--cd.leader-election.lease-name",
        dest="cd_leader_election_lease_name",
        metavar="NAME",
        default=DEFAULT_LEASE_NAME,
        help=f"name of the Lease; replicas sharing it act one at a time "
        f"(default: {DEFAULT_LEASE_NAME})",
    )
    parser.add_argument(
        "--cd.leader-election.lease-duration",
        dest="cd_leader_election_lease_duration",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_LEASE_DURATION_S,
        help="seconds a Lease not renewed keeps the other replicas waiting: the hand-over "
        "time after the acting one dies; it renews every 2/15 of it and stops acting after "
        f"2/3 without a renewal (default: {DEFAULT_LEASE_DURATION_S:g})",
    )


def leader_election_from(args: Any) -> LeaderElection | None:
    """None with ``--no-cd.leader-election``; ValueError. (A dry run elects nobody:
    ``reactor.cd.setup``.)"""
    if not args.cd_leader_election:
        return None
    duration = args.cd_leader_election_lease_duration
    if not 3 <= duration <= 3600:
        raise ValueError("--cd.leader-election.lease-duration must be between 3 and 3600 seconds")
    name = args.cd_leader_election_lease_name
    if not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"--cd.leader-election.lease-name: {name!r} is not a Kubernetes name")
    namespace = args.cd_leader_election_namespace
    if namespace is not None and not _DNS_LABEL.fullmatch(namespace):
        raise ValueError(
            f"--cd.leader-election.namespace: {namespace!r} is not a Kubernetes namespace"
        )
    return LeaderElection(namespace=namespace, name=name, lease_duration_s=float(duration))


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
