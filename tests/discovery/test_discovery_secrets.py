"""Secrets of the management cluster -> clusters and problems (fleetwatch.discovery.secrets,
.merge).

Not live but the last test: Secret objects are dicts as the API returns them. Credentials
are compared with what the same kubeconfig gives through the file scan, and every repr
and message is searched for the sentinel values the Secrets carry.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.discovery import (
    Cluster,
    ContextConfig,
    Discoverer,
    Discovery,
    DiscoveryProblem,
    LabelSelector,
    SecretClusters,
    merge,
    parse_secret_ref,
    probeable,
    read_secret,
    secret_ref,
)
from fleetwatch.discovery.contextauth import ContextAuth
from fleetwatch.discovery.shard import Shard
from tests.helpers.discovery_informer import api_secret

TOKEN = "SENTINEL-token-7f3a"
PASSWORD = "SENTINEL-password-91c2"
CA = b"-----BEGIN CERTIFICATE-----\nSENTINEL-ca-55aa\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nSENTINEL-cert-66bb\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN EC PRIVATE KEY-----\nSENTINEL-key-77cc\n-----END EC PRIVATE KEY-----\n"
PROXY = "http://fleet:SENTINEL-proxy-88dd@proxy.example:3128"
ENV = "SENTINEL-env-99ee"
SENTINELS = [TOKEN, PASSWORD, "SENTINEL-ca", "SENTINEL-cert", "SENTINEL-key", "SENTINEL-proxy"]
SENTINELS += [ENV, *(base64.b64encode(v).decode()[:24] for v in (CA, CERT, KEY))]
SERVER = "https://prod.example:6443"
EXEC_API = "client.authentication.k8s.io/v1beta1"


def b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def secret(
    name: str,
    namespace: str = "argocd",
    *,
    data: dict[str, str | bytes] | None = None,
    labels: dict[str, str] | None = None,
    type_: str = "Opaque",
    rv: str = "1001",
    uid: str = "7c1e6f0e-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    """A Secret as the API returns it (``data`` base64-encoded here)."""
    return api_secret(name, namespace, labels or {}, data, type_=type_, rv=rv, uid=uid)


def argo(
    config: dict[str, Any] | str | None,
    *,
    name: str = "prod",
    server: str = SERVER,
    secret_name: str = "cluster-prod",
    namespace: str = "argocd",
) -> dict[str, Any]:
    data: dict[str, str | bytes] = {"name": name, "server": server}
    if config is not None:
        data["config"] = config if isinstance(config, str) else json.dumps(config)
    labels = {"argocd.argoproj.io/secret-type": "cluster"}
    return secret(secret_name, namespace, data=data, labels=labels)


def kubeconfig(
    contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]], current: str = ""
) -> str:
    """A kubeconfig text: context name -> (its cluster body, its user body)."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": current}
    doc["clusters"] = [{"name": n, "cluster": c} for n, (c, _) in contexts.items()]
    doc["users"] = [{"name": f"{n}-user", "user": u} for n, (_, u) in contexts.items()]
    doc["contexts"] = [
        {"name": n, "context": {"cluster": n, "user": f"{n}-user"}} for n in contexts
    ]
    return yaml.safe_dump(doc)


def capi(cluster: str, value: str | None, namespace: str = "fleet") -> dict[str, Any]:
    return secret(
        f"{cluster}-kubeconfig",
        namespace,
        data={} if value is None else {"value": value},
        labels={"cluster.x-k8s.io/cluster-name": cluster},
        type_="cluster.x-k8s.io/secret",
    )


def labelled(name: str, data: dict[str, str | bytes], namespace: str = "team-a") -> dict[str, Any]:
    return secret(name, namespace, data=data, labels={"fleetwatch.io/kubeconfig": "true"})


def read(obj: dict[str, Any], **kwargs: Any) -> SecretClusters:
    found = read_secret(obj, **kwargs)
    assert found is not None
    return found


