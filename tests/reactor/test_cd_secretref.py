"""A Flux ``spec.kubeConfig.secretRef`` resolved as Flux reads it, and Argo CD destinations,
from a management cluster's own manifests to the cluster (or the exact problem): pure.

The fixture (``tests/fixtures/cd_secretref.yaml``) is written for fleetwatch after what the
projects document and do; no file of theirs is copied. Row by row:

- **Cluster API's kubeconfig Secret** (``c1-kubeconfig``, ``c3-kubeconfig``): name
  ``<cluster>-kubeconfig``, one key ``value`` holding a kubeconfig whose context is
  ``<cluster>-admin@<cluster>`` — kubernetes-sigs/cluster-api
  ``docs/book/src/developer/core/controllers/cluster.md`` ("Kubeconfig Secrets": name
  ``<cluster-name>-kubeconfig``, field ``value``) and ``util/kubeconfig/kubeconfig.go``
  (``GenerateSecretWithOwner``: label ``cluster.x-k8s.io/cluster-name``, data key
  ``secret.KubeconfigDataName``; newer versions add type ``cluster.x-k8s.io/secret``).
- **Flux objects through it** (``c1-addons``, ``c3-ingress`` without a key;
  ``c1-addons-value``, ``c3-monitoring`` with ``key: value``, as Cluster API users write
  it; ``c3-value-yaml`` a key the Secret lacks) — fluxcd/kustomize-controller
  ``docs/spec/v1/kustomizations.md`` ("KubeConfig (Remote clusters)", "Remote Cluster API
  clusters": the Kustomization in the Cluster's namespace, ``secretRef.name:
  <cluster>-kubeconfig``) and fluxcd/helm-controller ``docs/spec/v2/helmreleases.md`` (the
  same for a HelmRelease); the key read as fluxcd/pkg ``apis/meta/reference_types.go``
  (``KubeConfigReference.SecretRef`` a ``SecretKeyReference{name, key}``) and
  ``runtime/client/impersonator.go`` (``getRESTConfigFromSecret``: the key named, an error
  when the Secret lacks it; with none ``value``, then ``value.yaml``, else an error) and
  helm-controller ``internal/kube/config.go`` (``ConfigFromSecret``: the same order).
- **Flux's own Secret example** (``prod-kubeconfig``, key ``value.yaml``, from
  ``kubectl create secret generic prod-kubeconfig --from-file=value.yaml=./kubeconfig``)
  — the two spec pages above. Not labelled, so discovery does not read it (``prod``).
- **Secrets the user labels** (``team-kubeconfigs``: ``value.yaml``, a custom key
  ``staging``, a key of two contexts; ``both``: ``value`` and ``value.yaml``) — fleetwatch's
  own kind (docs/discovery.md), named by Flux objects as the two spec pages show
  (``edge``, ``edge-value-yaml``, ``staging-podinfo``, ``multi``, ``missing-key``,
  ``both``).
- **Argo CD cluster Secrets** (``cluster-c1``, ``cluster-c2``: label
  ``argocd.argoproj.io/secret-type: cluster``, keys ``name``, ``server``, ``config`` with
  ``bearerToken`` and ``tlsClientConfig``) — argoproj/argo-cd
  ``docs/operator-manual/declarative-setup.md`` ("Clusters"). A Flux object naming one
  (``via-argo*``) is a problem: Flux finds no ``value`` in it (``impersonator.go``'s
  default branch) and ``config`` is Argo CD's JSON, no kubeconfig.
- **Argo CD Applications** (``guestbook`` by ``destination.server``,
  ``guestbook-by-name`` by ``destination.name``, ``in-cluster`` at
  ``https://kubernetes.default.svc``, ``in-cluster-by-name`` by its name ``in-cluster``)
  — declarative-setup.md ("Applications": one of server or name, not both; the minimal
  Application deploys in-cluster). Resolved as argoproj/argo-cd ``util/argo/argo.go``
  (``GetDestinationServer``, ``GetDestinationCluster``) and ``util/db/cluster.go``
  (``GetClusterServersByName``, ``GetCluster``, ``SecretToCluster``) do: against Argo
  CD's cluster Secrets only, their ``name`` and ``server`` keys, plus ``in-cluster`` at
  ``https://kubernetes.default.svc``. So ``c3-by-name``/``c3-by-server`` (a cluster of
  Cluster API's Secret alone) and ``edge-by-name`` (a labelled Secret's) are problems;
  ``c4-by-name``/``c4-by-server`` reach c4 through Argo CD's Secret of it, the alias.

c1 is both Cluster API's and Argo CD's: discovery keeps Argo CD's Secret (its namespace
sorts first) and keeps Cluster API's as an alias at the same server, through which the
Flux objects still resolve. c4 the other way round: its Cluster API Secret's namespace
(``acme``) sorts before ``argocd``, so Argo CD's Secret is the alias, through which the
Applications resolve.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.discovery.clusters import Discovery
from fleetwatch.discovery.merge import Merged, merge
from fleetwatch.discovery.secrets import SecretClusters, read_secret
from reactor.cd.mirror import plan
from reactor.cd.objects import CdObject, Destination, Unreadable, read_object
from reactor.cd.targets import ClusterIndex, Unresolved, resolve_secret
from reactor.store import KnownCluster

FIXTURE = Path(__file__).parents[1] / "fixtures" / "cd_secretref.yaml"


def as_served(doc: dict[str, Any], uid: int) -> dict[str, Any]:
    """``doc`` as the API returns it: identity filled in, a Secret's ``stringData`` in
    ``data`` (base64)."""
    served = dict(doc)
    served["metadata"] = {**doc["metadata"], "uid": f"uid-{uid}", "resourceVersion": "1"}
    strings = served.pop("stringData", None)
    if strings is not None:
        served["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in strings.items()}
    return served


def manifests() -> Iterator[dict[str, Any]]:
    for uid, doc in enumerate(yaml.safe_load_all(FIXTURE.read_text())):
        yield as_served(doc, uid)


def discovered(objects: list[dict[str, Any]]) -> Merged:
    reads = [read_secret(o) for o in objects if o["kind"] == "Secret"]
    return merge(Discovery((), ()), [r for r in reads if isinstance(r, SecretClusters)])


def store_of(merged: Merged) -> list[KnownCluster]:
    """The store's clusters as discovery upserts them."""
    return [
        KnownCluster(c.name, c.endpoint, c.kubeconfig_secret_ref) for c in merged.discovery.clusters
    ]


