"""The cd* components: the reactor's CD flags and the RBAC they need agree, and grant no more.

The reactor's CD integration (docs/cd.md) lists, watches and patches Flux Kustomizations
and HelmReleases (``--cd.flux``) and Argo CD Applications (``--cd.argocd``), patches Argo
CD's cluster Secrets in ``--cd.argocd.pause=cluster-secret``, creates an Event beside each
pause and resume (in the object's namespace), and holds a Lease in its
own namespace. Checked on every overlay (the ``cd`` ones turn it on, the others must
grant none of it) and on combinations of one's own: each grant is there exactly when a
flag asks for it, with exactly the verbs of the table below, bound to the reactor alone;
the resources granted are the ones the reactor's own code watches for those flags
(``reactor.cd.watch.cd_watches``); and the flags parse. The verbs are the ones the
reactor uses against the stand-in management cluster with a token restricted to them
(tests/reactor/test_cd_secret_live.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from fleetwatch.cli import build_parser
from reactor.cd.settings import CdSettings, cd_settings_from
from reactor.cd.watch import cd_watches
from tests.helpers.commands import run_ok
from tests.helpers.deploy_manifests import (
    KUSTOMIZE,
    OVERLAYS,
    Obj,
    args_of,
    is_cd,
    of_kind,
    reads_api,
    render,
    watched_namespaces,
    workloads,
)

REACTOR = ("fleetwatch", "fleetwatch-reactor")
COMPONENTS = KUSTOMIZE / "components"
READ_PATCH = ["get", "list", "watch", "patch"]
#: The Event of each pause and resume, in the object's namespace (reactor.cd.events).
EVENTS_RULE: Obj = {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}

#: name -> (kind, namespace, rules): every role the cd* components may hold.
FLUX_ROLE: tuple[str, str | None, list[Obj]] = (
    "ClusterRole",
    None,
    [
        {"apiGroups": ["kustomize.toolkit.fluxcd.io"], "resources": ["kustomizations"],
         "verbs": READ_PATCH},
        {"apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmreleases"],
         "verbs": READ_PATCH},
        EVENTS_RULE,
    ],
)  # fmt: skip
ARGOCD_ROLE: tuple[str, str | None, list[Obj]] = (
    "ClusterRole",
    None,
    [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": READ_PATCH},
     EVENTS_RULE],
)  # fmt: skip
SECRETS_ROLE: tuple[str, str | None, list[Obj]] = (
    "Role",
    "argocd",
    [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"]}, EVENTS_RULE],
)


def lease_role(lease: str) -> tuple[str, str | None, list[Obj]]:
    """create (which RBAC cannot limit by name), and the rest on the reactor's Lease only."""
    return (
        "Role",
        "fleetwatch",
        [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [lease], "verbs": ["get", "update", "patch"]},
        ],
    )  # fmt: skip


def _reactor(objects: list[Obj]) -> Obj:
    (reactor,) = [w for w in workloads(objects) if w["metadata"]["name"] == REACTOR[1]]
    return reactor


def reactor_cd(objects: list[Obj]) -> CdSettings | None:
    """The reactor's CD settings, as its own parser and checks read its arguments."""
    args = args_of(_reactor(objects))
    return cd_settings_from(build_parser(args[0]).parse_args(args))


Role = tuple[str, str | None, list[Obj]]


def expected_roles(cd: CdSettings | None) -> dict[str, Role]:
    if cd is None:
        return {}
    assert cd.leader_election is not None, "the manifests run the election"
    roles: dict[str, Role] = {"fleetwatch-cd-lease": lease_role(cd.leader_election.name)}
    if cd.flux:
        roles["fleetwatch-cd-flux"] = FLUX_ROLE
    if cd.argocd:
        roles["fleetwatch-cd-argocd"] = ARGOCD_ROLE
    if cd.pause_cluster_secrets:
        roles["fleetwatch-cd-cluster-secrets"] = SECRETS_ROLE
    return roles


def _subjects(binding: Obj) -> list[tuple[str, str]]:
    return [(s["namespace"], s["name"]) for s in binding["subjects"]]