def file_config(tmp_path: Path, text: str, context: str) -> ContextConfig:
    """What the file scan makes of ``context`` in a kubeconfig file holding ``text``."""
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(text)
    discoverer = Discoverer(path, None)
    cluster = next(c for c in discoverer.scan().clusters if c.name == context)
    config = discoverer.context_config(cluster)
    assert config is not None
    return config


def no_sentinel(*things: object) -> None:
    text = "\n".join(f"{t!r}\n{t!s}" for t in things)
    leaked = [s for s in SENTINELS if s in text]
    assert leaked == [], f"{leaked} in {text}"


# -- Argo CD: each auth form gives what the same kubeconfig file gives ----------------

ARGO_FORMS: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (id, Argo CD config, the kubeconfig cluster body besides server, its user body)
    ("bearer token", {"bearerToken": TOKEN}, {}, {"token": TOKEN}),
    (
        "basic",
        {"username": "admin", "password": PASSWORD},
        {},
        {"username": "admin", "password": PASSWORD},
    ),
    ("username alone", {"username": "admin"}, {}, {"username": "admin", "password": ""}),
    (
        "client certificate",
        {"tlsClientConfig": {"certData": b64(CERT), "keyData": b64(KEY)}},
        {},
        {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
    ),
    (
        "CA data",
        {"bearerToken": TOKEN, "tlsClientConfig": {"caData": b64(CA), "insecure": False}},
        {"certificate-authority-data": b64(CA)},
        {"token": TOKEN},
    ),
    (
        "insecure",
        {"bearerToken": TOKEN, "tlsClientConfig": {"insecure": True}},
        {"insecure-skip-tls-verify": True},
        {"token": TOKEN},
    ),
    (
        "serverName",
        {"tlsClientConfig": {"serverName": "api.internal", "caData": b64(CA)}},
        {"tls-server-name": "api.internal", "certificate-authority-data": b64(CA)},
        {},
    ),
    (
        "exec (wins over the token, as in Argo CD)",
        {
            "bearerToken": TOKEN,
            "execProviderConfig": {
                "command": "kubelogin",
                "args": ["get-token", "--server-id", "6dae42f8"],
                "env": {"Z_LAST": "z", "AAD_SECRET": ENV},
                "apiVersion": EXEC_API,
                "installHint": "install kubelogin",
            },
        },
        {},
        {
            "exec": {
                "interactiveMode": "Never",
                "apiVersion": EXEC_API,
                "command": "kubelogin",
                "installHint": "install kubelogin",
                "args": ["get-token", "--server-id", "6dae42f8"],
                "env": [{"name": "AAD_SECRET", "value": ENV}, {"name": "Z_LAST", "value": "z"}],
            }
        },
    ),
    (
        "exec given the cluster's information",
        {
            "execProviderConfig": {
                "command": "plugin",
                "apiVersion": EXEC_API,
                "provideClusterInfo": True,
                "config": {"clusterName": "prod"},
            }
        },
        {
            "extensions": [
                {"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": "prod"}}
            ]
        },
        {
            "exec": {
                "interactiveMode": "Never",
                "apiVersion": EXEC_API,
                "command": "plugin",
                "provideClusterInfo": True,
            }
        },
    ),
    ("proxyUrl", {"bearerToken": TOKEN, "proxyUrl": PROXY}, {"proxy-url": PROXY}, {"token": TOKEN}),
    ("no config: anonymous", {}, {}, {}),
]


