"""A cluster's labels for routing (fleetwatch.discovery.clusterlabels): the allowlist, and the
labels
of each Secret kind and of a kubeconfig context's ``fleetwatch.io/labels`` extension.

Pure: Secrets are dicts as the API returns them, kubeconfigs are files in tmp_path.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.discovery import Discoverer, Discovery, merge, read_secret
from fleetwatch.discovery.clusterlabels import (
    EXTENSION,
    NO_LABELS,
    Allowlist,
    AllowlistError,
    combined,
    context_labels,
    pairs,
)

SERVER = "https://prod.example:6443"
TEAM_ENV = Allowlist.parse("team,env")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(
    name: str, namespace: str, labels: dict[str, Any], data: dict[str, str], **kw: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "uid": f"uid-{namespace}-{name}",
            "resourceVersion": kw.get("rv", "1"),
        },
        "type": kw.get("type_", "Opaque"),
        "data": {k: b64(v) for k, v in data.items()},
    }


def kubeconfig(contexts: dict[str, dict[str, Any] | None], current: str = "") -> str:
    """One cluster and user per context; the value: its extension's labels (None: none)."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": current}
    doc["clusters"] = [{"name": n, "cluster": {"server": SERVER}} for n in contexts]
    doc["users"] = [{"name": n, "user": {"token": "t0ken"}} for n in contexts]
    doc["contexts"] = []
    for name, labels in contexts.items():
        body: dict[str, Any] = {"cluster": name, "user": name}
        if labels is not None:
            body["extensions"] = [
                {"name": "other.example/x", "extension": {"team": "not-this"}},
                {"name": EXTENSION, "extension": labels},
            ]
        doc["contexts"].append({"name": name, "context": body})
    return yaml.safe_dump(doc)


