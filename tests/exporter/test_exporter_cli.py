"""The command line through a real subprocess: `fleetwatch exporter` and `fleetwatch discover`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from exporter.server import MONITOR, create_app
from exporter.settings import SettingsError, resolve
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ThreadedFleet

#: the installed console script, next to the interpreter running the tests
_SCRIPT = Path(sys.executable).parent / "fleetwatch"
FLEETWATCH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "fleetwatch.cli"]


@pytest.fixture
def threaded_fleet(tmp_path: Path) -> Iterator[ThreadedFleet]:
    with ThreadedFleet(tmp_path / "fleet") as fleet:
        yield fleet


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEETWATCH, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


@pytest.mark.live
def test_exporter_serves_metrics_and_stops_on_sigterm(
    threaded_fleet: ThreadedFleet, tmp_path: Path
) -> None:
    threaded_fleet.add_cluster("good")
    threaded_fleet.add_cluster("down", "down")
    folder = tmp_path / "kube"
    threaded_fleet.write_kubeconfig_dir(folder, credential="token_file")
    port = free_port()
    log = tmp_path / "exporter.log"
    proc = ManagedProcess(
        [
            *FLEETWATCH,
            "exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            "--kubeconfig",
            str(tmp_path / "no-main-config"),
            "--kubeconfig.dir",
            str(folder),
            "--probe.interval=1",
            "--probe.timeout=0.5",
        ],
        log,
        ready_url=f"http://127.0.0.1:{port}/healthz",
    )
    with proc:

        def scraped() -> str | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                text: str = resp.read().decode()
            done = 'fleetwatch_cluster_probe_consecutive_failures{cluster="down"} 2' in text
            return text if done else None

        text = wait_until(scraped, 20, what="two cycles scraped")
        assert 'fleetwatch_cluster_probe_success{cluster="good"} 1' in text
        assert 'fleetwatch_cluster_probe_success{cluster="down"} 0' in text
        assert 'reason="connect"' in text
        if shutil.which("promtool"):  # the whole assembled output, plugged-in checks included
            check = subprocess.run(
                ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
            )
            assert (check.returncode, check.stdout + check.stderr) == (0, "")
        code = proc.stop()
    assert code == 0, proc.log_tail()
    logs = log.read_text()
    assert "file not found" in logs  # the missing main kubeconfig, reported once
    assert logs.count("file not found") == 1
    for cluster in threaded_fleet.clusters.values():
        assert cluster.token not in logs


@pytest.mark.live
def test_an_open_files_limit_too_low_for_the_fleet_is_said_once(
    threaded_fleet: ThreadedFleet, tmp_path: Path
) -> None:
    """Past the limit every accept fails, /metrics included: say so before it happens."""
    for name in ("a", "b", "c"):
        threaded_fleet.add_cluster(name)
    folder = tmp_path / "kube"
    threaded_fleet.write_kubeconfig_dir(folder)
    port = free_port()
    log = tmp_path / "exporter.log"
    command = " ".join(
        [
            *FLEETWATCH,
            "exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--kubeconfig={tmp_path / 'none'}",
            f"--kubeconfig.dir={folder}",
            "--probe.interval=0.5",
        ]
    )
    # A hard limit of 200 cannot be raised by the exporter: 3 clusters + 256 spare need more.
    proc = ManagedProcess(
        ["bash", "-c", f"ulimit -n 200 && exec {command}"],
        log,
        ready_url=f"http://127.0.0.1:{port}/healthz",
    )
    with proc:
        wait_until(lambda: log.read_text().count("cycle 3:"), 20, what="three cycles")
        code = proc.stop()
    assert code == 0, proc.log_tail()
    text = log.read_text()
    assert text.count("open-files limit 200 is below the 259 this fleet needs") == 1, text
    assert "LimitNOFILE=259" in text and "--ulimit nofile=259:259" in text, text


@pytest.mark.live
def test_discover_json_lists_clusters_and_problems(
    threaded_fleet: ThreadedFleet, tmp_path: Path
) -> None:
    threaded_fleet.add_cluster("a")
    folder = tmp_path / "kube"
    threaded_fleet.write_kubeconfig_dir(folder)
    (folder / "broken.yaml").write_text(": : :")
    env = {"KUBECONFIG_PATH": str(tmp_path / "missing"), "PATH": "/usr/bin:/bin"}
    result = run("discover", "--output", "json", "--kubeconfig.dir", str(folder), env=env)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["clusters"] == [
        {
            "name": "a",
            "endpoint": threaded_fleet.cluster("a").url,
            "source": str(folder / "a.yaml"),
            "probeable": True,
            "not_probeable": None,
            "proxy": None,
        }
    ]
    assert [(Path(p["source"]).name, p["context"]) for p in doc["problems"]] == [
        ("missing", None),
        ("broken.yaml", None),
    ]
    table = run("discover", "--kubeconfig.dir", str(folder), env=env)
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["NAME", "ENDPOINT", "PROBEABLE", "SOURCE"]
    assert "1 cluster(s), 2 problem(s)" in table.stdout


@pytest.mark.live
def test_discover_shows_a_clusters_proxy_without_its_credentials(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "proxied.yaml"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "proxy-url": "http://alice:s3cret@proxy.example:3128",
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "behind", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    env = {"KUBECONFIG_PATH": str(kubeconfig), "PATH": "/usr/bin:/bin"}
    result = run("discover", "--output", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["clusters"][0]["proxy"] == "http://proxy.example:3128"
    table = run("discover", env=env)
    assert table.stdout.splitlines()[0].split() == [
        "NAME",
        "ENDPOINT",
        "PROBEABLE",
        "PROXY",
        "SOURCE",
    ]
    assert "http://proxy.example:3128" in table.stdout
    for output in (result.stdout, table.stdout, result.stderr, table.stderr):
        assert "s3cret" not in output and "alice" not in output


@pytest.mark.live
def test_discover_makes_relative_and_home_paths_absolute(
    threaded_fleet: ThreadedFleet, tmp_path: Path
) -> None:
    threaded_fleet.add_cluster("num")
    threaded_fleet.add_cluster("home")
    threaded_fleet.write_kubeconfig(tmp_path / "num.yaml", ["num"])
    (tmp_path / "kube").mkdir()
    threaded_fleet.write_kubeconfig(tmp_path / "kube" / "h.yaml", ["home"])
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    args = ("discover", "--output", "json", "--kubeconfig", "num.yaml")
    result = run(*args, "--kubeconfig.dir", "~/kube", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sources = {c["name"]: c["source"] for c in json.loads(result.stdout)["clusters"]}
    assert sources == {"num": str(tmp_path / "num.yaml"), "home": str(tmp_path / "kube" / "h.yaml")}


@pytest.mark.live
def test_timeout_longer_than_interval_is_refused() -> None:
    result = run("exporter", "--probe.interval=5", "--probe.timeout=6", "--config.check")
    assert result.returncode == 2
    assert "--probe.timeout 6s is longer than the probe interval 5s" in result.stderr


def test_settings_from_env_and_flags() -> None:
    env = {"KUBECONFIG_PATH": "/k/config", "KUBECONFIG_DIR": "/k/d", "CLUSTER_HEALTH_INTERVAL": "7"}
    s = resolve(env=env)
    assert (str(s.kubeconfig_path), str(s.kubeconfig_dir), s.interval, s.timeout) == (
        "/k/config",
        "/k/d",
        7.0,
        7.0,  # the default 10 s is clamped to the interval
    )
    s = resolve(env=env, kubeconfig="/flag", interval="60", timeout="3")
    assert (str(s.kubeconfig_path), s.interval, s.timeout) == ("/flag", 60.0, 3.0)
    s = resolve(env={"KUBECONFIG_PATH": "rel/config", "KUBECONFIG_DIR": "~/d"})
    assert s.kubeconfig_path == Path.cwd() / "rel" / "config"
    assert s.kubeconfig_dir == Path.home() / "d"
    for bad in (
        {"interval": "0"},
        {"interval": "soon"},
        {"concurrency": 0},
        {"max_idle_connections": -1},
        {"listen_address": "9713"},
    ):
        with pytest.raises(SettingsError):
            resolve(env={}, **bad)  # type: ignore[arg-type]


def test_max_idle_connections_reaches_the_connection_pool() -> None:
    """The memory/CPU trade-off of bench/RESULTS.md is the user's to choose, by flag."""
    assert resolve(env={}).max_idle_connections is None  # default: keep one per cluster
    app = create_app(resolve(env={}, max_idle_connections=7), run_loop=False)
    assert app[MONITOR].client.http.max_idle == 7


