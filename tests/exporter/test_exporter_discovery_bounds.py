"""Hostile and unlucky kubeconfigs: bounded parsing, and a failed read keeps the last good.

Each bad file is a counted problem with its reason while every other file is discovered;
none may block the scan, the event loop, or memory.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fleetwatch.discovery import Discoverer, Discovery, boundedyaml
from fleetwatch.discovery.kubeconfig import parse_document
from tests.helpers.kubeconfig_docs import kubeconfig

if TYPE_CHECKING:
    from fleetwatch.standin import StandinFleet
    from tests.helpers.exporter_helpers import MonitorFactory

#: The classic "billion laughs" inside an otherwise valid kubeconfig: 9 levels of 9
#: aliases under one user entry, 9^9 (387 million) nodes once expanded.
BOMB = (
    "apiVersion: v1\nkind: Config\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "contexts: [{name: bomb, context: {cluster: c, user: u}}]\n"
    "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
    + "users: [{name: u, user: {token: t, extensions: *a8}}]\n"
)


def names(found: object) -> list[str]:
    return [c.name for c in found.clusters]  # type: ignore[attr-defined]


def reasons(found: object) -> dict[str, str]:
    return {Path(p.source).name: p.reason for p in found.problems}  # type: ignore[attr-defined]


@pytest.fixture(params=["whole", "streamed"])
def both_loads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with small files loaded whole (as they are) and streamed (as big ones
    are): the bounds and the results must be the same."""
    if request.param == "streamed":
        monkeypatch.setattr(boundedyaml, "STREAM_FROM", 0)
    return str(request.param)


def test_an_alias_bomb_is_a_problem_found_in_microseconds(tmp_path: Path, both_loads: str) -> None:
    assert len(BOMB) < 1000
    (tmp_path / "bomb.yaml").write_text(BOMB)
    (tmp_path / "good.yaml").write_text(kubeconfig("good"))
    started = time.process_time()
    found = Discoverer(None, tmp_path).scan()
    assert time.process_time() - started < 0.5
    assert names(found) == ["good"]
    assert reasons(found)["bomb.yaml"].startswith("refused: too many YAML nodes (")
    assert "once expanded" in reasons(found)["bomb.yaml"]


def test_an_alias_to_its_own_node_is_refused(tmp_path: Path, both_loads: str) -> None:
    (tmp_path / "loop.yaml").write_text(
        "apiVersion: v1\nkind: Config\ncontexts: []\nusers: &u [{name: u, user: {x: *u}}]\n"
    )
    found = Discoverer(None, tmp_path).scan()
    assert reasons(found) == {"loop.yaml": "refused: alias *u inside the node it names"}


def test_a_few_aliases_are_fine_as_kubectl_allows_them(tmp_path: Path, both_loads: str) -> None:
    text = (
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: a, cluster: {server: 'https://a'}}, "
        "{name: b, cluster: {server: 'https://b'}}]\n"
        "users: [{name: shared, user: &creds {token: t}}, {name: copy, user: *creds}]\n"
        "contexts: [{name: a, context: {cluster: a, user: shared}}, "
        "{name: b, context: {cluster: b, user: copy}}]\n"
    )
    (tmp_path / "k.yaml").write_text(text)
    discoverer = Discoverer(None, tmp_path)
    found = discoverer.scan()
    assert names(found) == ["a", "b"]
    assert found.problems == ()
    ctx = discoverer.context_config(found.clusters[1])
    assert ctx is not None and ctx.auth.token == "t"


