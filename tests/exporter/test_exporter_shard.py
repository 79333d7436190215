"""Sharding: disjoint shards that cover the fleet, stable across restarts and fleet changes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.server import MONITOR, create_app
from exporter.settings import SettingsError, resolve
from fleetwatch.discovery import Discoverer
from fleetwatch.discovery.shard import (
    Shard,
    ShardError,
    current_hostname,
    ordinal_from_hostname,
    resolve_shard,
    shard_of,
)
from fleetwatch.standin import StandinFleet

NAME = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=40)
NAMES = st.lists(NAME, max_size=60, unique=True)
COUNTS = st.integers(min_value=1, max_value=12)


@given(NAMES, COUNTS)
def test_every_cluster_is_on_exactly_one_shard(names: list[str], count: int) -> None:
    owners = {name: [i for i in range(count) if Shard(i, count).owns(name)] for name in names}
    assert all(len(shards) == 1 for shards in owners.values())


@given(NAMES, NAMES, COUNTS)
@settings(max_examples=40, deadline=None)
def test_a_cluster_stays_on_its_shard_when_others_come_and_go(
    before: list[str], joined: list[str], count: int
) -> None:
    """A restart on a changed fleet: every cluster that stays is probed by the same shard."""
    after = [*before[: len(before) // 2], *(n for n in joined if n not in before)]
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config"
        owner: dict[str, int] = {}
        for fleet in (before, after):
            write_fleet(config, fleet)
            seen: list[str] = []
            for index in range(count):
                for cluster in Discoverer(config, None, shard=Shard(index, count)).scan().clusters:
                    assert owner.setdefault(cluster.name, index) == index
                    seen.append(cluster.name)
            assert sorted(seen) == sorted(fleet)


def test_the_hash_is_fixed_across_processes_and_versions() -> None:
    """Python's hash() is salted per process; ours must give the same shards everywhere."""
    names = ["prod-eu-1", "prod-us-2", "staging", "dev-é"]
    here = [shard_of(n, 7) for n in names]
    code = (
        "from fleetwatch.discovery.shard import shard_of; "
        f"print([shard_of(n, 7) for n in {names!r}])"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert other.stdout.strip() == str(here)
    # First 8 bytes of SHA-256, big-endian, modulo the count: pinned so a change shows.
    assert here == [1, 5, 0, 0]  # sha256sum | head -c16, mod 7, in a shell


def test_shards_are_balanced() -> None:
    counts = [0] * 4
    for i in range(10_000):
        counts[shard_of(f"cluster-{i:05d}", 4)] += 1
    assert all(2300 < c < 2700 for c in counts), counts


def test_ordinal_from_a_statefulset_pod_name() -> None:
    assert ordinal_from_hostname("fleetwatch-exporter-2") == 2
    assert ordinal_from_hostname("fleetwatch-exporter-11.fleetwatch.monitoring.svc") == 11
    with pytest.raises(ShardError, match="does not end in '-<ordinal>'"):
        ordinal_from_hostname("laptop")
    shard = resolve_shard(3, None, index_from_hostname=True, hostname="fleetwatch-exporter-1")
    assert shard == Shard(1, 3)
    with pytest.raises(ShardError, match="between 0 and 2"):
        resolve_shard(3, None, index_from_hostname=True, hostname="fleetwatch-exporter-3")


def test_shard_flags_are_checked() -> None:
    assert resolve(env={}).shard is None
    assert resolve(env={}, shard_count=1).shard == Shard(0, 1)
    assert resolve(env={}, shard_count=4, shard_index=3).shard == Shard(3, 4)
    for bad, message in (
        ({"shard_count": 0, "shard_index": 0}, "at least 1"),
        ({"shard_count": 2}, "needs --shard.index"),
        ({"shard_index": 1}, "needs --shard.count"),
        ({"shard_count": 2, "shard_index": 2}, "between 0 and 1"),
        ({"shard_count": 2, "shard_index": 1, "shard_index_from_hostname": True}, "not both"),
    ):
        with pytest.raises(SettingsError, match=message):
            resolve(env={}, **bad)  # type: ignore[arg-type]


def write_fleet(path: Path, names: list[str]) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        # The server is not what shards: any name, one address each (a name such as "@"
        # in the host would be a URL with credentials, refused by discovery).
        "clusters": [
            {"name": n, "cluster": {"server": f"https://127.0.{i // 250}.{i % 250 + 1}"}}
            for i, n in enumerate(names)
        ],
        "contexts": [{"name": n, "context": {"cluster": n}} for n in names],
    }
    path.write_text(yaml.safe_dump(doc))