def check_cd_rbac(objects: list[Obj]) -> None:
    """The cd* roles are exactly those the reactor's flags need, each with exactly its
    rules, each bound (by a binding of its own name and scope) to the reactor alone."""
    cd = reactor_cd(objects)
    roles = {
        o["metadata"]["name"]: (o["kind"], o["metadata"].get("namespace"), o["rules"])
        for kind in ("Role", "ClusterRole")
        for o in of_kind(objects, kind)
        if is_cd(o)
    }
    assert roles == expected_roles(cd)
    bindings = [o for kind in ("RoleBinding", "ClusterRoleBinding") for o in of_kind(objects, kind)]
    cd_bindings = {b["metadata"]["name"]: b for b in bindings if is_cd(b)}
    assert cd_bindings.keys() == roles.keys()
    for name, binding in cd_bindings.items():
        kind, namespace, _ = roles[name]
        assert binding["kind"] == f"{kind}Binding"
        assert binding["metadata"].get("namespace") == namespace
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind,
            "name": name,
        }
        assert _subjects(binding) == [REACTOR]
    for binding in bindings:  # no other binding names a CD role
        if not is_cd(binding):
            assert not is_cd({"metadata": {"name": binding["roleRef"]["name"]}})
    if cd is None:
        return
    # The objects are apps of clusters discovery read from Secrets: the reactor reads them
    # (with their RBAC, token and egress: tests/deploy/test_discovery_rbac.py).
    reactor = _reactor(objects)
    assert reads_api(reactor), "the CD integration needs --discovery.kubernetes"
    # The resources granted are the ones the reactor watches for these flags.
    watched = {(w.cd_kind.group, w.cd_kind.plural) for w in cd_watches(cd)}
    granted = {
        (group, resource)
        for name in ("fleetwatch-cd-flux", "fleetwatch-cd-argocd")
        if name in roles
        for rule in roles[name][2]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    # ... and where they are, the Events of their pauses and resumes (reactor.cd.events).
    assert granted == (watched - {("", "secrets")}) | {("events.k8s.io", "events")}
    if cd.pause_cluster_secrets:
        # Patched where they are watched: discovery's namespaces (the cluster Secrets are
        # listed with its grant), Argo CD's among them.
        namespaces = watched_namespaces(reactor)
        assert set(cd.secret_namespaces) == namespaces
        assert not namespaces or SECRETS_ROLE[1] in namespaces


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_grants_the_cd_integration_exactly_what_its_flags_need(overlay: str) -> None:
    check_cd_rbac(render(overlay))


def test_the_cd_overlays_turn_it_on() -> None:
    cd = reactor_cd(render("overlays/cd"))
    assert cd == CdSettings(flux=True, argocd=True)
    cd = reactor_cd(render("overlays/cd-cluster-secret"))
    assert cd == CdSettings(
        argocd=True, argocd_pause="cluster-secret", secret_namespaces=("argocd",)
    )
    for overlay in OVERLAYS:
        if not overlay.startswith("overlays/cd"):
            assert reactor_cd(render(overlay)) is None, overlay


def test_the_exporter_gets_no_cd_flag_nor_grant() -> None:
    for overlay in ("overlays/cd", "overlays/cd-cluster-secret"):
        objects = render(overlay)
        for workload in workloads(objects):
            if workload["metadata"]["name"] != REACTOR[1]:
                assert not [a for a in args_of(workload) if a.startswith("--cd.")]
        for binding in of_kind(objects, "RoleBinding") + of_kind(objects, "ClusterRoleBinding"):
            if is_cd(binding):
                assert ("fleetwatch", "fleetwatch-exporter") not in _subjects(binding)


def test_the_check_catches_a_wider_grant_or_a_missing_one() -> None:
    objects = render("overlays/cd")
    (flux,) = [
        o for o in of_kind(objects, "ClusterRole") if o["metadata"]["name"] == "fleetwatch-cd-flux"
    ]
    flux["rules"][0]["verbs"].append("update")
    with pytest.raises(AssertionError):
        check_cd_rbac(objects)

    objects = [o for o in render("overlays/cd") if o["metadata"]["name"] != "fleetwatch-cd-lease"]
    with pytest.raises(AssertionError):
        check_cd_rbac(objects)

    objects = render("overlays/cd")
    args_of(_reactor(objects)).append("--cd.argocd.pause=cluster-secret")
    with pytest.raises(AssertionError):  # no patch on Secrets granted
        check_cd_rbac(objects)

    objects = render("overlays/cd-cluster-secret")
    (binding,) = [
        o for o in of_kind(objects, "RoleBinding") if o["metadata"]["name"] == "fleetwatch-cd-lease"
    ]
    binding["subjects"].append({"kind": "ServiceAccount", "name": "fleetwatch-exporter",
                                "namespace": "fleetwatch"})  # fmt: skip
    with pytest.raises(AssertionError):
        check_cd_rbac(objects)


# --- combinations of one's own -----------------------------------------------------------------


def _render_overlay(tmp_path: Path, resources: list[str], components: list[str]) -> list[Obj]:
    folder = tmp_path / "my-fleet"
    folder.mkdir()
    text = yaml.safe_dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(KUSTOMIZE / r, folder) for r in resources],
            "components": [os.path.relpath(COMPONENTS / c, folder) for c in components],
        }
    )
    (folder / "kustomization.yaml").write_text(text)
    done = run_ok(["kubectl", "kustomize", str(folder)])
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize(
    ("resource", "components", "expected"),
    [
        ("overlays/argocd", ["cd", "cd-argocd"], CdSettings(argocd=True)),
        ("overlays/cluster-api", ["cd", "cd-flux"], CdSettings(flux=True)),
        (
            "overlays/cluster-api",
            ["cd", "cd-argocd", "cd-argocd-cluster-secret"],
            CdSettings(argocd=True, argocd_pause="cluster-secret"),
        ),
    ],
)
def test_the_components_combine_as_docs_say(
    tmp_path: Path, resource: str, components: list[str], expected: CdSettings
) -> None:
    objects = _render_overlay(tmp_path, [resource], components)
    assert reactor_cd(objects) == expected
    check_cd_rbac(objects)


def test_cd_without_its_lease_component_is_caught(tmp_path: Path) -> None:
    """cd-flux alone leaves the Lease ungranted: the check says so."""
    objects = _render_overlay(tmp_path, ["overlays/argocd"], ["cd-flux"])
    with pytest.raises(AssertionError):
        check_cd_rbac(objects)