OBJECTS = list(manifests())
MERGED = discovered(OBJECTS)
INDEX = ClusterIndex.of(store_of(MERGED), MERGED.aliases, MERGED.secrets)
CD = {
    read.app_name: read
    for read in (read_object(o) for o in OBJECTS if o["kind"] != "Secret")
    if read is not None
}


def flux(kind: str, namespace: str, name: str) -> str:
    return f"flux:{kind}/{namespace}/{name}"


KS, HR = "Kustomization", "HelmRelease"
TABLE: list[tuple[str, str]] = [
    # Cluster API's Secret: its cluster with or without key (c1 through the alias)
    (flux(KS, "fleet", "c1-addons"), "c1"),
    (flux(KS, "fleet", "c1-addons-value"), "c1"),
    (flux(HR, "fleet", "c3-ingress"), "c3"),
    (flux(HR, "fleet", "c3-monitoring"), "c3"),
    (
        flux(KS, "fleet", "c3-value-yaml"),
        "Secret secret://fleet/c3-kubeconfig has no key 'value.yaml' "
        "(spec.kubeConfig.secretRef.key)",
    ),
    # a labelled Secret: Flux's default order, or the key named
    (flux(KS, "fleet", "edge"), "edge-1"),
    (flux(KS, "fleet", "edge-value-yaml"), "edge-1"),
    (flux(HR, "fleet", "staging-podinfo"), "staging-1"),
    (flux(KS, "fleet", "both"), "both-v"),
    (
        flux(KS, "fleet", "multi"),
        "key 'multi' of Secret secret://fleet/team-kubeconfigs holds 2 clusters (contexts): "
        "Flux uses the kubeconfig's current context, which fleetwatch cannot tell",
    ),
    (
        flux(KS, "fleet", "missing-key"),
        "Secret secret://fleet/team-kubeconfigs has no key 'prod' (spec.kubeConfig.secretRef.key)",
    ),
    # Secrets discovery does not read
    (flux(KS, "fleet", "prod"), "no cluster discovered from Secret secret://fleet/prod-kubeconfig"),
    (
        flux(KS, "fleet", "gone"),
        "no cluster discovered from Secret secret://fleet/gone-kubeconfig (key 'value')",
    ),
    # an Argo CD cluster Secret named by Flux: no kubeconfig Flux can read
    (
        flux(KS, "argocd", "via-argo"),
        "Secret secret://argocd/cluster-c2 (an Argo CD cluster Secret) has neither key "
        "'value' nor 'value.yaml', which Flux reads when spec.kubeConfig.secretRef names no key",
    ),
    (
        flux(KS, "argocd", "via-argo-config"),
        "Secret secret://argocd/cluster-c2 is an Argo CD cluster Secret: its key 'config' is "
        "no kubeconfig Flux can read",
    ),
    (
        flux(KS, "argocd", "via-argo-value"),
        "Secret secret://argocd/cluster-c2 has no key 'value' (spec.kubeConfig.secretRef.key)",
    ),
    # Argo CD Applications
    ("argocd:Application/argocd/guestbook", "c2"),
    ("argocd:Application/argocd/guestbook-by-name", "c1"),
    (
        "argocd:Application/argocd/in-cluster",
        "Argo CD server https://kubernetes.default.svc is Argo CD's in-cluster destination "
        "(https://kubernetes.default.svc), the management cluster itself: the store knows no "
        "cluster there (no Argo CD cluster Secret at that server was discovered)",
    ),
    (
        "argocd:Application/argocd/in-cluster-by-name",
        "Argo CD cluster 'in-cluster' is Argo CD's in-cluster destination "
        "(https://kubernetes.default.svc), the management cluster itself: the store knows no "
        "cluster there (no Argo CD cluster Secret at that server was discovered)",
    ),
    # names and servers of clusters Argo CD does not know: its cluster Secrets only
    (
        "argocd:Application/argocd/c3-by-name",
        "Argo CD knows no cluster Secret named 'c3': the cluster discovered as c3 came from "
        "secret://fleet/c3-kubeconfig (a Cluster API Secret), which Argo CD does not read",
    ),
    (
        "argocd:Application/argocd/c3-by-server",
        "Argo CD knows no cluster Secret with server https://c3.fleet.test:6443: the cluster "
        "there, c3, came from secret://fleet/c3-kubeconfig (a Cluster API Secret), which "
        "Argo CD does not read",
    ),
    (
        "argocd:Application/argocd/edge-by-name",
        "Argo CD knows no cluster Secret named 'edge-1': the cluster discovered as edge-1 came "
        "from secret://fleet/team-kubeconfigs#value.yaml (a Secret labelled for fleetwatch), "
        "which Argo CD does not read",
    ),
    # Argo CD's Secret of c4 set aside as the alias of Cluster API's: still Argo CD's c4
    ("argocd:Application/argocd/c4-by-name", "c4"),
    ("argocd:Application/argocd/c4-by-server", "c4"),
]


