"""A kubeconfig caught mid-write never replaces its last good version (fleetwatch.discovery.settle).

Pure: real files, a fake clock set against the files' own times, no sleep. Writers are
played as they write: in place (truncate, then write: client-go's ``WriteToFile``), by a
rename into place, by the kubelet's ``..data`` swap, by vim's move aside. Then Secrets
read through the API, which need no settle time: a version that cannot be read keeps the
last good one (``fleetwatch.discovery.secrets.with_last_good``).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.discovery import Discoverer, Discovery
from fleetwatch.discovery.apisource import KubernetesDiscovery, SecretReads
from fleetwatch.discovery.files import FileVersion
from fleetwatch.discovery.secrets import KEPT
from fleetwatch.discovery.settle import SETTLE_SECONDS, Sighting, arrived_whole, wait_for
from tests.helpers.discovery_informer import ARGOCD_CLUSTER, api_secret

SETTLE = SETTLE_SECONDS


def kubeconfig(*contexts: str) -> str:
    """A kubeconfig as kubectl writes it: keys in alphabetical order, so ``contexts``
    comes before ``users`` and a prefix can hold contexts whose users are missing."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": c, "cluster": {"server": f"https://127.0.0.1:1/{c}"}} for c in contexts
        ],
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts],
        "users": [{"name": c, "user": {"token": f"secret-{c}"}} for c in contexts],
    }
    return yaml.dump(doc, Dumper=yaml.CSafeDumper)


FULL = kubeconfig("a", "b", "c")
#: a prefix that parses: every context, no user (kubectl's key order)
PREFIX = FULL[: FULL.index("users:")]
#: a prefix that does not parse (cut inside a flow, as a chunked write leaves it)
BROKEN = "clusters: [{name: a, cluster: {server: https://127"


class Clock:
    """The scan's wall clock, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def changed_at(path: Path) -> float:
    """The file's last change by its own times (what fleetwatch.discovery.settle reads)."""
    st = os.stat(path)
    return max(st.st_mtime_ns, st.st_ctime_ns) / 1e9


def rewrite(path: Path, text: str) -> None:
    """Rewrite in place, as ``os.WriteFile`` does: same inode, truncated, then written."""
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(text.encode())


def names(found: Discovery) -> list[str]:
    return [c.name for c in found.clusters]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(FULL)
    return path


def settled(path: Path, folder: Path | None = None) -> tuple[Discoverer, Clock]:
    """A Discoverer of ``path`` (and ``folder``) started long after they were written."""
    clock = Clock(changed_at(path) + 10 * SETTLE)
    discoverer = Discoverer(path if folder is None else None, folder, settle_s=SETTLE, clock=clock)
    found = discoverer.scan()
    assert found.rescan_in is None  # written before start: taken at once
    return discoverer, clock


def test_the_prefix_parses_into_fewer_clusters_when_read_without_a_settle_time(
    config: Path,
) -> None:
    """Why the rule exists: read when seen (the one-shot scans), a prefix loses clusters."""
    discoverer = Discoverer(config, None)
    assert names(discoverer.scan()) == ["a", "b", "c"]
    rewrite(config, PREFIX)
    found = discoverer.scan()
    assert names(found) == [] and {p.reason for p in found.problems} == {
        "user 'a' is missing",
        "user 'b' is missing",
        "user 'c' is missing",
    }


@pytest.mark.parametrize("partial", ["", PREFIX, BROKEN], ids=["empty", "prefix", "broken"])
def test_a_file_caught_mid_write_keeps_its_last_good_version(config: Path, partial: str) -> None:
    discoverer, clock = settled(config)
    before = discoverer.context_config(discoverer.scan().clusters[0])
    rewrite(config, partial)
    for age in (0.0, 0.3, 0.9):
        clock.now = changed_at(config) + age
        found = discoverer.scan()
        assert names(found) == ["a", "b", "c"] and found.problems == ()
        assert found.rescan_in == pytest.approx(SETTLE - age)
        assert discoverer.context_config(found.clusters[0]) is before
    assert discoverer.parses == 1  # the partial file was not even read


def test_a_broken_file_that_held_still_is_a_problem_and_keeps_its_clusters(
    config: Path,
) -> None:
    discoverer, clock = settled(config)
    rewrite(config, BROKEN)
    clock.now = changed_at(config) + SETTLE
    found = discoverer.scan()
    assert names(found) == ["a", "b", "c"] and found.rescan_in is None
    [problem] = found.problems
    assert problem.reason.startswith("invalid YAML")
    assert problem.reason.endswith("its last good version is used until it parses again")