@pytest.mark.parametrize(
    ("config", "cluster_body", "user_body"),
    [f[1:] for f in ARGO_FORMS],
    ids=[f[0] for f in ARGO_FORMS],
)
def test_argocd_auth_form_resolves_as_the_same_kubeconfig_file(
    tmp_path: Path, config: dict[str, Any], cluster_body: dict[str, Any], user_body: Any
) -> None:
    found = read(argo(config or None), exec_plugins=True)
    assert found.kind == "argocd" and found.problems == ()
    (only,) = found.clusters
    proxy = cluster_body.get("proxy-url")
    ref = "secret://argocd/cluster-prod"
    assert only.cluster == Cluster("prod", SERVER, ref, "prod", proxy)
    assert only.config is not None
    assert (only.config.source, only.config.context) == (ref, "prod")
    text = kubeconfig({"prod": ({"server": SERVER, **cluster_body}, user_body)})
    from_file = file_config(tmp_path, text, "prod").auth
    # A file's plugin runs in the file's folder; a Secret has none (the exporter's own).
    assert only.config.auth == dataclasses.replace(from_file, exec_cwd="")
    assert only.config.auth.exec == from_file.exec  # compared too, though not hashed
    no_sentinel(found, only.config.auth, only.cluster)


def test_argocd_server_loses_its_trailing_slash_as_argocd_reads_it() -> None:
    (only,) = read(argo({"bearerToken": TOKEN}, server=SERVER + "/")).clusters
    assert only.cluster.endpoint == SERVER


def test_argocd_server_with_credentials_is_a_problem_that_does_not_show_them() -> None:
    found = read(argo({"bearerToken": TOKEN}, server="https://ops:hunter2@127.0.0.9:6443"))
    assert found.clusters == ()
    (problem,) = found.problems
    assert "credentials in its server URL" in problem.reason
    assert "hunter2" not in repr(found)


# -- listed, not probeable ---------------------------------------------------------------

NOT_PROBEABLE = [
    (
        argo({"awsAuthConfig": {"clusterName": "eks-prod", "roleARN": "arn:aws:iam::1:role/x"}}),
        {},
        "its config has awsAuthConfig: Argo CD signs in with argocd-k8s-auth and its pod's "
        "AWS identity, which fleetwatch does not run",
    ),
    (
        argo({"bearerToken": TOKEN}, server="https://kubernetes.default.svc"),
        {},
        "its server is Argo CD's in-cluster address https://kubernetes.default.svc, reached "
        "with Argo CD's own service account, which the Secret does not hold",
    ),
    (
        argo({"execProviderConfig": {"command": "aws", "apiVersion": EXEC_API}}),
        {"exec_plugins": False},
        "its config has execProviderConfig, and exec plugins from Secrets are refused",
    ),
    (
        capi("prod", kubeconfig({"p": ({"server": SERVER}, {"tokenFile": "/var/run/t"})}, "p")),
        {},
        "its kubeconfig names a file (tokenFile): a kubeconfig read from a Secret must "
        "embed its credentials",
    ),
    (
        capi(
            "prod", kubeconfig({"p": ({"server": SERVER, "certificate-authority": "ca"}, {})}, "p")
        ),
        {},
        "its kubeconfig names a file (certificate-authority): a kubeconfig read from a Secret "
        "must embed its credentials",
    ),
    (
        capi(
            "prod",
            kubeconfig({"p": ({"server": SERVER}, {"auth-provider": {"name": "oidc"}})}, "p"),
        ),
        {},
        "its user has an auth-provider: only kubeconfig files may use one (the kubernetes "
        "client reads and writes files for it)",
    ),
    (
        capi("prod", kubeconfig({"p": ({"server": SERVER}, {"exec": {"command": "x"}})}, "p")),
        {"exec_plugins": False},
        "its user has an exec plugin, and exec plugins from Secrets are refused",
    ),
]


@pytest.mark.parametrize(("obj", "kwargs", "reason"), NOT_PROBEABLE)
def test_auth_form_fleetwatch_cannot_run_is_listed_not_probeable_with_the_reason(
    obj: dict[str, Any], kwargs: dict[str, Any], reason: str
) -> None:
    found = read(obj, **kwargs)
    assert found.problems == ()
    (only,) = found.clusters
    assert only.cluster.name == "prod" and only.cluster.not_probeable == reason
    assert only.config is None
    merged = merge(Discovery((), ()), [found])
    assert merged.discovery.clusters == (only.cluster,)
    assert merged.held == frozenset() and merged.context_config(only.cluster) is None
    assert not probeable(only.cluster.kubeconfig_secret_ref, merged.held)