def test_the_fixture_is_read_as_the_projects_shape_it() -> None:
    """What the table stands on: discovery's view of the fixture's Secrets."""
    refs = {c.name: c.kubeconfig_secret_ref for c in MERGED.discovery.clusters}
    assert refs == {
        "c1": "secret://argocd/cluster-c1",
        "c2": "secret://argocd/cluster-c2",
        "both-v": "secret://fleet/both#value",
        "both-y": "secret://fleet/both#value.yaml",
        "c3": "secret://fleet/c3-kubeconfig",
        "c4": "secret://acme/c4-kubeconfig",
        "multi-a": "secret://fleet/team-kubeconfigs#multi",
        "multi-b": "secret://fleet/team-kubeconfigs#multi",
        "staging-1": "secret://fleet/team-kubeconfigs#staging",
        "edge-1": "secret://fleet/team-kubeconfigs#value.yaml",
    }
    assert MERGED.aliases == {
        "secret://fleet/c1-kubeconfig": "c1",
        "secret://argocd/cluster-c4": "c4",
    }
    shapes = {ref: (s.kind, sorted(s.keys)) for ref, s in MERGED.secrets.items()}
    assert shapes["secret://fleet/c1-kubeconfig"] == ("cluster-api", ["value"])
    assert shapes["secret://argocd/cluster-c2"] == ("argocd", ["config", "name", "server"])
    assert "secret://fleet/prod-kubeconfig" not in shapes  # not labelled: not read
    assert sorted(CD) == sorted(name for name, _ in TABLE)