def test_a_version_that_held_still_is_taken(config: Path) -> None:
    discoverer, clock = settled(config)
    rewrite(config, PREFIX)
    clock.now = changed_at(config) + 0.2
    assert names(discoverer.scan()) == ["a", "b", "c"]
    rewrite(config, kubeconfig("a", "b"))  # the writer's last piece: a smaller fleet
    clock.now = changed_at(config) + 0.2
    found = discoverer.scan()
    assert names(found) == ["a", "b", "c"] and found.rescan_in == pytest.approx(SETTLE - 0.2)
    clock.now += found.rescan_in
    found = discoverer.scan()
    assert names(found) == ["a", "b"] and found.problems == () and found.rescan_in is None


def test_a_version_seen_unchanged_for_the_settle_time_is_taken_whatever_its_times(
    config: Path,
) -> None:
    """A network file system whose clock runs ahead: the file's times say "just now" for
    a minute; a scan that saw the same version a settle time ago takes it."""
    discoverer, clock = settled(config)
    rewrite(config, kubeconfig("a"))
    clock.now = changed_at(config) - 60
    found = discoverer.scan()
    assert names(found) == ["a", "b", "c"] and found.rescan_in == pytest.approx(SETTLE)
    clock.now += SETTLE
    assert names(discoverer.scan()) == ["a"]


def test_a_file_that_never_holds_still_keeps_its_last_good_version(config: Path) -> None:
    discoverer, clock = settled(config)
    for i in range(12):
        rewrite(config, (PREFIX, "", FULL)[i % 3])
        clock.now = changed_at(config) + 0.15
        found = discoverer.scan()
        assert names(found) == ["a", "b", "c"] and found.problems == ()
        assert found.rescan_in is not None and 0 < found.rescan_in <= SETTLE


def test_a_file_moved_into_place_is_taken_at_once(config: Path) -> None:
    discoverer, clock = settled(config)
    new = config.with_name("config.new")
    new.write_text(kubeconfig("a", "d"))
    written = changed_at(new) - 5
    os.utime(new, (written, written))  # written a while before the move: mtime < ctime
    os.replace(new, config)
    clock.now = changed_at(config)
    found = discoverer.scan()
    assert names(found) == ["a", "d"] and found.rescan_in is None


def test_a_new_file_written_in_pieces_in_place_of_the_old_one_waits(config: Path) -> None:
    """vim and Emacs move the old file aside and write a new one: a new inode is not
    enough, and the moment with no file at all drops nothing."""
    discoverer, clock = settled(config)
    os.rename(config, config.with_name("config~"))
    found = discoverer.scan()
    assert names(found) == ["a", "b", "c"] and found.problems == ()
    assert found.rescan_in == pytest.approx(SETTLE)
    config.write_text(PREFIX)  # a new inode, being written: ctime == mtime
    clock.now = changed_at(config) + 0.1
    assert names(discoverer.scan()) == ["a", "b", "c"]
    rewrite(config, kubeconfig("a", "b", "c", "d"))
    clock.now = changed_at(config) + SETTLE
    assert names(discoverer.scan()) == ["a", "b", "c", "d"]


def test_a_file_gone_for_the_settle_time_is_gone(config: Path) -> None:
    discoverer, clock = settled(config)
    config.unlink()
    assert names(discoverer.scan()) == ["a", "b", "c"]
    clock.now += SETTLE
    found = discoverer.scan()
    assert names(found) == [] and [p.reason for p in found.problems] == ["file not found"]


def volume_publish(volume: Path, stamp: str, text: str) -> None:
    """What the kubelet's atomic writer does: a new folder written in full, then the
    ``..data`` link swapped to it by a rename, the visible file a link through it."""
    (volume / stamp).mkdir(parents=True)
    (volume / stamp / "value").write_text(text)
    (volume / "..data_tmp").symlink_to(stamp)
    os.replace(volume / "..data_tmp", volume / "..data")
    if not (volume / "value").is_symlink():
        (volume / "value").symlink_to("..data/value")