def test_the_shards_of_a_discovery_split_the_fleet(tmp_path: Path) -> None:
    names = [f"c{i}" for i in range(50)]
    write_fleet(tmp_path / "config", names)
    whole = Discoverer(tmp_path / "config", None).scan()
    parts = [Discoverer(tmp_path / "config", None, shard=Shard(i, 3)).scan() for i in range(3)]
    got = [c.name for part in parts for c in part.clusters]
    assert sorted(got) == sorted(c.name for c in whole.clusters)  # covered, no overlap
    assert all(part.fleet_size == 50 for part in parts)
    assert all(0 < len(part.clusters) < 50 for part in parts)
    # One shard's discoverer hands out configs for its own clusters only.
    first = Discoverer(tmp_path / "config", None, shard=Shard(0, 3))
    first.scan()
    assert all(
        (first.context_config(c) is not None) == Shard(0, 3).owns(c.name) for c in whole.clusters
    )


@pytest.mark.live
def test_discover_shows_one_shard(tmp_path: Path) -> None:
    names = [f"c{i}" for i in range(20)]
    write_fleet(tmp_path / "config", names)
    command = [sys.executable, "-m", "fleetwatch.cli", "discover", "--kubeconfig"]
    shown = []
    for index in range(2):
        result = subprocess.run(
            [*command, str(tmp_path / "config"), "--shard.count=2", f"--shard.index={index}"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert result.returncode == 0, result.stderr
        doc = json.loads(
            subprocess.run(
                [
                    *command,
                    str(tmp_path / "config"),
                    "--shard.count=2",
                    f"--shard.index={index}",
                    "--output=json",
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).resolve().parents[2],
                env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            ).stdout
        )
        assert doc["shard"] == {"index": index, "count": 2, "fleet_size": 20}
        shown.append({c["name"] for c in doc["clusters"]})
        assert f"cluster(s) in shard {index} of 2 (20 in the fleet)" in result.stdout
    assert shown[0] | shown[1] == set(names) and not shown[0] & shown[1]


@pytest.mark.live
async def test_a_sharded_exporter_probes_and_publishes_its_shard_only(
    fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: Callable[[web.Application], Any]
) -> None:
    names = [f"c{i}" for i in range(8)]
    for name in names:
        await fleet.add_cluster(name)
    fleet.write_kubeconfig(kubeconfig_dir / "fleet.yaml", names, credential="token")
    shard = Shard(1, 3)
    mine = {n for n in names if shard.owns(n)}
    assert 0 < len(mine) < len(names)
    settings = resolve(
        env={}, kubeconfig="", kubeconfig_dir=str(kubeconfig_dir), shard_count=3, shard_index=1
    )
    app = create_app(settings, run_loop=False)
    client = await aiohttp_client(app)
    await app[MONITOR].run_cycle()
    text = await (await client.get("/metrics")).text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert [s.labels for s in families["fleetwatch_exporter_shard"].samples] == [
        {"index": "1", "count": "3"}
    ]
    info = {s.labels["cluster"] for s in families["fleetwatch_cluster_info"].samples}
    assert info == mine
    assert {n for n in names if fleet.requests(n)} == mine


@pytest.mark.live
def test_index_from_hostname_reads_the_pods_hostname(tmp_path: Path) -> None:
    write_fleet(tmp_path / "config", [f"c{i}" for i in range(10)])
    flags = [
        f"--kubeconfig={tmp_path / 'config'}",
        "--shard.count=3",
        "--shard.index-from-hostname",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "discover", "--output=json", *flags],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={"PATH": "/usr/bin:/bin", "HOSTNAME": "fleetwatch-exporter-a-2"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["shard"] == {"index": 2, "count": 3, "fleet_size": 10}
    assert {c["name"] for c in answer["clusters"]} == {
        f"c{i}" for i in range(10) if shard_of(f"c{i}", 3) == 2
    }
    assert current_hostname({"HOSTNAME": "pod-1"}) == "pod-1"
    assert current_hostname({}) == socket.gethostname()