@pytest.mark.parametrize(("app", "expected"), TABLE)
def test_each_object_resolves_to_its_cluster_or_the_exact_problem(app: str, expected: str) -> None:
    read = CD[app]
    assert isinstance(read, CdObject)
    found = INDEX.resolve(read.destination)
    assert (found.reason if isinstance(found, Unresolved) else found) == expected


def test_no_problem_carries_a_value_of_a_secret() -> None:
    secrets = [o for o in OBJECTS if o["kind"] == "Secret"]
    values = {base64.b64decode(v).decode() for s in secrets for v in s["data"].values()}
    tokens = {
        line.split("token:")[1].strip(" }")
        for v in values
        for line in v.splitlines()
        if "token:" in line
    }
    assert tokens
    for _, expected in TABLE:
        assert not any(t in expected for t in tokens)


def test_bad_references_are_counted_problems_and_change_nothing_else() -> None:
    """The mirror's plan: every object that resolves is inserted on its cluster; each bad
    one is an unresolved entry (the actuator logs it and sets
    ``fleetwatch_reactor_cd_unresolved_objects`` to their number), nothing more."""
    objects: Mapping[str, CdObject | Unreadable] = CD
    result = plan(objects, INDEX, {})
    problems = {app: e for app, e in TABLE if e not in {c.name for c in store_of(MERGED)}}
    assert result.unresolved == problems
    assert {(i.name, i.cluster) for i in result.inserts} == {
        (app, e) for app, e in TABLE if app not in problems
    }
    assert not (result.moves or result.updates or result.deletes)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (None, "c3"),
        ("value", "c3"),
        (
            "value.yaml",
            "no cluster discovered from Secret secret://fleet/c3-kubeconfig (key 'value.yaml')",
        ),
    ],
)
def test_without_secrets_read_through_the_api_the_store_alone_decides(
    key: str | None, expected: str
) -> None:
    """A reactor without ``--discovery.kubernetes`` (or before its first list): the
    clusters came from ``POST /clusters`` with the ref discovery would give; a Cluster API
    Secret's cluster is recorded without a key, and ``key: value`` still names it."""
    index = ClusterIndex.of([KnownCluster("c3", None, "secret://fleet/c3-kubeconfig")])
    found = index.resolve(Destination("secret://fleet/c3-kubeconfig", key))
    assert (found.reason if isinstance(found, Unresolved) else found) == expected


def test_the_function_is_the_table() -> None:
    """:func:`resolve_secret` alone, on shapes the table names (a Secret's key present but
    holding no cluster discovery could read)."""
    from fleetwatch.discovery.secrets import SecretShape

    labelled = SecretShape("labelled", frozenset({"value", "broken"}))
    by_ref = {"secret://ns/s#value": ("a",)}
    assert resolve_secret("secret://ns/s", None, labelled, by_ref) == "a"
    broken = resolve_secret("secret://ns/s", "broken", labelled, by_ref)
    assert broken == Unresolved(
        "key 'broken' of Secret secret://ns/s holds no cluster discovery could read"
    )
    capi = SecretShape("cluster-api", frozenset({"value", "extra"}))
    assert resolve_secret("secret://ns/c-kubeconfig", "extra", capi, {}) == Unresolved(
        "Secret secret://ns/c-kubeconfig is a Cluster API Secret: its cluster is read from "
        "key 'value', not 'extra'"
    )
    assert resolve_secret("secret://ns/c-kubeconfig", "value", capi, {}) == Unresolved(
        "no cluster discovered from Secret secret://ns/c-kubeconfig"
    )