# -- problems: precise, never a value -------------------------------------------------

PROBLEMS = [
    (
        argo("{not json " + TOKEN),
        (
            "prod",
            "Argo CD cluster config: 'config' is not JSON "
            "(line 1, column 2: Expecting property name enclosed in double quotes)",
        ),
    ),
    (
        argo(json.dumps([TOKEN])),
        ("prod", "Argo CD cluster config: 'config' is a list, not a JSON object"),
    ),
    (
        argo({"bearerToken": 12}),
        ("prod", "Argo CD cluster config: 'bearerToken' is a number, not a string"),
    ),
    (
        argo({"tlsClientConfig": {"insecure": "true"}}),
        ("prod", "Argo CD cluster config: 'tlsClientConfig.insecure' is a string, not a boolean"),
    ),
    (
        argo({"tlsClientConfig": {"caData": PASSWORD + "!"}}),
        ("prod", "Argo CD cluster config: 'tlsClientConfig.caData' is not base64"),
    ),
    (
        argo({"execProviderConfig": {"env": {"K": 1}}}),
        ("prod", "Argo CD cluster config: 'execProviderConfig.env' is not an object of strings"),
    ),
    (
        argo({"awsAuthConfig": "eks"}),
        ("prod", "Argo CD cluster config: 'awsAuthConfig' is a string, not an object"),
    ),
    (argo({}, server=""), ("prod", "no 'server' key")),
    (argo({}, name=""), (None, "no 'name' key")),
    (capi("prod", None), ("prod", "no 'value' key (Cluster API keeps the kubeconfig there)")),
    (
        capi("prod", f"token: {TOKEN}\n"),
        ("prod", "not a kubeconfig (a mapping of 1 key, none of them 'contexts')"),
    ),
    (
        capi("prod", kubeconfig({"p": ({"server": SERVER}, {"token": TOKEN})})),
        ("prod", "its kubeconfig has no current-context"),
    ),
    (
        capi("prod", kubeconfig({"p": ({"server": SERVER}, {"token": TOKEN})}, "q")),
        ("prod", "its kubeconfig's current-context names none of its contexts"),
    ),
    (
        capi("prod", kubeconfig({"p": ({}, {"token": TOKEN})}, "p")),
        ("prod", "cluster 'p' has no server"),
    ),
]


@pytest.mark.parametrize(("obj", "expected"), PROBLEMS)
def test_unreadable_secret_is_a_precise_problem_without_a_value(
    obj: dict[str, Any], expected: tuple[str | None, str]
) -> None:
    found = read(obj)
    assert found.clusters == ()
    ref = secret_ref(obj["metadata"]["namespace"], obj["metadata"]["name"])
    assert found.problems == (DiscoveryProblem(ref, *expected),)
    no_sentinel(found, *found.problems)


def test_data_value_that_is_not_base64_is_a_problem() -> None:
    obj = argo({"bearerToken": TOKEN})
    obj["data"]["server"] = "%%" + TOKEN
    assert read(obj).problems == (
        DiscoveryProblem("secret://argocd/cluster-prod", "prod", "key 'server' is not base64"),
    )
    no_sentinel(read(obj))


# -- Cluster API and labelled Secrets ----------------------------------------------------


