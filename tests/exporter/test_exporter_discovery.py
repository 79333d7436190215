"""Discovery: kubeconfig files -> clusters and problems (pure, no server)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.discovery import Discoverer, probeable
from tests.helpers.kubeconfig_docs import kubeconfig


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def names(found: Any) -> list[str]:
    return [c.name for c in found.clusters]


def test_main_then_folder_in_name_order_first_name_wins(tmp_path: Path) -> None:
    main = write(tmp_path / "config", kubeconfig("alpha", "beta"))
    folder = tmp_path / "d"
    folder.mkdir()
    write(folder / "b.yaml", kubeconfig("beta", "delta"))
    write(folder / "a.yml", kubeconfig("gamma"))
    write(folder / "c.conf", kubeconfig("epsilon"))

    found = Discoverer(main, folder).scan()

    assert names(found) == ["alpha", "beta", "gamma", "delta", "epsilon"]
    beta = next(c for c in found.clusters if c.name == "beta")
    assert beta.kubeconfig_secret_ref == str(main)
    assert beta.endpoint == "https://127.0.0.1:6443/beta"
    assert [(p.source, p.context) for p in found.problems] == [(str(folder / "b.yaml"), "beta")]
    assert "duplicate name: first seen in" in found.problems[0].reason


def test_files_of_any_name_count_and_hidden_ones_do_not(tmp_path: Path) -> None:
    """Cluster API's kubeconfig Secret has one key, ``value``: every name is a kubeconfig."""
    for name in ("value", "x.json", "y.yaml.bak", ".z.swp"):
        write(tmp_path / name, kubeconfig(name.replace(".", "-")))
    write(tmp_path / "ok.yaml", kubeconfig("ok"))
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["ok", "value", "x-json", "y-yaml-bak"]
    assert found.problems == ()


def test_invalid_yaml_is_a_problem_and_the_rest_is_discovered(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "clusters: [\n  token: hunter2-secret\n")
    write(tmp_path / "b.yaml", kubeconfig("fine"))
    write(tmp_path / "c.yaml", "- just\n- a list\n")
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["fine"]
    reasons = {Path(p.source).name: p.reason for p in found.problems}
    assert reasons["a.yaml"].startswith("invalid YAML at line")
    assert "hunter2" not in reasons["a.yaml"]
    assert reasons["c.yaml"] == "not a kubeconfig (a list of 2 items, not a mapping)"


def test_yaml_that_is_not_a_kubeconfig_is_not_called_empty(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "::: not yaml\n")
    write(tmp_path / "b.yaml", "foo: bar\nclusters: []\n")
    write(tmp_path / "c.yaml", "just some text\n")
    write(tmp_path / "d.yaml", "")
    write(tmp_path / "e.yaml", "apiVersion: v1\nkind: Config\ncontexts: []\n")
    write(tmp_path / "f.yaml", "apiVersion: v1\nkind: Config\n")
    found = Discoverer(None, tmp_path).scan()
    reasons = {Path(p.source).name: p.reason for p in found.problems}
    assert reasons == {
        "a.yaml": "not a kubeconfig (a mapping of 1 key, none of them 'contexts')",
        "b.yaml": "not a kubeconfig (a mapping of 2 keys, none of them 'contexts')",
        "c.yaml": "not a kubeconfig (a line of text, not a mapping)",
        "d.yaml": "not a kubeconfig (an empty document, not a mapping)",
        "e.yaml": "no contexts",
        "f.yaml": "no contexts",
    }


def test_context_with_missing_user_or_cluster_is_skipped(tmp_path: Path) -> None:
    doc = yaml.safe_load(kubeconfig("good", "nouser", "nocluster"))
    doc["users"] = [u for u in doc["users"] if u["name"] != "nouser"]
    doc["clusters"] = [c for c in doc["clusters"] if c["name"] != "nocluster"]
    write(tmp_path / "k.yaml", yaml.safe_dump(doc))
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["good"]
    assert {(p.context, p.reason) for p in found.problems} == {
        ("nouser", "user 'nouser' is missing"),
        ("nocluster", "cluster 'nocluster' is missing"),
    }