def test_a_big_entry_shared_by_many_contexts_is_refused_for_each(
    tmp_path: Path, both_loads: str
) -> None:
    """Under the file's bound, but each context would carry (and hash) 6,561 nodes."""
    text = (
        "apiVersion: v1\nkind: Config\n"
        "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 4))
        + "clusters: [{name: c, cluster: {server: 'https://c'}}]\n"
        "users: [{name: big, user: {token: t, extensions: *a3}}, {name: ok, user: {token: t}}]\n"
        "contexts: [{name: p1, context: {cluster: c, user: big}}, "
        "{name: p2, context: {cluster: c, user: big}}, "
        "{name: fine, context: {cluster: c, user: ok}}]\n"
    )
    (tmp_path / "k.yaml").write_text(text)
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["fine"]
    assert {(p.context, p.reason) for p in found.problems} == {
        ("p1", "user 'big' entry over 1000 YAML nodes"),
        ("p2", "user 'big' entry over 1000 YAML nodes"),
    }


def test_a_document_of_too_many_nodes_is_refused_before_it_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, both_loads: str
) -> None:
    monkeypatch.setattr(boundedyaml, "MAX_NODES", 500)
    (tmp_path / "dense.yaml").write_text(
        "apiVersion: v1\nkind: Config\ncontexts: []\nx: [" + ",".join(["1"] * 600) + "]\n"
    )
    (tmp_path / "small.yaml").write_text(kubeconfig("small"))
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["small"]
    assert (
        reasons(found)["dense.yaml"] == "refused: too many YAML nodes: more than 500 once expanded"
    )


