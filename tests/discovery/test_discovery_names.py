"""Names are printable: one rule (fleetwatch.common.names) for every name discovery publishes.

A context of a kubeconfig file, an Argo CD Secret's ``name``, a Cluster API Secret's label
and a labelled Secret's context with a control character, a C1 control or a bidi override
name no cluster: each is a problem that shows the name escaped, and no ``str`` of a
problem carries the character. Pure: files under ``tmp_path`` and Secret dicts.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.common import names
from fleetwatch.discovery import Discoverer, DiscoveryProblem, merge, read_secret
from fleetwatch.discovery.files import walk_folder
from reactor.fields import NAME_PATTERN, is_name
from tests.helpers.discovery_names import BAD_NAMES, GOOD_NAMES, BadName, no_raw_control

SERVER = "https://127.0.0.11:6443"


def kubeconfig(*contexts: str, server: str = SERVER) -> str:
    """A kubeconfig whose contexts all use one cluster and one user."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": contexts[0],
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in contexts],
        },
        allow_unicode=True,
    )


def secret(name: str, data: dict[str, str], labels: dict[str, str], type_: str = "Opaque") -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "fleet",
            "labels": labels,
            "resourceVersion": "1",
            "uid": "u-1",
        },
        "type": type_,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def argocd(name: str, server: str = SERVER) -> Any:
    config = '{"bearerToken": "t", "tlsClientConfig": {"insecure": true}}'
    data = {"name": name, "server": server, "config": config}
    return secret("cluster-x", data, {"argocd.argoproj.io/secret-type": "cluster"})


def cluster_api(label: str) -> Any:
    labels = {"cluster.x-k8s.io/cluster-name": label}
    value = kubeconfig("admin@c1")
    return secret(f"{label}-kubeconfig", {"value": value}, labels, "cluster.x-k8s.io/secret")


def the_problem(problems: tuple[DiscoveryProblem, ...] | list[DiscoveryProblem]) -> str:
    """The one problem, as a log line shows it; never a raw character."""
    assert len(problems) == 1, problems
    shown = str(problems[0])
    no_raw_control(shown, lines=False)
    return shown


# -- the rule ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_name_with_a_control_or_format_character_is_refused_with_it_escaped(
    bad: BadName,
) -> None:
    problem = names.name_problem(bad.name)
    assert problem is not None
    assert bad.escape in problem and f"U+{ord(bad.char):04X}" in problem
    no_raw_control(problem, lines=False)
    assert not names.is_name(bad.name) and not is_name(bad.name)
    assert bad.escape in names.escaped(bad.name) and bad.char not in names.escaped(bad.name)


@pytest.mark.parametrize("good", GOOD_NAMES)
def test_printable_names_pass_and_show_as_they_are(good: str) -> None:
    assert names.name_problem(good) is None and is_name(good)
    assert names.escaped(good) == good


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "is empty"),
        (" prod", "starts or ends with a space"),
        ("x" * 254, "has 254 characters, over 253"),
        ("prod\u00a0east", "U+00A0 (a space other than U+0020, Zs)"),
        ("pro\u200bd", "U+200B (a format character, Cf)"),
        ("prod\u2028east", "U+2028 (a line separator, Zl)"),
        ("prod\udcffeast", "U+DCFF (a lone surrogate, Cs)"),
    ],
)
def test_the_rest_of_the_rule_is_the_reactor_apis(name: str, words: str) -> None:
    """Discovery refuses exactly what the reactor's API refuses: a cluster published under
    a name the reactor skips would fire alerts that pause nothing."""
    problem = names.name_problem(name)
    assert problem is not None and words in problem
    assert not is_name(name)


def test_the_apis_pattern_is_built_from_the_same_character_rule() -> None:
    inside = NAME_PATTERN[2 : NAME_PATTERN.index("]")]
    assert "\x1b" not in inside and "\u202e" not in inside and "\x9b" not in inside
    assert all(names.printable_char(chr(c)) for c in (0x41, 0xE9, 0x4E2D))


# -- from a kubeconfig file --------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_kubeconfig_context_with_such_a_name_is_a_problem_not_a_cluster(
    tmp_path: Path, bad: BadName
) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig("good", bad.name), encoding="utf-8")
    found = Discoverer(path, None).scan()
    assert [c.name for c in found.clusters] == ["good"]
    shown = the_problem(found.problems)
    assert f"(context 'prod{bad.escape}" in shown, shown
    assert f"): context name has U+{ord(bad.char):04X}" in shown, shown
    assert found.problems[0].context == bad.name  # the data as found: shards hash it


