"""Where kubeconfigs come from: kubectl's KUBECONFIG list, and a folder of mounted Secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.settings import resolve
from fleetwatch.discovery import Discoverer, KubeconfigList, main_kubeconfig


def doc(
    contexts: dict[str, tuple[str, str]] | None = None,
    clusters: dict[str, str] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
) -> str:
    """A kubeconfig: contexts name -> (cluster, user), clusters name -> server."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": n, "cluster": {"server": s}} for n, s in (clusters or {}).items()
            ],
            "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
            "contexts": [
                {"name": n, "context": {"cluster": c, "user": u}}
                for n, (c, u) in (contexts or {}).items()
            ],
        }
    )


def simple(*names: str) -> str:
    return doc(
        {n: (n, n) for n in names},
        {n: f"https://{n}" for n in names},
        {n: {"token": f"secret-{n}"} for n in names},
    )


def found(discoverer: Discoverer) -> list[tuple[str, str, str]]:
    """(name, endpoint, source file name) of each cluster of a scan."""
    return [
        (c.name, c.endpoint, Path(c.kubeconfig_secret_ref).name) for c in discoverer.scan().clusters
    ]


# --- KUBECONFIG ----------------------------------------------------------------------


def test_kubeconfig_list_is_merged_map_by_map_first_file_wins(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = tmp_path / "one" / "a"
    second = tmp_path / "two" / "b"
    # a's context "prod" uses a cluster and a user that only b defines; "shared" is
    # defined by both: a's cluster entry wins, and so does a's context "dup".
    first.write_text(
        doc(
            {"prod": ("prod-cluster", "prod-user"), "dup": ("shared", "local")},
            {"shared": "https://from-a"},
            {"local": {"token": "a"}},
        )
    )
    second.write_text(
        doc(
            {"dup": ("shared", "local"), "stage": ("shared", "prod-user")},
            {"prod-cluster": "https://prod", "shared": "https://from-b"},
            {"prod-user": {"tokenFile": "token"}},
        )
    )
    missing = tmp_path / "not-there"
    discoverer = Discoverer(KubeconfigList((first, missing, second)), None)
    assert found(discoverer) == [
        ("prod", "https://prod", "a"),
        ("dup", "https://from-a", "a"),
        ("stage", "https://from-a", "b"),
    ]
    scan = discoverer.scan()
    assert scan.problems == ()  # the missing listed file is skipped, as kubectl does
    # A relative path of an entry is relative to the file that defines the entry.
    prod = discoverer.context_config(scan.clusters[0])
    assert prod is not None and prod.base_path == str(tmp_path / "one")
    assert prod.auth.token_file == str(tmp_path / "two" / "token")
    stage = discoverer.context_config(scan.clusters[2])
    # Defined by the context's own file: relative to it, as the kubernetes client has it.
    assert stage is not None and stage.auth.token_file == str(tmp_path / "two" / "token")


def test_a_change_to_any_listed_file_is_a_new_version_of_its_contexts(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text(doc({"x": ("c", "u")}, {"c": "https://c"}))
    second.write_text(doc({}, {}, {"u": {"token": "old"}}))
    discoverer = Discoverer(KubeconfigList((first, second)), None)
    before = discoverer.context_config(discoverer.scan().clusters[0])
    second.write_text(doc({}, {}, {"u": {"token": "new-token"}}))
    after = discoverer.context_config(discoverer.scan().clusters[0])
    assert before is not None and after is not None
    assert before.version != after.version  # credentials are built again
    assert after.auth.token == "new-token"


def test_main_kubeconfig_as_kubectl_finds_it(tmp_path: Path) -> None:
    home = str(Path.home())
    assert main_kubeconfig("/flag", {"KUBECONFIG_PATH": "/p", "KUBECONFIG": "/k"}) == Path("/flag")
    assert main_kubeconfig("", {"KUBECONFIG_PATH": "/p"}) is None
    assert main_kubeconfig(None, {"KUBECONFIG_PATH": "/p", "KUBECONFIG": "/k"}) == Path("/p")
    listed = main_kubeconfig(None, {"KUBECONFIG_PATH": "", "KUBECONFIG": "/a::/b:/a:"})
    assert listed == KubeconfigList((Path("/a"), Path("/b")))
    assert str(listed) == "/a:/b ($KUBECONFIG)"
    assert main_kubeconfig(None, {"KUBECONFIG": ""}) is None  # empty: no main file
    assert main_kubeconfig(None, {}) == KubeconfigList(
        (Path(home) / ".kube" / "config",), "default"
    )


def test_a_missing_default_kubeconfig_is_no_problem_a_named_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pod there is no ~/.kube/config: nothing to report. A named file must exist."""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "value").write_text(simple("capi"))
    settings = resolve(env={"KUBECONFIG_DIR": str(folder)})
    scan = Discoverer(settings.kubeconfig_path, settings.kubeconfig_dir).scan()
    assert [c.name for c in scan.clusters] == ["capi"]
    assert scan.problems == ()
    named = resolve(env={"KUBECONFIG_PATH": str(tmp_path / "nope")})
    scan = Discoverer(named.kubeconfig_path, None).scan()
    assert [p.reason for p in scan.problems] == ["file not found"]


def test_settings_read_kubeconfig_when_kubeconfig_path_is_unset(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(simple("alpha"))
    b.write_text(simple("beta"))
    settings = resolve(env={"KUBECONFIG": f"{a}{os.pathsep}{b}"})
    assert settings.kubeconfig_path == KubeconfigList((a, b))
    discoverer = Discoverer(settings.kubeconfig_path, None)
    assert [name for name, _, _ in found(discoverer)] == ["alpha", "beta"]
    assert resolve(env={"KUBECONFIG": ""}).kubeconfig_path is None


# --- KUBECONFIG_DIR: a folder of mounted Secrets ----------------------------------------


def atomic_writer(volume: Path, stamp: str, files: dict[str, str]) -> None:
    """What the kubelet does for a Secret volume: files in a hidden timestamped folder,
    ``..data`` pointing at it (swapped atomically), and a visible link per key."""
    volume.mkdir(exist_ok=True)
    target = volume / f"..{stamp}"
    target.mkdir()
    for key, text in files.items():
        (target / key).write_text(text)
    (volume / "..data_tmp").symlink_to(target.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    for key in files:
        if not (volume / key).is_symlink():
            (volume / key).symlink_to(f"..data/{key}")


def test_a_folder_of_secret_volumes_is_read_once_per_file(tmp_path: Path) -> None:
    root = tmp_path / "kubeconfigs"
    root.mkdir()
    atomic_writer(root / "prod-kubeconfig", "2026_12_01_05_00_00.1", {"value": simple("prod")})
    atomic_writer(root / "dev-kubeconfig", "2026_12_01_05_00_00.2", {"value": simple("dev")})
    (root / "z-plain.conf").write_text(simple("plain"))
    discoverer = Discoverer(None, root)
    assert found(discoverer) == [
        ("dev", "https://dev", "value"),
        ("prod", "https://prod", "value"),
        ("plain", "https://plain", "z-plain.conf"),
    ]
    scan = discoverer.scan()
    assert scan.problems == ()
    assert scan.clusters[1].kubeconfig_secret_ref == str(root / "prod-kubeconfig" / "value")
    assert discoverer.parses == 3

    # The kubelet swaps ..data to a new timestamped folder: next scan, new content.
    atomic_writer(root / "prod-kubeconfig", "2026_12_01_06_00_00.3", {"value": simple("prod2")})
    assert [name for name, _, _ in found(discoverer)] == ["dev", "prod2", "plain"]
    assert discoverer.parses == 4


def test_sub_folders_are_read_in_name_order_hidden_entries_skipped(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "inner").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "a").write_text(simple("a"))
    (tmp_path / "b" / "inner" / "x").write_text(simple("bx"))
    (tmp_path / "b" / "y").write_text(simple("by"))
    (tmp_path / "c").write_text(simple("c"))
    (tmp_path / ".hidden" / "h").write_text(simple("h"))
    (tmp_path / ".swap").write_text("garbage")
    discoverer = Discoverer(None, tmp_path)
    assert [name for name, _, _ in found(discoverer)] == ["a", "bx", "by", "c"]


def test_symlink_loops_are_problems_not_hangs(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "back").symlink_to("..")  # a folder that leads to its parent
    (tmp_path / "self").symlink_to("self")  # a link to itself
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "sub" / "k").write_text(simple("k"))
    scan = Discoverer(None, tmp_path).scan()
    assert [c.name for c in scan.clusters] == ["k"]
    assert {(Path(p.source).relative_to(tmp_path).as_posix(), p.reason) for p in scan.problems} == {
        ("sub/back", "symlink loop (leads back to a parent)"),
        ("self", "symlink loop"),
        ("dangling", "broken symbolic link"),
    }


def test_a_folder_linked_twice_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "k").write_text(simple("k"))
    (tmp_path / "zlink").symlink_to("real")
    scan = Discoverer(None, tmp_path).scan()
    assert [c.name for c in scan.clusters] == ["k"]
    assert scan.problems == ()


@pytest.mark.live
def test_discover_reads_kubeconfig_and_a_secret_volume(tmp_path: Path) -> None:
    """``fleetwatch discover`` shows what the exporter reads: no default-file problem."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text(simple("alpha"))
    second.write_text(doc({"beta": ("alpha", "alpha")}))  # uses a's cluster and user
    volume = tmp_path / "secrets"
    volume.mkdir()
    atomic_writer(volume / "capi-kubeconfig", "2026_12_01_05_00_00.1", {"value": simple("capi")})
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "KUBECONFIG": f"{first}{os.pathsep}{tmp_path / 'gone'}{os.pathsep}{second}",
        "KUBECONFIG_DIR": str(volume),
    }
    result = subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "discover", "--output=json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert [(c["name"], c["endpoint"], c["source"]) for c in answer["clusters"]] == [
        ("alpha", "https://alpha", str(first)),
        ("beta", "https://alpha", str(second)),
        ("capi", "https://capi", str(volume / "capi-kubeconfig" / "value")),
    ]
    assert answer["problems"] == []