def test_cluster_api_secret_is_its_cluster_at_the_current_context() -> None:
    value = kubeconfig(
        {
            "other": ({"server": "https://other:6443"}, {"token": TOKEN}),
            "wl-1-admin@wl-1": (
                {"server": SERVER, "certificate-authority-data": b64(CA)},
                {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
            ),
        },
        current="wl-1-admin@wl-1",
    )
    found = read(capi("wl-1", value))
    assert (found.kind, found.problems) == ("cluster-api", ())
    (only,) = found.clusters
    ref = "secret://fleet/wl-1-kubeconfig"
    assert only.cluster == Cluster("wl-1", SERVER, ref, "wl-1-admin@wl-1")
    assert only.config is not None and only.config.source == ref
    assert (only.config.auth.ca, only.config.auth.cert, only.config.auth.key) == (CA, CERT, KEY)
    no_sentinel(found, only.config)


IGNORED = [
    secret("cluster-repo", labels={"argocd.argoproj.io/secret-type": "repository"}),
    capi("wl-1", None)
    | {
        "metadata": {
            "name": "wl-1-ca",
            "namespace": "fleet",
            "labels": {"cluster.x-k8s.io/cluster-name": "wl-1"},
        }
    },
    secret("wl-1-kubeconfig", labels={"cluster.x-k8s.io/cluster-name": "wl-1"}),  # not the type
    secret("plain", data={"value": "x"}),
    {"kind": "Secret"},
]


@pytest.mark.parametrize("obj", IGNORED)
def test_secret_of_none_of_the_kinds_is_ignored(obj: dict[str, Any]) -> None:
    assert read_secret(obj) is None


def test_other_cluster_api_secret_counts_when_the_user_labels_it() -> None:
    kc = kubeconfig({"wl-1-user": ({"server": SERVER}, {"token": TOKEN})}, "wl-1-user")
    obj = capi("wl-1", kc)
    obj["metadata"]["name"] = "wl-1-user-kubeconfig"
    assert read_secret(obj) is None
    obj["metadata"]["labels"]["fleetwatch.io/kubeconfig"] = "true"
    found = read(obj)
    assert found.kind == "labelled"
    assert [c.cluster.name for c in found.clusters] == ["wl-1-user"]


def test_argocd_label_wins_over_the_users_label() -> None:
    obj = argo({"bearerToken": TOKEN})
    obj["metadata"]["labels"]["fleetwatch.io/kubeconfig"] = "true"
    assert read(obj).kind == "argocd"


def test_labelled_secret_gives_every_context_of_every_key_with_the_key_in_the_ref() -> None:
    token = {"token": TOKEN}
    found = read(
        labelled(
            "kubeconfigs",
            {
                "z.yaml": kubeconfig({"z1": ({"server": "https://z1:6443"}, token)}),
                "a.yaml": kubeconfig(
                    {
                        "a1": ({"server": "https://a1:6443"}, token),
                        "a2": ({"server": "https://a2:6443"}, {"password": PASSWORD}),
                        "a3": ({}, token),
                    }
                ),
                "notes": "just: text\n",
            },
        )
    )
    assert found.kind == "labelled"
    a, z, notes = (f"secret://team-a/kubeconfigs#{k}" for k in ("a.yaml", "z.yaml", "notes"))
    assert [
        (c.cluster.name, c.cluster.endpoint, c.cluster.kubeconfig_secret_ref)
        for c in found.clusters
    ] == [
        ("a1", "https://a1:6443", a),
        ("a2", "https://a2:6443", a),
        ("z1", "https://z1:6443", z),
    ]
    assert all(
        c.config is not None and c.config.source == c.cluster.kubeconfig_secret_ref
        for c in found.clusters
    )
    assert found.problems == (
        DiscoveryProblem(a, "a3", "cluster 'a3' has no server"),
        DiscoveryProblem(
            notes, None, "not a kubeconfig (a mapping of 1 key, none of them 'contexts')"
        ),
    )
    no_sentinel(found, *(c.config for c in found.clusters))


def test_labelled_secret_without_keys_is_a_problem() -> None:
    found = read(labelled("empty", {}))
    assert found.problems == (
        DiscoveryProblem(
            "secret://team-a/empty",
            None,
            "no keys: a labelled Secret holds kubeconfigs in its keys",
        ),
    )


def test_users_selector_chooses_the_labelled_secrets() -> None:
    selector = LabelSelector.parse("fleet in (prod,staging),!skip")
    kc = kubeconfig({"p": ({"server": SERVER}, {})})
    mine = secret("k", data={"k": kc}, labels={"fleet": "prod"})
    skipped = secret("k", data={"k": kc}, labels={"fleet": "prod", "skip": ""})
    assert read(mine, selector=selector).kind == "labelled"
    assert read_secret(skipped, selector=selector) is None
    assert read_secret(labelled("x", {"k": kc}), selector=selector) is None


# -- versions ------------------------------------------------------------------------


def test_version_changes_with_the_secrets_resource_version_and_uid() -> None:
    def version(**kwargs: str) -> tuple[int, ...]:
        obj = argo({"bearerToken": TOKEN})
        obj["metadata"].update(kwargs)
        (only,) = read(obj).clusters
        assert only.config is not None and only.config.version == read(obj).version
        return only.config.version

    assert version(resourceVersion="1001") == version(resourceVersion="1001")
    assert version(resourceVersion="1001") != version(resourceVersion="1002")
    assert version(uid="a") != version(uid="b")


# -- merge: duplicates, order, shards ------------------------------------------------


def file_scan(tmp_path: Path, names: list[str], shard: Shard | None = None) -> Discovery:
    path = tmp_path / "main.yaml"
    path.write_text(kubeconfig({n: ({"server": f"https://{n}:6443"}, {}) for n in names}))
    return Discoverer(path, None, shard=shard).scan()


def test_duplicates_files_first_then_secrets_by_namespace_and_name(tmp_path: Path) -> None:
    files = file_scan(tmp_path, ["prod"])
    path = str(tmp_path / "main.yaml")
    b_prod = read(argo({"bearerToken": TOKEN}, namespace="b", secret_name="prod"))
    a_both = read(argo({"bearerToken": TOKEN}, name="both", namespace="a", secret_name="x"))
    b_both = read(argo({"bearerToken": TOKEN}, name="both", namespace="b", secret_name="a"))
    a_prod = read(labelled("p", {"k": kubeconfig({"prod": ({"server": SERVER}, {})})}, "a"))
    merged = merge(files, [b_prod, b_both, a_prod, a_both])  # any order in
    found = merged.discovery
    assert [(c.name, c.kubeconfig_secret_ref) for c in found.clusters] == [
        ("prod", path),
        ("both", "secret://a/x"),
    ]
    assert found.problems == (  # b/a is an alias (below): no problem
        DiscoveryProblem("secret://a/p#k", "prod", f"duplicate name: first seen in {path}"),
        DiscoveryProblem("secret://b/prod", "prod", f"duplicate name: first seen in {path}"),
    )
    assert found.fleet_size == 2 and merged.held == {"secret://a/x"}
    both = found.clusters[1]
    assert merged.context_config(both) is a_both.clusters[0].config
    assert merged.context_config(found.clusters[0]) is None  # a file's: the Discoverer's
    assert probeable("secret://a/x", merged.held) and not probeable("secret://b/a", merged.held)
    # b/a is "both" at the same server: the same cluster known twice; the prods are not
    assert merged.aliases == {"secret://b/a": "both"}


def test_argo_cds_and_cluster_apis_secrets_of_one_cluster_alias_its_second() -> None:
    """A management cluster running both: Argo CD's Secret (namespace argocd sorts first)
    is kept, Cluster API's is set aside as its alias, which is no problem (every such
    management cluster has one per cluster); a duplicate name at another server is another
    cluster, never an alias, and a problem."""
    kept = read(argo({"bearerToken": TOKEN}, name="prod", server=SERVER + "/"))
    same = read(capi("prod", kubeconfig({"prod": ({"server": SERVER}, {})}, "prod")))
    elsewhere = kubeconfig({"prod": ({"server": "https://elsewhere:6443"}, {})}, "prod")
    other = read(capi("prod", elsewhere, "zz"))
    merged = merge(Discovery((), ()), [same, other, kept])
    assert [c.kubeconfig_secret_ref for c in merged.discovery.clusters] == [
        "secret://argocd/cluster-prod"
    ]
    duplicates = {p.source for p in merged.discovery.problems if "duplicate" in p.reason}
    assert duplicates == {"secret://zz/prod-kubeconfig"}
    assert merged.aliases == {"secret://fleet/prod-kubeconfig": "prod"}


def test_shard_keeps_its_names_and_problems_and_counts_the_whole_fleet(tmp_path: Path) -> None:
    names = [f"c{i:02d}" for i in range(12)]  # Secrets come by name
    shard = Shard(1, 3)
    files = file_scan(tmp_path, names[:6])
    secrets = [read(argo({"bearerToken": TOKEN}, name=n, secret_name=n)) for n in names[6:]] + [
        read(argo("[]", name="c00", secret_name="broken")),
        read(argo({}, name="", secret_name="nameless")),
    ]
    merged = merge(files, secrets, shard=shard)
    found = merged.discovery
    assert [c.name for c in found.clusters] == [n for n in names if shard.owns(n)]
    assert found.fleet_size == 12
    assert {p.source for p in found.problems} == (
        {"secret://argocd/nameless"} | ({"secret://argocd/broken"} if shard.owns("c00") else set())
    )
    assert merged.held == {f"secret://argocd/{n}" for n in names[6:] if shard.owns(n)}
    # The file scan may come sharded: the same fleet.
    sharded = merge(file_scan(tmp_path, names[:6], shard), secrets, shard=shard).discovery
    assert (sharded.clusters, sharded.problems, sharded.fleet_size) == (
        found.clusters,
        found.problems,
        12,
    )


def test_new_problems_are_those_not_in_the_previous_merge() -> None:
    broken = read(argo("[]"))
    first = merge(Discovery((), ()), [broken]).discovery
    assert first.new_problems == first.problems != ()
    again = merge(Discovery((), ()), [broken], previous=first.problems).discovery
    assert again.problems == first.problems and again.new_problems == ()


# -- refs and probeability -----------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("secret://ns/name", ("ns", "name", None)),
        ("secret://ns/name#value.yaml", ("ns", "name", "value.yaml")),
        ("secret://ns", None),
        ("secret://ns/a/b", None),
        ("secret://ns/name#", None),
        ("/etc/kubeconfig", None),
    ],
)
def test_secret_refs_parse_back(ref: str, parsed: tuple[str, str, str | None] | None) -> None:
    assert parse_secret_ref(ref) == parsed
    if parsed is not None:
        assert secret_ref(*parsed) == ref