def test_big_binary_special_files_are_problems_and_the_rest_is_found(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:  # sparse: 50 MB without writing them
        handle.truncate(50 * 1024 * 1024)
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    os.mkfifo(tmp_path / "fifo.yaml")  # opening it for reading would wait for a writer forever
    (tmp_path / "ok.yaml").write_text(kubeconfig("ok"))
    # In a thread of its own, so that a scan held by the FIFO fails the test, not hangs it.
    scanned: list[Discovery] = []
    scan = threading.Thread(target=lambda: scanned.append(Discoverer(None, tmp_path).scan()))
    scan.daemon = True
    scan.start()
    scan.join(30)
    assert scanned, "the scan never ended"
    found = scanned[0]
    assert names(found) == ["ok"]
    got = reasons(found)
    assert got["big.yaml"] == f"too big: 52428800 bytes, the limit is {32 * 1024 * 1024}"
    assert got["binary.yaml"].startswith("not YAML text (unacceptable character #x0000")
    assert got["fifo.yaml"] == "not a regular file"
    assert len(found.problems) == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_file_is_a_problem(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(kubeconfig("hidden"))
    secret.chmod(0)
    (tmp_path / "ok.yaml").write_text(kubeconfig("ok"))
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == ["ok"]
    assert reasons(found) == {"secret.yaml": "permission denied"}


def test_a_thousand_context_kubeconfig_loads_in_under_two_seconds(tmp_path: Path) -> None:
    """With certificate-sized data per context (5.7 MB), as a real fleet's main file."""
    doc = _fleet_document(1000, CERTIFICATE)
    (tmp_path / "config").write_text(yaml.dump(doc, Dumper=yaml.CSafeDumper))
    discoverer = Discoverer(tmp_path / "config", None)
    started = time.process_time()  # CPU time: other engineers' load does not count
    found = discoverer.scan()
    assert time.process_time() - started < 2.0
    assert len(found.clusters) == 1000 and found.problems == ()


#: 1.6 KB of base64, as an embedded certificate.
CERTIFICATE = "QUJD" * 400


def _fleet_document(contexts: int, blob: str) -> dict[str, Any]:
    """``contexts`` clusters, each with its CA, client certificate and key as ``blob``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": f"c{i}",
                "cluster": {"server": f"https://c{i}", "certificate-authority-data": blob},
            }
            for i in range(contexts)
        ],
        "users": [
            {"name": f"u{i}", "user": {"client-certificate-data": blob, "client-key-data": blob}}
            for i in range(contexts)
        ],
        "contexts": [
            {"name": f"c{i}", "context": {"cluster": f"c{i}", "user": f"u{i}"}}
            for i in range(contexts)
        ],
    }


def test_a_big_kubeconfig_is_never_held_whole(tmp_path: Path) -> None:
    """Its entries are reduced one by one: the parse's peak is a fraction of the whole
    document's, which yaml.load holds (nodes, then objects) before anything is kept."""
    data = yaml.dump(_fleet_document(1000, CERTIFICATE), Dumper=yaml.CSafeDumper).encode()
    tracemalloc.start()
    try:
        whole = yaml.load(data, Loader=yaml.CSafeLoader)
        _, whole_peak = tracemalloc.get_traced_memory()
        del whole
        tracemalloc.reset_peak()
        parsed = parse_document(data, (0, 0, 0, 0))
        _, parse_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parsed.contexts) == 1000
    assert parse_peak < whole_peak / 4, (parse_peak, whole_peak)


#: Documents whose top-level lists are streamed, or not (then loaded whole): either way
#: the entries are what yaml.safe_load makes of them.
STREAMED = [
    "clusters: [{name: a, cluster: &c {server: 'https://a'}}, {name: b, cluster: *c}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: a, context: {cluster: a}}]\n",
    "clusters: &l [{name: a, cluster: {server: 'https://a'}}]\nusers: *l\ncontexts: []\n",
    "<<: {contexts: [{name: m, context: {cluster: a}}]}\n"
    "clusters: [{name: a, cluster: {server: 'https://a'}}]\n",
    "contexts: [{name: x, context: {cluster: a}}]\ncontexts: [{name: y, context: {cluster: a}}]\n"
    "clusters: [{name: a, cluster: {<<: {server: 'https://m'}, insecure-skip-tls-verify: yes}}]\n",
    "clusters: !!seq [{name: a, cluster: {server: 'https://a'}}]\ncontexts: {}\n",
    "kind: Config\nclusters: null\ncontexts: [{name: 1, context: {}}, {name: n}]\n",
]


@pytest.mark.parametrize("text", STREAMED)
def test_streamed_entries_are_what_yaml_load_makes(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boundedyaml, "STREAM_FROM", 0)
    handed: list[tuple[str, int, Any]] = []
    try:
        top = boundedyaml.load_streaming(
            text, ("clusters", "users", "contexts"), lambda *a: handed.append(a)
        )
    except boundedyaml.NotStreamable:
        return  # loaded whole by parse_document: yaml.load's own result
    whole = yaml.safe_load(text)
    for key in ("clusters", "users", "contexts"):
        value = whole.get(key)
        items = [item for k, _, item in handed if k == key]
        if isinstance(value, list):
            assert items == value and top[key] is None
        else:
            assert items == [] and top.get(key) == value
    assert set(top) == set(whole)


@pytest.mark.parametrize(
    "text",
    ["clusters: [*nowhere]\n", "a: 1\n---\nb: 2\n", "clusters: [2001-13-45]\n", "[1, 2]\n", ""],
)
def test_a_document_the_stream_refuses_fails_as_a_whole_load_fails(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boundedyaml, "STREAM_FROM", 0)
    try:
        whole: Any = yaml.load(text, Loader=yaml.CSafeLoader)
    except (yaml.YAMLError, ValueError) as exc:
        whole = type(exc)
    try:
        parsed: Any = boundedyaml.load(text)
    except (yaml.YAMLError, ValueError) as exc:
        parsed = type(exc)
    assert parsed == whole
    with pytest.raises(boundedyaml.NotStreamable):
        boundedyaml.load_streaming(text, ("clusters",), lambda *a: None)


# --- a file rewritten in place keeps its clusters -----------------------------------


def test_a_file_caught_mid_rewrite_keeps_its_last_good_clusters(tmp_path: Path) -> None:
    """``kubectl config`` truncates and rewrites: a scan in between must drop nothing."""
    path = tmp_path / "config"
    path.write_text(kubeconfig("a", "b", "c"))
    discoverer = Discoverer(path, None)
    assert names(discoverer.scan()) == ["a", "b", "c"]
    before = discoverer.context_config(discoverer.scan().clusters[0])

    for partial in ("", kubeconfig("a", "b", "c")[:150]):  # truncated, then half written
        path.write_text(partial)
        found = discoverer.scan()
        assert names(found) == ["a", "b", "c"], partial
        assert discoverer.context_config(found.clusters[0]) is before
        [problem] = found.problems
        assert problem.reason.endswith("its last good version is used until it parses again")
    assert len(found.new_problems) == 1  # a new reason: a new problem, counted once

    path.write_text(kubeconfig("a", "b"))  # a valid parse drops what is gone
    assert names(discoverer.scan()) == ["a", "b"]
    assert discoverer.scan().problems == ()
    path.unlink()  # so does removal
    found = discoverer.scan()
    assert names(found) == [] and [p.reason for p in found.problems] == ["file not found"]


def test_a_file_under_kubectls_lock_is_read_once_kubectl_lets_go(tmp_path: Path) -> None:
    """A half-written file may be valid YAML with fewer contexts: kubectl's lock says wait."""
    path = tmp_path / "config"
    path.write_text(kubeconfig("a", "b", "c"))
    discoverer = Discoverer(None, tmp_path)
    assert names(discoverer.scan()) == ["a", "b", "c"]
    lock = tmp_path / "config.lock"  # what client-go creates while it rewrites the file
    lock.touch()
    path.write_text(kubeconfig("a"))  # a valid prefix of the new content
    found = discoverer.scan()
    assert names(found) == ["a", "b", "c"] and found.problems == ()  # the lock is no file
    lock.unlink()
    assert names(discoverer.scan()) == ["a"]
    path.write_text(kubeconfig("a", "d"))
    lock.touch()
    os.utime(lock, (time.time() - 120, time.time() - 120))  # left by a killed kubectl
    assert names(discoverer.scan()) == ["a", "d"]


def test_a_failed_file_of_the_folder_keeps_its_clusters_until_removed(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(kubeconfig("x1", "x2"))
    (tmp_path / "y.yaml").write_text(kubeconfig("y"))
    discoverer = Discoverer(None, tmp_path)
    assert names(discoverer.scan()) == ["x1", "x2", "y"]
    (tmp_path / "x.yaml").write_text("clusters: [\n")
    found = discoverer.scan()
    assert names(found) == ["x1", "x2", "y"]
    assert reasons(found)["x.yaml"].startswith("invalid YAML at line")
    assert discoverer.parses == 3
    discoverer.scan()
    assert discoverer.parses == 3  # the broken version is not parsed again each cycle
    (tmp_path / "x.yaml").unlink()
    assert names(discoverer.scan()) == ["y"]


def test_a_file_that_never_parsed_has_no_clusters(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("{{{")
    found = Discoverer(None, tmp_path).scan()
    assert names(found) == [] and reasons(found)["x.yaml"].startswith("invalid YAML")


# --- the exporter's cycle ----------------------------------------------------------


@pytest.mark.live
async def test_a_bomb_neither_blocks_the_loop_nor_stops_the_fleet(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("good")
    fleet.write_kubeconfig(kubeconfig_dir / "good.yaml", ["good"], credential="token")
    (kubeconfig_dir / "bomb.yaml").write_text(BOMB)
    lag = 0.0

    async def ticker() -> None:
        nonlocal lag
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lag = max(lag, time.monotonic() - before - 0.01)

    async with make_monitor(probe_timeout=5.0) as (monitor, rec):
        tick = asyncio.create_task(ticker())
        try:
            await asyncio.wait_for(monitor.run_cycle(), 30)
        finally:
            tick.cancel()
            with pytest.raises(asyncio.CancelledError):
                await tick
    assert [v.cluster.name for v in rec.last.clusters] == ["good"]
    assert rec.view("good").success is True
    assert monitor.discovery_errors_total == 1
    # An expanded bomb holds the loop for minutes or memory runs out; the scheduler of a
    # loaded machine can hold it for a few tenths of a second: the bound is between.
    assert lag < 2.0
