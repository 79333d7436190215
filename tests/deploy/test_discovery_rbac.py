"""The clusters-from-* components: RBAC, flags, token and egress agree, and grant no more.

Reading clusters from the management cluster's API (``--discovery.kubernetes``) needs four
things to line up in the rendered objects: the flags (which namespaces are watched), the
RBAC (which are granted: ``get``, ``list``, ``watch`` on ``secrets``, nothing else), the
service account's token in exactly the pods that read the API, and a NetworkPolicy that
lets them reach the API server. Each is checked on every overlay, on the sharded exporter
with a component added, and on the recipe docs/deployment.md gives for namespaces of
one's own. The commands docs/exporter.md gives to label a Secret are run (offline, as
``kubectl --dry-run``/``--local``) and the result read by fleetwatch's own Secret reader.
tests/deploy/test_discovery_pods.py runs the pods against the stand-in management cluster.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleetwatch.cli import build_parser
from fleetwatch.discovery import DEFAULT_SELECTOR, apisource, read_secret
from fleetwatch.discovery.secrets import kind_of
from tests.helpers.commands import run, run_ok
from tests.helpers.deploy_manifests import (
    DISCOVERY_FLAG,
    KUSTOMIZE,
    OVERLAYS,
    REPO,
    Obj,
    args_of,
    is_cd,
    of_kind,
    reads_api,
    render,
    watched_namespaces,
    workloads,
)

#: The one rule a Role or ClusterRole of the components may hold.
READ_SECRETS = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")
#: The ports of the API server the pods reach (the Service's, and the control plane's).
API_PORTS = {443, 6443}
COMPONENTS = KUSTOMIZE / "components"


def _kustomize(folder: Path) -> subprocess.CompletedProcess[str]:
    return run(["kubectl", "kustomize", str(folder)])


def _render_folder(folder: Path) -> list[Obj]:
    done = run_ok(["kubectl", "kustomize", str(folder)])
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _relative(target: Path, start: Path) -> str:
    """kustomize refuses absolute paths to other kustomizations: a relative one."""
    return os.path.relpath(target, start)


def _user_overlay(tmp_path: Path, resources: list[Path], components: list[Path]) -> Path:
    """An overlay of one's own, outside the repository, naming folders of it."""
    folder = tmp_path / "my-fleet"
    folder.mkdir()
    text = yaml.safe_dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [_relative(r, folder) for r in resources],
            "components": [_relative(c, folder) for c in components],
        }
    )
    (folder / "kustomization.yaml").write_text(text)
    return folder


def _service_account(workload: Obj) -> tuple[str, str]:
    return workload["metadata"]["namespace"], workload["spec"]["template"]["spec"][
        "serviceAccountName"
    ]


def _subjects(binding: Obj) -> set[tuple[str, str]]:
    found = set()
    for subject in binding["subjects"]:
        assert subject["kind"] == "ServiceAccount", subject
        found.add((subject["namespace"], subject["name"]))
    return found


def _grants(objects: list[Obj], account: tuple[str, str]) -> tuple[bool, set[str]]:
    """(bound cluster-wide, the namespaces of the RoleBindings) of one service account."""
    cluster_wide = any(account in _subjects(b) for b in of_kind(objects, "ClusterRoleBinding"))
    namespaces = {
        b["metadata"]["namespace"]
        for b in of_kind(objects, "RoleBinding")
        if account in _subjects(b)
    }
    return cluster_wide, namespaces