def test_a_secret_volume_swap_is_taken_at_once_and_an_in_place_write_waits(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "secrets"
    volume = folder / "prod"
    volume_publish(volume, "..2026_01", FULL)
    discoverer, clock = settled(volume / "value", folder)
    assert names(discoverer.scan()) == ["a", "b", "c"]
    volume_publish(volume, "..2026_02", kubeconfig("a", "b"))
    clock.now = changed_at(volume / "value")  # written this instant, then swapped
    found = discoverer.scan()
    assert names(found) == ["a", "b"] and found.rescan_in is None
    rewrite(volume / "value", PREFIX)  # someone writing through the links, in place
    clock.now = changed_at(volume / "value") + 0.1
    assert names(discoverer.scan()) == ["a", "b"]


def test_a_new_file_waits_for_its_settle_time(tmp_path: Path) -> None:
    """No last good version to fall back on, and a prefix is worse than nothing."""
    (tmp_path / "a.yaml").write_text(kubeconfig("a"))
    discoverer, clock = settled(tmp_path / "a.yaml", tmp_path)
    new = tmp_path / "b.yaml"
    new.write_text(kubeconfig("b")[:60])
    clock.now = changed_at(new) + 0.1
    found = discoverer.scan()
    assert names(found) == ["a"] and found.problems == ()
    assert found.rescan_in == pytest.approx(SETTLE - 0.1)
    rewrite(new, kubeconfig("b"))
    clock.now = changed_at(new) + SETTLE
    assert names(discoverer.scan()) == ["a", "b"]


def test_a_file_gone_from_the_folder_keeps_its_place_for_the_settle_time(
    tmp_path: Path,
) -> None:
    """The first of a name wins: a file gone a moment must not hand its names to a later
    file, even for one scan."""
    (tmp_path / "a.yaml").write_text(kubeconfig("x", "y"))
    (tmp_path / "c.yaml").write_text(kubeconfig("x", "z"))
    discoverer, clock = settled(tmp_path / "c.yaml", tmp_path)
    first = discoverer.scan()
    (tmp_path / "a.yaml").unlink()
    found = discoverer.scan()
    assert found.clusters == first.clusters and found.problems == first.problems
    (tmp_path / "0.yaml").write_text(kubeconfig("w"))  # a new file listed before it
    found = discoverer.scan()
    assert names(found) == ["w", "x", "y", "z"] and found.problems == first.problems
    (tmp_path / "b.yaml").write_text(kubeconfig("b"))  # a new file, listed before c.yaml
    clock.now += SETTLE  # the clock is well past b.yaml's times: taken at once
    found = discoverer.scan()
    assert [(c.name, Path(c.kubeconfig_secret_ref).name) for c in found.clusters] == [
        ("w", "0.yaml"),
        ("b", "b.yaml"),
        ("x", "c.yaml"),
        ("z", "c.yaml"),
    ]


# --- the rule on its own -------------------------------------------------------------

S = 1_000_000_000  # ns


def version(ino: int, mtime: float, ctime: float) -> FileVersion:
    return (1, ino, 100, int(mtime * S), int(ctime * S))


@pytest.mark.parametrize(
    ("current", "target", "held", "held_target", "whole"),
    [
        (version(1, 5, 5), "/f", version(1, 1, 1), "/f", False),  # same inode: in place
        (version(2, 5, 5), "/f", version(1, 1, 1), "/f", False),  # new inode being written
        (version(2, 4, 5), "/f", version(1, 1, 1), "/f", True),  # renamed after its write
        (version(2, 5, 5), "/v/..2", version(1, 1, 1), "/v/..1", True),  # a link swapped
        (version(2, 4, 5), "/f", None, None, False),  # never held: no old one to replace
    ],
)
def test_arrived_whole(
    current: FileVersion,
    target: str,
    held: FileVersion | None,
    held_target: str | None,
    whole: bool,
) -> None:
    assert arrived_whole(current, target, held, held_target) is whole


@pytest.mark.parametrize(
    ("seen", "current", "now", "wait", "since"),
    [
        (None, version(1, 10, 10), 20.0, 0.0, 20.0),  # old times: at once
        (None, version(1, 10, 10), 10.25, 0.75, 10.25),  # young: the rest of the second
        (Sighting(version(1, 10, 10), 9.0), version(1, 10, 10), 10.0, 0.0, 9.0),  # seen
        (Sighting(version(1, 9, 9), 9.0), version(1, 10, 90), 10.0, 1.0, 10.0),  # new one
        (Sighting(version(1, 10, 90), 50.0), version(1, 10, 90), 10.0, 1.0, 10.0),  # clock back
        (None, None, 10.0, 1.0, 10.0),  # gone: our clock only
        (Sighting(None, 9.0), None, 10.0, 0.0, 9.0),  # gone for the settle time
    ],
)
def test_wait_for(
    seen: Sighting | None, current: FileVersion | None, now: float, wait: float, since: float
) -> None:
    left, sighting = wait_for(current, seen, now, 1.0)
    assert left == pytest.approx(wait) and sighting == Sighting(current, since)


def test_no_settle_time_means_no_wait() -> None:
    assert wait_for(version(1, 10, 10), None, 10.0, 0.0)[0] == 0.0


# --- Secrets read through the API: no settle time, an unreadable version keeps the last good


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def labelled(rv: int, **data: str) -> dict[str, Any]:
    """A labelled Secret holding kubeconfigs, as the API returns it."""
    labels = {"fleetwatch.io/kubeconfig": "true"}
    values: dict[str, str | bytes] = dict(data)
    return api_secret("fleet", "team-a", labels, values, rv=str(rv), uid="uid-1")


def argo(rv: int, config: str) -> dict[str, Any]:
    data: dict[str, str | bytes] = {
        "name": "prod",
        "server": "https://prod.example:6443",
        "config": config,
    }
    return api_secret("cluster-prod", "argocd", ARGOCD_CLUSTER, data, rv=str(rv), uid="uid-2")


def secret_clusters(reads: SecretReads, *secrets: dict[str, Any]) -> list[tuple[str, str]]:
    found = reads.read({s["metadata"]["uid"]: s for s in secrets})
    return [
        (c.cluster.name, c.cluster.kubeconfig_secret_ref[-2:]) for r in found for c in r.clusters
    ]


def test_a_secret_version_that_cannot_be_read_keeps_its_last_good_clusters() -> None:
    reads = SecretReads(KubernetesDiscovery())
    assert secret_clusters(reads, labelled(1, a=FULL, b=kubeconfig("y"))) == [
        ("a", "#a"),
        ("b", "#a"),
        ("c", "#a"),
        ("y", "#b"),
    ]
    [first] = reads.read({"uid-1": labelled(1, a=FULL, b=kubeconfig("y"))})
    rv = 1
    for broken in ("", BROKEN, "just: text\n"):  # empty, not YAML, not a kubeconfig
        rv += 1
        [read] = reads.read({"uid-1": labelled(rv, a=broken, b=kubeconfig("y", "z"))})
        assert [c.cluster.name for c in read.clusters] == ["a", "b", "c", "y", "z"]
        assert read.clusters[0].config is first.clusters[0].config  # the last good one's
        [problem] = read.problems
        assert problem.source == "secret://team-a/fleet#a" and problem.reason.endswith(KEPT)
    rv += 1  # a kubeconfig that parses is taken as it is, fewer clusters or not
    assert secret_clusters(reads, labelled(rv, a=kubeconfig("a"), b=kubeconfig("y"))) == [
        ("a", "#a"),
        ("y", "#b"),
    ]
    rv += 1  # a key gone takes its clusters with it
    assert secret_clusters(reads, labelled(rv, b=kubeconfig("y"))) == [("y", "#b")]
    assert reads.read({}) == []  # and so does the Secret


def test_an_argo_cd_secret_that_cannot_be_read_keeps_its_cluster() -> None:
    reads = SecretReads(KubernetesDiscovery())
    [good] = reads.read({"uid-2": argo(1, '{"bearerToken": "t"}')})
    [read] = reads.read({"uid-2": argo(2, '{"bearerToken": ')})  # cut short
    assert read.clusters == good.clusters
    [problem] = read.problems
    assert problem.reason.startswith("Argo CD cluster config") and problem.reason.endswith(KEPT)
    [read] = reads.read({"uid-2": argo(3, '{"bearerToken": "u"}')})
    assert read.clusters[0].config is not good.clusters[0].config and read.problems == ()


def test_a_secret_never_read_well_has_no_clusters() -> None:
    reads = SecretReads(KubernetesDiscovery())
    [read] = reads.read({"uid-1": labelled(1, a=BROKEN)})
    assert read.clusters == () and not read.problems[0].reason.endswith(KEPT)