def test_probeable_files_unchanged_and_secret_refs_only_when_held(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("x")
    assert probeable(str(path)) and not probeable(str(tmp_path / "missing"))
    assert not probeable("prod-kubeconfig")  # a bare Secret name given to the reactor
    assert not probeable("secret://ns/k")
    assert probeable("secret://ns/k", {"secret://ns/k"})
    (tmp_path / "secret:").mkdir()
    assert not probeable("secret://ns/k")  # never looked up as a file


# -- nothing read from a Secret shows --------------------------------------------------


def test_no_secret_value_in_any_repr_str_or_problem(tmp_path: Path) -> None:
    objs = [argo(f[1] or None) for f in ARGO_FORMS] + [o for o, _, _ in NOT_PROBEABLE]
    objs += [o for o, _ in PROBLEMS]
    objs.append(
        labelled(
            "l",
            {
                "k": kubeconfig(
                    {
                        "l": (
                            {"server": SERVER, "proxy-url": PROXY},
                            {"token": TOKEN, "client-key-data": "@@"},
                        )
                    }
                )
            },
        )
    )
    found = [read(o) for o in objs]
    merged = merge(file_scan(tmp_path, ["prod"]), found)
    configs = [c.config for f in found for c in f.clusters if c.config is not None]
    auths: list[ContextAuth] = [c.auth for c in configs]
    no_sentinel(merged, merged.discovery, *merged.discovery.problems, *found, *configs, *auths)
    no_sentinel(*(str(p) for p in merged.discovery.problems))