def test_a_server_url_with_credentials_is_refused_without_showing_them(tmp_path: Path) -> None:
    """Go sends a URL's user:password@ as basic auth: a credential that the endpoint (a
    metric label, a log line, an API answer) would otherwise carry."""
    doc = yaml.safe_load(kubeconfig("good", "leaky", "user-only"))
    doc["clusters"][1]["cluster"]["server"] = "https://admin:hunter2@127.0.0.1:6443"
    doc["clusters"][2]["cluster"]["server"] = "https://admin@127.0.0.2:6443/"
    write(tmp_path / "k.yaml", yaml.safe_dump(doc))
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["good"]
    reasons = {p.context: p.reason for p in found.problems}
    assert set(reasons) == {"leaky", "user-only"}
    assert all("credentials in its server URL" in r for r in reasons.values())
    assert "hunter2" not in repr(found) and "admin" not in repr(found)


def test_missing_main_kubeconfig_is_a_problem_the_folder_still_counts(tmp_path: Path) -> None:
    write(tmp_path / "k.yaml", kubeconfig("only"))
    missing = tmp_path / "nope" / "config"
    found = Discoverer(missing, tmp_path).scan()
    assert names(found) == ["only"]
    assert [(p.source, p.context, p.reason) for p in found.problems] == [
        (str(missing), None, "file not found")
    ]


def test_missing_folder_and_a_main_kubeconfig_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    found = Discoverer(tmp_path / "dir.yaml", None).scan()
    assert [p.reason for p in found.problems] == ["not a file"]
    absent = Discoverer(None, tmp_path / "absent").scan()
    assert absent.clusters == ()
    assert [(p.source, p.reason) for p in absent.problems] == [
        (str(tmp_path / "absent"), "folder not found")
    ]


def test_file_added_and_removed_between_scans(tmp_path: Path) -> None:
    discoverer = Discoverer(None, tmp_path)
    write(tmp_path / "a.yaml", kubeconfig("a"))
    assert names(discoverer.scan()) == ["a"]
    write(tmp_path / "b.yaml", kubeconfig("b"))
    assert names(discoverer.scan()) == ["a", "b"]
    (tmp_path / "a.yaml").unlink()
    assert names(discoverer.scan()) == ["b"]


def test_each_file_is_parsed_once_per_change(tmp_path: Path) -> None:
    big = write(tmp_path / "big.yaml", kubeconfig(*(f"c{i:04d}" for i in range(1000))))
    discoverer = Discoverer(None, tmp_path)
    assert len(discoverer.scan().clusters) == 1000
    assert discoverer.parses == 1
    for _ in range(3):
        discoverer.scan()
    assert discoverer.parses == 1
    write(big, kubeconfig(*(f"c{i:04d}" for i in range(999))))
    st = big.stat()
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert len(discoverer.scan().clusters) == 999
    assert discoverer.parses == 2


def test_problems_are_new_once_until_they_go_away(tmp_path: Path) -> None:
    discoverer = Discoverer(None, tmp_path)
    write(tmp_path / "bad.yaml", "{{{")
    first = discoverer.scan()
    assert len(first.new_problems) == 1
    assert discoverer.scan().new_problems == ()
    (tmp_path / "bad.yaml").unlink()
    assert discoverer.scan().problems == ()
    write(tmp_path / "bad.yaml", "{{{")
    assert len(discoverer.scan().new_problems) == 1


def test_context_config_is_minimal_and_hides_credentials(tmp_path: Path) -> None:
    write(tmp_path / "k.yaml", kubeconfig("a", "b", "c"))
    discoverer = Discoverer(None, tmp_path)
    cluster = discoverer.scan().clusters[1]
    ctx = discoverer.context_config(cluster)
    assert ctx is not None
    assert ctx.context == "b" and ctx.auth.token == "secret-b"  # its own user, only
    assert "secret-b" not in repr(ctx) and "secret-b" not in repr(ctx.auth)


def test_probeable() -> None:
    assert probeable(__file__)
    assert not probeable("kube-system/prod-eu-kubeconfig")
    assert not probeable(os.path.dirname(__file__))