def argocd(name: str, labels: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    data = {"name": name, "server": SERVER, "config": json.dumps({"bearerToken": "t0ken"})}
    labels = {"argocd.argoproj.io/secret-type": "cluster", **labels}
    return secret(f"cluster-{name}", "argocd", labels, data, rv=rv)


# -- the allowlist, kube-state-metrics' --metric-labels-allowlist -----------------------

ALLOWED = [
    # (flag, key, allowed)
    ("team,env", "team", True),
    ("team,env", "env", True),
    ("team,env", "region", False),
    (" team , env ", "env", True),
    ("*", "anything.example.org/at-all", True),
    ("example.org/*", "example.org/team", True),
    ("example.org/*", "other.org/team", False),
    ("*-team", "platform-team", True),
    ("*-team", "platform-teams", False),
    ("clusters=[team,env]", "team", True),
    ("clusters=[*]", "region", True),
    ("*=[team]", "team", True),
    ("", "team", False),
    ("clusters=[]", "team", False),
]


@pytest.mark.parametrize(("flag", "key", "allowed"), ALLOWED)
def test_the_allowlist_allows_what_kube_state_metrics_would(
    flag: str, key: str, allowed: bool
) -> None:
    assert Allowlist.parse(flag).allows(key) is allowed


REFUSED = [
    ("team,,env", "an empty entry"),
    ("team,", "an empty entry"),
    ("*,team", "'*' allows every label: give it alone"),
    ("a*b*c", "only one '*' per entry"),
    ("pods=[app]", "resource 'pods': fleetwatch has one, 'clusters'"),
    ("clusters=team", "expected clusters=[label1,label2,...]"),
    ("te am", "entry 'te am' is not a label key"),
    ("team\x1b[2J", "is not a label key"),
]


@pytest.mark.parametrize(("flag", "message"), REFUSED)
def test_a_bad_allowlist_is_refused_saying_why(flag: str, message: str) -> None:
    with pytest.raises(AllowlistError, match=re.escape(message)):
        Allowlist.parse(flag)


def test_an_empty_allowlist_keeps_nothing() -> None:
    assert Allowlist.parse("").empty and Allowlist.parse("  ") == NO_LABELS
    assert NO_LABELS.pick({"team": "payments"}) == ((), [])


def test_labels_are_one_flat_sorted_tuple_of_interned_strings() -> None:
    one, _ = TEAM_ENV.pick({"team": "pay" + "ments", "env": "prod", "region": "eu"})
    two, _ = TEAM_ENV.pick({"env": "".join(["pr", "od"]), "team": "".join(["pay", "ments"])})
    assert one == ("env", "prod", "team", "payments") == two
    assert all(a is b for a, b in zip(one, two, strict=True))  # one string per value
    assert pairs(one) == [("env", "prod"), ("team", "payments")]


def test_a_label_that_cannot_be_shown_is_skipped_and_said_without_its_value() -> None:
    labels, problems = TEAM_ENV.pick({"team": "pay\x1b]0;pwned\x07", "env": 3, "other": "\x00"})
    assert labels == ()
    assert len(problems) == 2  # 'other' is not allowlisted: not looked at
    assert any("'team' skipped: its value has U+001B" in p for p in problems)
    assert any("'env' skipped: its value is not a string" in p for p in problems)
    assert not any("pwned" in p for p in problems)
    # An empty value is a value, as in Kubernetes.
    assert TEAM_ENV.pick({"team": ""}) == (("team", ""), [])


def test_the_context_label_wins_over_the_secret_label() -> None:
    assert combined(("env", "prod", "team", "a"), ("team", "b")) == ("env", "prod", "team", "b")
    assert combined((), ("team", "b")) == ("team", "b")


# -- each source ---------------------------------------------------------------------


def test_a_context_extension_names_the_context_labels() -> None:
    entry = yaml.safe_load(kubeconfig({"prod": {"team": "payments", "env": "prod"}}))
    labels, problems = context_labels(entry["contexts"][0], TEAM_ENV)
    assert labels == ("env", "prod", "team", "payments") and problems == []
    bad = {"name": "x", "context": {"extensions": [{"name": EXTENSION, "extension": ["a"]}]}}
    assert context_labels(bad, TEAM_ENV) == (
        (),
        [f"extension {EXTENSION!r} is not a map of labels"],
    )


def test_a_kubeconfig_file_gives_each_context_its_extension_labels(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(kubeconfig({"prod": {"team": "payments", "tier": 1}, "lab": None}))
    found = Discoverer(path, None, allowlist=Allowlist.parse("team,tier")).scan()
    labels = {c.name: c.labels for c in found.clusters}
    assert labels == {"prod": ("team", "payments"), "lab": ()}
    # The label skipped is a problem of its context, counted once; the context stays.
    assert [p.context for p in found.problems] == ["prod"]
    assert "'tier' skipped: its value is not a string" in found.problems[0].reason
    assert Discoverer(path, None).scan().clusters[0].labels == ()  # no allowlist: none


def test_an_argocd_secret_gives_its_labels() -> None:
    obj = argocd("prod", {"team": "payments", "env": "prod", "region": "eu"})
    read = read_secret(obj, allowlist=TEAM_ENV)
    assert read is not None and read.kind == "argocd"
    assert [c.cluster.labels for c in read.clusters] == [("env", "prod", "team", "payments")]
    star = read_secret(obj, allowlist=Allowlist.parse("*"))
    assert star is not None
    assert dict(pairs(star.clusters[0].cluster.labels))["argocd.argoproj.io/secret-type"] == (
        "cluster"
    )


def test_an_argocd_cluster_not_probeable_keeps_its_labels() -> None:
    obj = argocd("eks", {"team": "payments"})
    obj["data"]["config"] = b64(json.dumps({"awsAuthConfig": {"clusterName": "eks"}}))
    read = read_secret(obj, allowlist=TEAM_ENV)
    assert read is not None and read.clusters[0].cluster.not_probeable
    assert read.clusters[0].cluster.labels == ("team", "payments")


def test_a_cluster_api_secret_gives_the_labels_the_user_put_on_it() -> None:
    labels = {"cluster.x-k8s.io/cluster-name": "prod", "team": "payments"}
    text = kubeconfig({"prod-admin@prod": {"env": "prod"}}, current="prod-admin@prod")
    obj = secret(
        "prod-kubeconfig", "fleet", labels, {"value": text}, type_="cluster.x-k8s.io/secret"
    )
    read = read_secret(obj, allowlist=Allowlist.parse("team,env,cluster.x-k8s.io/*"))
    assert read is not None and read.kind == "cluster-api"
    (found,) = read.clusters
    assert found.cluster.name == "prod"
    assert dict(pairs(found.cluster.labels)) == {
        "cluster.x-k8s.io/cluster-name": "prod",
        "env": "prod",
        "team": "payments",
    }


def test_a_labelled_secret_gives_each_context_the_secret_labels_and_its_own() -> None:
    labels = {"fleetwatch.io/kubeconfig": "true", "team": "platform", "env": "dev"}
    text = kubeconfig({"a": {"team": "payments"}, "b": None})
    read = read_secret(secret("fleet", "team-a", labels, {"config": text}), allowlist=TEAM_ENV)
    assert read is not None and read.kind == "labelled"
    got = {c.cluster.name: c.cluster.labels for c in read.clusters}
    assert got == {"a": ("env", "dev", "team", "payments"), "b": ("env", "dev", "team", "platform")}


def test_a_secret_label_that_cannot_be_shown_is_a_problem_of_the_secret() -> None:
    read = read_secret(argocd("prod", {"team": "pay\u202eevil"}), allowlist=TEAM_ENV)
    assert read is not None and read.clusters[0].cluster.labels == ()
    (problem,) = read.problems
    assert problem.source == "secret://argocd/cluster-prod"
    assert "the Secret's label 'team' skipped" in problem.reason and "evil" not in problem.reason


def test_the_argocd_and_cluster_api_secrets_of_one_cluster_pool_their_labels() -> None:
    """One cluster known twice (same name, same server): the Argo CD Secret (kept, by
    namespace) carries the team, the Cluster API one the region; the cluster has both."""
    argo = read_secret(argocd("prod", {"team": "payments"}), allowlist=Allowlist.parse("*"))
    text = kubeconfig({"prod-admin@prod": None}, current="prod-admin@prod")
    capi_labels = {"cluster.x-k8s.io/cluster-name": "prod", "region": "eu", "team": "other"}
    capi = read_secret(
        secret(
            "prod-kubeconfig",
            "fleet",
            capi_labels,
            {"value": text},
            type_="cluster.x-k8s.io/secret",
        ),
        allowlist=Allowlist.parse("team,region"),
    )
    assert argo is not None and capi is not None
    merged = merge(Discovery((), ()), [capi, argo])
    (cluster,) = merged.discovery.clusters
    assert cluster.kubeconfig_secret_ref == "secret://argocd/cluster-prod"
    got = dict(pairs(cluster.labels))
    assert got["team"] == "payments" and got["region"] == "eu"  # the kept one's team wins


def test_no_secret_data_is_kept_beside_the_labels() -> None:
    read = read_secret(argocd("prod", {"team": "payments"}), allowlist=TEAM_ENV)
    assert read is not None
    assert "t0ken" not in repr(read.clusters[0].cluster)


def test_a_label_changed_in_a_kubeconfig_file_is_seen_at_the_next_scan(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(kubeconfig({"prod": {"team": "payments"}}))
    discoverer = Discoverer(path, None, allowlist=TEAM_ENV)
    assert discoverer.scan().clusters[0].labels == ("team", "payments")
    path.write_text(kubeconfig({"prod": {"team": "checkout", "env": "prod"}}) + "\n# v2\n")
    assert discoverer.scan().clusters[0].labels == ("env", "prod", "team", "checkout")
    assert discoverer.parses == 2