@pytest.mark.live
@pytest.mark.parametrize("command", ["exporter", "discover"])
def test_help_names_every_flag_and_variable(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0
    for word in ("--kubeconfig", "--kubeconfig.dir", "KUBECONFIG_PATH", "KUBECONFIG_DIR"):
        assert word in result.stdout
    if command == "exporter":
        for flag in (
            "--web.listen-address",
            "--probe.interval",
            "--probe.timeout",
            "--probe.concurrency",
            "--probe.max-idle-connections",
            "--config.file",
            "--config.check",
            "--log.level",
            "CLUSTER_HEALTH_INTERVAL",
            "127.0.0.1:9713",
        ):
            assert flag in result.stdout
        text = " ".join(result.stdout.split())
        assert "probes waiting for an answer take no slot" in text
    else:
        assert "--output {table,json}" in result.stdout


@pytest.mark.live
def test_config_check_accepts_no_file() -> None:
    result = run("exporter", "--config.check")
    assert result.returncode == 0
    assert "OK" in result.stdout


@pytest.mark.live
def test_config_check_validates_the_config_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text("clusters:\n  prod:\n    etcd:\n      endpoints: [http://127.0.0.1:2379]\n")
    result = run("exporter", "--config.file", str(good), "--config.check")
    assert (result.returncode, result.stdout.strip()) == (0, f"{good}: OK"), result.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("clusters:\n  prod:\n    etcd:\n      endpoint: [http://127.0.0.1:2379]\n")
    result = run("exporter", "--config.file", str(bad), "--config.check")
    assert result.returncode == 1
    assert "endpoint" in result.stderr and str(bad) in result.stderr


@pytest.mark.live
def test_the_exporter_process_runs_the_collector_policy(
    threaded_fleet: ThreadedFleet, tmp_path: Path
) -> None:
    """``fleetwatch exporter`` installs fleetwatch.common.gcpolicy: a full collection every
    10 cycles."""
    threaded_fleet.add_cluster("a")
    folder = tmp_path / "kube"
    threaded_fleet.write_kubeconfig_dir(folder)
    port = free_port()
    log = tmp_path / "exporter.log"
    proc = ManagedProcess(
        [
            *FLEETWATCH,
            "exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--kubeconfig={tmp_path / 'none'}",
            f"--kubeconfig.dir={folder}",
            "--probe.interval=0.2",
            "--log.level=debug",
        ],
        log,
        ready_url=f"http://127.0.0.1:{port}/healthz",
    )
    with proc:
        wait_until(lambda: "cycle 10:" in log.read_text(), 30, what="ten cycles")
        wait_until(
            lambda: "full garbage collection after 10 cycles" in log.read_text(),
            10,
            what="the policy's full collection",
        )
        assert proc.stop() == 0, proc.log_tail()


@pytest.mark.live
def test_discover_that_finds_nothing_says_where_it_looked_and_which_flags_to_give(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "KUBECONFIG": ""}
    table = run("discover", env=env)
    assert table.returncode == 0
    assert "0 cluster(s), 0 problem(s)" in table.stdout
    (hint,) = [line for line in table.stdout.splitlines() if "hint:" in line]
    assert "no main kubeconfig" in hint and "no kubeconfig folder" in hint
    for flag in ("--kubeconfig", "--kubeconfig.dir", "--discovery.kubernetes"):
        assert flag in hint
    # Something found: no hint.
    (tmp_path / "broken.yaml").write_text("not: [a kubeconfig")
    found = run("discover", "--kubeconfig", str(tmp_path / "broken.yaml"), env=env)
    assert "1 problem(s)" in found.stdout and "hint:" not in found.stdout
