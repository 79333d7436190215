"""``--cd.*`` flags of `fleetwatch reactor`: defaults, what they turn on, exact refusals."""

from __future__ import annotations

import pytest

from fleetwatch.cli import build_parser
from reactor.cd.lease import LeaderElection
from reactor.cd.objects import APPLICATION, HELMRELEASE, KUSTOMIZATION
from reactor.cd.settings import CdSettings, cd_settings_from
from reactor.cd.watch import cd_watches


def cd(argv: list[str]) -> CdSettings | None:
    return cd_settings_from(build_parser().parse_args(["reactor", *argv]))


def test_off_unless_a_source_is_turned_on() -> None:
    assert cd([]) is None


def test_the_flags_turn_on_the_kinds_and_their_watches() -> None:
    flux = cd(["--cd.flux"])
    assert flux == CdSettings(flux=True)
    assert flux.kinds == (KUSTOMIZATION, HELMRELEASE) and flux.resync_interval_s == 60.0
    both = cd(
        [
            "--cd.flux",
            "--cd.argocd",
            "--cd.resync-interval=5",
            "--cd.dry-run",
            "--cd.kubeconfig=/etc/mgmt.yaml",
        ]
    )
    assert both == CdSettings(
        flux=True, argocd=True, resync_interval_s=5.0, dry_run=True, kubeconfig="/etc/mgmt.yaml"
    )
    assert [w.path for w in cd_watches(both)] == [
        "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations",
        "/apis/helm.toolkit.fluxcd.io/v2/helmreleases",
        "/apis/argoproj.io/v1alpha1/applications",
    ]
    assert cd(["--cd.argocd"]) == CdSettings(argocd=True)
    assert CdSettings(argocd=True).kinds == (APPLICATION,)


def test_argocd_paused_on_cluster_secrets_watches_them_where_discovery_reads_secrets() -> None:
    assert cd(["--cd.argocd", "--cd.argocd.pause=application"]) == CdSettings(argocd=True)
    assert not CdSettings(argocd=True).pause_cluster_secrets
    argv = ["--cd.argocd", "--cd.argocd.pause=cluster-secret", "--discovery.kubernetes"]
    everywhere = cd(argv)
    assert everywhere == CdSettings(argocd=True, argocd_pause="cluster-secret")
    assert everywhere.pause_cluster_secrets
    watches = cd_watches(everywhere)
    assert [(w.path, w.label_selector) for w in watches] == [
        ("/apis/argoproj.io/v1alpha1/applications", ""),
        ("/api/v1/secrets", "argocd.argoproj.io/secret-type=cluster"),
    ]
    narrowed = cd(
        [*argv, "--discovery.kubernetes.namespace=argocd", "--discovery.kubernetes.namespace=x"]
    )
    assert narrowed is not None and narrowed.secret_namespaces == ("argocd", "x")
    assert [w.path for w in cd_watches(narrowed)][1:] == [
        "/api/v1/namespaces/argocd/secrets",
        "/api/v1/namespaces/x/secrets",
    ]
    assert str(cd_watches(narrowed)[1]) == (
        "Secret objects (argocd.argoproj.io/secret-type=cluster) in namespace argocd"
    )


def test_an_unknown_pause_place_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        cd(["--cd.argocd", "--cd.argocd.pause=cluster"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cd.dry-run"], "--cd.dry-run needs --cd.flux or --cd.argocd"),
        (["--cd.kubeconfig=k"], "--cd.kubeconfig needs --cd.flux or --cd.argocd"),
        (
            ["--cd.argocd.pause=cluster-secret"],
            "--cd.argocd.pause needs --cd.flux or --cd.argocd",
        ),
        (["--cd.flux", "--cd.argocd.pause=cluster-secret"], "--cd.argocd.pause needs --cd.argocd"),
        (["--cd.flux", "--cd.resync-interval=0"], "--cd.resync-interval must be at least 1 second"),
        (
            ["--cd.flux", "--cd.resync-interval=inf"],
            "--cd.resync-interval must be at least 1 second",
        ),
        (
            ["--cd.leader-election.namespace=ops"],
            "--cd.leader-election.namespace needs --cd.flux or --cd.argocd",
        ),
        (
            ["--cd.flux", "--cd.leader-election.lease-duration=2"],
            "--cd.leader-election.lease-duration must be between 3 and 3600 seconds",
        ),
        (
            ["--cd.flux", "--cd.leader-election.lease-duration=nan"],
            "--cd.leader-election.lease-duration must be between 3 and 3600 seconds",
        ),
        (
            ["--cd.flux", "--cd.leader-election.lease-name=Fleet_Watch"],
            "--cd.leader-election.lease-name: 'Fleet_Watch' is not a Kubernetes name",
        ),
        (
            ["--cd.flux", "--cd.leader-election.namespace=ops.team"],
            "--cd.leader-election.namespace: 'ops.team' is not a Kubernetes namespace",
        ),
    ],
)
def test_refused_flags_say_why(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        cd(argv)
    assert str(refused.value) == message


def test_leader_election_is_on_by_default_and_its_lease_can_be_named() -> None:
    """On by default: two replicas started without thinking of it never act at once."""
    assert cd(["--cd.flux"]).leader_election == LeaderElection()
    assert cd(["--cd.flux", "--no-cd.leader-election"]).leader_election is None
    named = cd(
        [
            "--cd.argocd",
            "--cd.leader-election.namespace=fleetwatch",
            "--cd.leader-election.lease-name=fleetwatch-reactor-cd.staging",
            "--cd.leader-election.lease-duration=30",
        ]
    )
    assert named.leader_election == LeaderElection(
        "fleetwatch", "fleetwatch-reactor-cd.staging", 30
    )
    assert (named.leader_election.renew_deadline_s, named.leader_election.retry_period_s) == (
        20.0,
        4.0,
    )


def test_the_objects_are_listed_in_a_process_of_their_own_unless_asked_not_to() -> None:
    settings = cd(["--cd.flux"])
    assert settings is not None and settings.process is True
    inline = cd(["--cd.flux", "--no-cd.process"])
    assert inline is not None and inline.process is False