def check_rbac_matches_the_flags(objects: list[Obj]) -> None:
    """Every role reads Secrets and nothing else; every binding names one of them and only
    the accounts of pods that read the API; each such pod is granted exactly the namespaces
    it watches (every namespace: a ClusterRoleBinding, and then no namespace flag). The
    CD components' RBAC is checked on its own (tests/deploy/test_cd_rbac.py)."""
    objects = [o for o in objects if not is_cd(o)]
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for kind in ROLE_KINDS for o in of_kind(objects, kind)}  # fmt: skip
    for role in roles.values():
        assert role["rules"] == [READ_SECRETS], role["metadata"]
        assert "aggregationRule" not in role
    readers = {_service_account(w) for w in workloads(objects) if reads_api(w)}
    for kind in BINDING_KINDS:
        for binding in of_kind(objects, kind):
            ref = binding["roleRef"]
            assert ref["apiGroup"] == "rbac.authorization.k8s.io"
            # A RoleBinding may name a Role of its own namespace (or a ClusterRole).
            namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
            assert (ref["kind"], namespace, ref["name"]) in roles, binding["metadata"]
            assert _subjects(binding) <= readers, binding["metadata"]
    for workload in workloads(objects):
        cluster_wide, namespaces = _grants(objects, _service_account(workload))
        watched = watched_namespaces(workload)
        if not reads_api(workload):
            assert (cluster_wide, namespaces) == (False, set())
        elif watched:
            assert not cluster_wide, "a namespaced watch needs no ClusterRole"
            assert namespaces == watched
        else:
            assert cluster_wide, "watching every namespace needs a ClusterRoleBinding"


# --- the overlays ---------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_rbac_grants_exactly_what_each_workload_watches(overlay: str) -> None:
    check_rbac_matches_the_flags(render(overlay))