def test_a_server_url_with_a_control_character_is_a_problem_that_does_not_show_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig("prod", server="https://127.0.0.11:6443/\x1b]0;pwned\x07?t=SECRET"))
    found = Discoverer(path, None).scan()
    assert found.clusters == ()
    shown = the_problem(found.problems)
    assert "server URL that has U+001B (a control character, Cc) at position 25" in shown
    assert "SECRET" not in shown and "pwned" not in shown


def test_a_file_whose_name_has_a_control_character_is_a_problem_not_read(
    tmp_path: Path,
) -> None:
    (tmp_path / "good").write_text(kubeconfig("a"))
    (tmp_path / "bad\x1b[31m").write_text(kubeconfig("b"))
    files, problems = walk_folder(tmp_path)
    assert [f.name for f in files] == ["good"]
    assert [p.reason for p in problems] == [
        "its name has U+001B (a control character, Cc) at position 4: not read"
    ]
    found = Discoverer(None, tmp_path).scan()
    assert [c.name for c in found.clusters] == ["a"]
    assert "bad\\x1b[31m" in the_problem(found.problems)


def test_a_file_name_that_is_not_utf8_is_a_problem_not_read(tmp_path: Path) -> None:
    (Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))).write_text(kubeconfig("a"))
    found = Discoverer(None, tmp_path).scan()
    assert found.clusters == ()
    assert "U+DCE9 (a lone surrogate, Cs)" in the_problem(found.problems)


# -- from Secrets ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_an_argocd_secrets_name_key_with_such_a_name_is_a_problem(bad: BadName) -> None:
    read = read_secret(argocd(bad.name))
    assert read is not None and read.clusters == ()
    shown = the_problem(read.problems)
    assert shown.startswith("secret://fleet/cluster-x (context 'prod"), shown
    assert f"Argo CD cluster name (key 'name') has U+{ord(bad.char):04X}" in shown
    assert read.unreadable == {"secret://fleet/cluster-x"}  # the last good version stays


def test_an_argocd_secrets_server_with_a_control_character_is_a_problem() -> None:
    read = read_secret(argocd("prod", server="https://127.0.0.11\x9b2J:6443"))
    assert read is not None and read.clusters == ()
    assert "key 'server' has U+009B (a control character, Cc)" in the_problem(read.problems)


def test_an_argocd_secret_that_fleetwatch_cannot_probe_is_checked_too() -> None:
    """The ``awsAuthConfig`` path lists a cluster without a kubeconfig parse: the name
    rule still holds there."""
    obj = argocd("prod\x1beast")
    config = '{"awsAuthConfig": {"clusterName": "x"}}'
    obj["data"]["config"] = base64.b64encode(config.encode()).decode()
    read = read_secret(obj)
    assert read is not None and read.clusters == ()
    assert "'prod\\x1beast'" in the_problem(read.problems)


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_cluster_api_label_with_such_a_name_is_a_problem(bad: BadName) -> None:
    read = read_secret(cluster_api(bad.name))
    assert read is not None and read.kind == "cluster-api" and read.clusters == ()
    shown = the_problem(read.problems)
    assert "Cluster API cluster name (label 'cluster.x-k8s.io/cluster-name') has U+" in shown
    assert f"(context 'prod{bad.escape}" in shown


def test_a_cluster_api_kubeconfigs_current_context_follows_the_rule_too() -> None:
    obj = cluster_api("c1")
    value = kubeconfig("admin\x1b@c1")
    obj["data"]["value"] = base64.b64encode(value.encode()).decode()
    read = read_secret(obj)
    assert read is not None and read.clusters == ()
    shown = the_problem(read.problems)
    assert "(context 'c1'): context name has U+001B" in shown, shown


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_labelled_secrets_context_with_such_a_name_is_a_problem(bad: BadName) -> None:
    labels = {"fleetwatch.io/kubeconfig": "1"}
    obj = secret("kubeconfigs", {"k": kubeconfig("good", bad.name)}, labels)
    read = read_secret(obj)
    assert read is not None
    assert [c.cluster.name for c in read.clusters] == ["good"]
    shown = the_problem(read.problems)
    assert shown.startswith("secret://fleet/kubeconfigs#k (context 'prod"), shown


def test_merged_fleet_holds_none_of_the_refused_names(tmp_path: Path) -> None:
    """What the exporter publishes as label values and the reactor upserts: the merge."""
    path = tmp_path / "config"
    path.write_text(kubeconfig("file-ok", "file\x1bbad"))
    reads = [read_secret(argocd("argo\nbad")), read_secret(cluster_api("capi-ok"))]
    merged = merge(Discoverer(path, None).scan(), [r for r in reads if r is not None])
    assert sorted(c.name for c in merged.discovery.clusters) == ["capi-ok", "file-ok"]
    assert len(merged.discovery.problems) == 2
    for problem in merged.discovery.problems:
        no_raw_control(str(problem), lines=False)