def test_the_argocd_overlay_reads_secrets_in_argocd_only() -> None:
    objects = render("overlays/argocd")
    assert of_kind(objects, "ClusterRole") == [] and of_kind(objects, "ClusterRoleBinding") == []
    (role,) = of_kind(objects, "Role")
    (binding,) = of_kind(objects, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "argocd"
    assert role["rules"] == [READ_SECRETS]
    assert _subjects(binding) == {
        ("fleetwatch", "fleetwatch-exporter"),
        ("fleetwatch", "fleetwatch-reactor"),
    }
    readers = [w for w in workloads(objects) if reads_api(w)]
    assert {w["metadata"]["name"] for w in readers} == {"fleetwatch-exporter", "fleetwatch-reactor"}
    for workload in readers:
        assert watched_namespaces(workload) == {"argocd"}


def test_the_cluster_api_overlay_reads_secrets_in_every_namespace() -> None:
    objects = render("overlays/cluster-api")
    assert of_kind(objects, "Role") == [] and of_kind(objects, "RoleBinding") == []
    (role,) = of_kind(objects, "ClusterRole")
    (binding,) = of_kind(objects, "ClusterRoleBinding")
    assert role["rules"] == [READ_SECRETS]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    readers = [w for w in workloads(objects) if reads_api(w)]
    assert len(readers) == 2
    assert all(watched_namespaces(w) == set() for w in readers)


@pytest.mark.parametrize("overlay", ["base", "overlays/prometheus-operator", "overlays/sharded"])
def test_without_a_component_nothing_reads_the_api(overlay: str) -> None:
    objects = render(overlay)
    assert [w for w in workloads(objects) if reads_api(w)] == []
    for kind in (*ROLE_KINDS, *BINDING_KINDS):
        assert of_kind(objects, kind) == []


def test_the_rbac_check_catches_a_wider_grant() -> None:
    """What the checks above rely on: one more verb, a ClusterRole beside the Role, or a
    namespace watched without its Role, is caught."""
    objects = render("overlays/argocd")
    (role,) = of_kind(objects, "Role")
    role["rules"][0]["verbs"].append("update")
    with pytest.raises(AssertionError):
        check_rbac_matches_the_flags(objects)

    objects = render("overlays/argocd") + of_kind(render("overlays/cluster-api"), "ClusterRole")
    objects += of_kind(render("overlays/cluster-api"), "ClusterRoleBinding")
    with pytest.raises(AssertionError, match="needs no ClusterRole"):
        check_rbac_matches_the_flags(objects)

    objects = render("overlays/argocd")
    args_of(workloads(objects)[0]).append("--discovery.kubernetes.namespace=fleet")
    with pytest.raises(AssertionError):
        check_rbac_matches_the_flags(objects)


# --- the pods: a token where it is used, a way to the API server -------------------------------


def _selects(policy: Obj, labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        value = labels.get(expression["key"])
        if expression["operator"] == "In" and value not in expression["values"]:
            return False
        if expression["operator"] == "NotIn" and value in expression["values"]:
            return False
        if expression["operator"] == "Exists" and value is None:
            return False
        if expression["operator"] == "DoesNotExist" and value is not None:
            return False
    return True


def open_ports_anywhere(objects: list[Obj], workload: Obj) -> set[int]:
    """The TCP ports the policies selecting the pod let it reach at any address."""
    labels = workload["spec"]["template"]["metadata"]["labels"]
    ports: set[int] = set()
    for policy in of_kind(objects, "NetworkPolicy"):
        if not _selects(policy, labels) or "Egress" not in policy["spec"]["policyTypes"]:
            continue
        for rule in policy["spec"].get("egress", []):
            if rule.get("to"):
                continue
            for port in rule.get("ports", []):
                if port.get("protocol", "TCP") == "TCP" and isinstance(port["port"], int):
                    ports.add(port["port"])
    return ports


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pods_that_read_the_api_reach_it_and_hold_its_token(overlay: str) -> None:
    objects = render(overlay)
    readers = [w for w in workloads(objects) if reads_api(w)]
    for workload in workloads(objects):
        pod = workload["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is reads_api(workload)
    for workload in readers:
        assert open_ports_anywhere(objects, workload) >= API_PORTS, workload["metadata"]["name"]
    for account in of_kind(objects, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False  # only the pods that need it


def test_the_policy_check_sees_the_reactor_shut_out_without_the_component() -> None:
    """The reactor may reach no API server in the base: the component's policy is needed."""
    objects = render("overlays/prometheus-operator")
    reactor = next(w for w in workloads(objects) if w["metadata"]["name"] == "fleetwatch-reactor")
    assert open_ports_anywhere(objects, reactor) & API_PORTS == set()
    objects = render("overlays/argocd")
    reactor = next(w for w in workloads(objects) if w["metadata"]["name"] == "fleetwatch-reactor")
    assert open_ports_anywhere(objects, reactor) >= API_PORTS


# --- the flags are ones fleetwatch takes ------------------------------------------------------


def _parse(args: list[str]) -> argparse.Namespace:
    try:
        return build_parser(args[0]).parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"fleetwatch refuses {args}: exit {exc.code}") from None


def _reader_args(overlay: str, name: str) -> Iterator[list[str]]:
    for workload in workloads(render(overlay)):
        if workload["metadata"]["name"] == name:
            yield args_of(workload)


@pytest.mark.parametrize("overlay", ["overlays/argocd", "overlays/cluster-api"])
def test_the_exporter_takes_the_components_flags(overlay: str) -> None:
    (args,) = _reader_args(overlay, "fleetwatch-exporter")
    settings = apisource.from_args(_parse(args))
    assert settings is not None
    assert set(settings.namespaces) == watched_namespaces({"spec": {"template": {"spec": {
        "containers": [{"args": args}]}}}})  # fmt: skip
    assert settings.exec_plugins is False
    assert settings.label_selector == DEFAULT_SELECTOR


@pytest.mark.parametrize("overlay", ["overlays/argocd", "overlays/cluster-api"])
def test_the_reactor_takes_the_components_flags(overlay: str) -> None:
    (args,) = _reader_args(overlay, "fleetwatch-reactor")
    assert DISCOVERY_FLAG in args
    parsed = _parse(args)
    assert getattr(parsed, "discovery_kubernetes", False) is True


# --- combinations and a user's own overlay ----------------------------------------------------


def test_the_components_add_to_the_sharded_exporter(tmp_path: Path) -> None:
    folder = _user_overlay(
        tmp_path, [KUSTOMIZE / "overlays" / "sharded"], [COMPONENTS / "clusters-from-argocd"]
    )
    objects = _render_folder(folder)
    statefulsets = of_kind(objects, "StatefulSet")
    assert len(statefulsets) == 2
    for statefulset in statefulsets:
        assert reads_api(statefulset)
        assert watched_namespaces(statefulset) == {"argocd"}
    check_rbac_matches_the_flags(objects)


def test_two_clusters_from_components_do_not_combine(tmp_path: Path) -> None:
    """A namespaced and a cluster-wide scope would narrow each other: kustomize refuses."""
    folder = _user_overlay(
        tmp_path,
        [KUSTOMIZE / "overlays" / "prometheus-operator"],
        [COMPONENTS / "clusters-from-argocd", COMPONENTS / "clusters-from-cluster-api"],
    )
    done = _kustomize(folder)
    assert done.returncode != 0
    assert "NetworkPolicy.v1.networking.k8s.io/fleetwatch-management-api" in done.stderr


def _doc_blocks() -> dict[str, str]:
    """The YAML blocks of docs/deployment.md, by the file their first line names."""
    text = (REPO / "docs" / "deployment.md").read_text()
    blocks = {}
    for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL):
        first = re.match(r"# (my-fleet/[\w.-]+)", block)
        if first:
            blocks[first.group(1)] = block
    return blocks


def test_the_recipe_for_namespaces_of_ones_own_grants_what_it_watches(tmp_path: Path) -> None:
    """docs/deployment.md's recipe, as written (its path to this repository made real)."""
    blocks = _doc_blocks()
    folder = tmp_path / "my-fleet"
    folder.mkdir()
    repo_from_folder = _relative(REPO, folder)
    kustomization = blocks["my-fleet/kustomization.yaml"]
    assert "../deploy/kubernetes/" in kustomization
    (folder / "kustomization.yaml").write_text(
        kustomization.replace("../deploy/kubernetes/", f"{repo_from_folder}/deploy/kubernetes/")
    )
    (folder / "fleet-rbac.yaml").write_text(blocks["my-fleet/fleet-rbac.yaml"])
    objects = _render_folder(folder)
    readers = [w for w in workloads(objects) if reads_api(w)]
    assert len(readers) == 2
    for workload in readers:
        assert watched_namespaces(workload) == {"argocd", "fleet"}
    check_rbac_matches_the_flags(objects)


# --- docs/exporter.md: label a Secret for fleetwatch ------------------------------------------


def _kubectl(*args: str, cwd: Path, stdin: str | None = None) -> str:
    return run_ok(["kubectl", *args], cwd=cwd, input_text=stdin).stdout


def test_the_labelled_secret_of_the_how_to_is_read_as_its_clusters(tmp_path: Path) -> None:
    """The how-to's two commands, offline (``--dry-run=client``, ``--local``): the Secret
    they make is of the labelled kind for the default selector, and its context a cluster."""
    text = (REPO / "docs" / "exporter.md").read_text()
    create = "kubectl -n fleet create secret generic prod-eu --from-file=kubeconfig=./prod-eu.yaml"
    label = "kubectl -n fleet label secret prod-eu fleetwatch.io/kubeconfig="
    assert create in text and f"{label}\n" in text
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "prod-eu", "cluster": {"server": "https://prod-eu.example:6443"}}],
        "users": [{"name": "prod-eu", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "prod-eu", "context": {"cluster": "prod-eu", "user": "prod-eu"}}],
        "current-context": "prod-eu",
    }
    (tmp_path / "prod-eu.yaml").write_text(yaml.safe_dump(kubeconfig))
    created = _kubectl(*create.split()[1:], "--dry-run=client", "-o", "yaml", cwd=tmp_path)
    labelled = _kubectl(
        "label", "--local", "-f", "-", "-o", "yaml", label.split()[-1], cwd=tmp_path, stdin=created
    )
    secret = yaml.safe_load(labelled)
    secret["metadata"].update(uid="u-1", resourceVersion="1")  # as the API server adds them
    assert secret["metadata"]["labels"] == {"fleetwatch.io/kubeconfig": ""}
    assert kind_of(secret) == "labelled"
    read = read_secret(secret, DEFAULT_SELECTOR, exec_plugins=False)
    assert read is not None and read.problems == ()
    found = [(c.cluster.name, c.cluster.kubeconfig_secret_ref) for c in read.clusters]
    assert found == [("prod-eu", "secret://fleet/prod-eu#kubeconfig")]
    assert read.clusters[0].cluster.not_probeable is None
    assert "not-a-real-token" not in repr(read)
