"""`fleetwatch discover` never prints a raw control byte: a context whose name has one is a
problem shown escaped (fleetwatch.common.names), in the table and in the JSON, and on stderr too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ThreadedFleet
from tests.helpers.discovery_names import BAD_LIST as BAD

_SCRIPT = Path(sys.executable).parent / "fleetwatch"
FLEETWATCH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "fleetwatch.cli"]
#: the checkout under test, ahead of any installed copy in the child process
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def threaded_fleet(tmp_path: Path) -> Iterator[ThreadedFleet]:
    with ThreadedFleet(tmp_path / "fleet") as fleet:
        yield fleet


def raw_controls(output: bytes) -> list[str]:
    """Every character of ``output`` a terminal could take as a command, or that hides:
    C0 but the newline, DEL, C1, format characters; bytes that are not UTF-8 count too."""
    text = output.decode("utf-8", errors="surrogateescape")
    return [c for c in text if not c.isprintable() and c != "\n"]


@pytest.mark.live
@pytest.mark.parametrize("output", ["table", "json"])
def test_discover_lists_each_such_context_as_a_problem_and_prints_no_raw_byte(
    tmp_path: Path, output: str
) -> None:
    kubeconfig = tmp_path / "config"
    contexts = ["good", "prod east", *(b.name for b in BAD)]
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": n, "context": {"cluster": "c", "user": "u"}} for n in contexts
                ],
            }
        )
    )
    env = {"KUBECONFIG_PATH": str(kubeconfig), "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [*FLEETWATCH, "discover", "--output", output, "--log.level", "debug"],
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert raw_controls(result.stdout) == [] and raw_controls(result.stderr) == []
    stdout = result.stdout.decode()
    if output == "json":
        doc = json.loads(stdout)
        assert [c["name"] for c in doc["clusters"]] == ["good", "prod east"]
        problems = doc["problems"]
        assert [p["context"] for p in problems] == [f"prod{b.escape}{b.name[5:]}" for b in BAD]
        for problem, bad in zip(problems, BAD, strict=True):
            assert problem["source"] == str(kubeconfig)
            assert f"has U+{ord(bad.char):04X}" in problem["reason"]
        return
    lines = stdout.splitlines()
    assert lines[0].split() == ["NAME", "ENDPOINT", "PROBEABLE", "SOURCE"]
    assert [line.split("  ")[0] for line in lines[1:3]] == ["good", "prod east"]
    assert f"2 cluster(s), {len(BAD)} problem(s)" in stdout
    listed = [line for line in lines if line.startswith("  problem: ")]
    assert len(listed) == len(BAD), stdout
    for line, bad in zip(listed, BAD, strict=True):
        shown = f"'prod{bad.escape}{bad.name[5:]}'"
        assert line.startswith(f"  problem: {kubeconfig} (context {shown}): context name has")
        assert f"has U+{ord(bad.char):04X}" in line


@pytest.mark.live
def test_the_exporter_publishes_none_of_them_and_logs_each_escaped(
    tmp_path: Path, threaded_fleet: ThreadedFleet
) -> None:
    """Never a label value: the good context is probed, each refused one is counted once in
    ``fleetwatch_exporter_discovery_errors_total``; neither /metrics nor the log (JSON
    format) carries a raw character."""
    threaded_fleet.add_cluster("good")
    folder = tmp_path / "kube"
    threaded_fleet.write_kubeconfig_dir(folder)
    config = yaml.safe_load((folder / "good.yaml").read_text())
    entry = config["contexts"][0]
    config["contexts"] += [{**entry, "name": bad.name} for bad in BAD]
    (folder / "good.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "exporter.log"
    command = [*FLEETWATCH, "exporter", f"--web.listen-address=127.0.0.1:{port}"]
    command += ["--kubeconfig=", f"--kubeconfig.dir={folder}"]
    command += ["--probe.interval=1", "--log.format=json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ManagedProcess(command, log, ready_url=f"http://127.0.0.1:{port}/healthz", env=env):

        def scraped() -> bytes | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                body: bytes = resp.read()
            done = b'fleetwatch_cluster_probe_success{cluster="good"} 1' in body
            return body if done else None

        body = wait_until(scraped, 20, what="the good cluster probed")
    assert raw_controls(body) == []
    text = body.decode()
    errors = [line for line in text.splitlines() if line.startswith("fleetwatch_exporter_disc")]
    assert errors == [f"fleetwatch_exporter_discovery_errors_total {len(BAD)}"], errors
    info = [line for line in text.splitlines() if line.startswith("fleetwatch_cluster_info{")]
    assert len(info) == 1 and 'cluster="good"' in info[0], info
    logged = log.read_bytes()
    assert raw_controls(logged) == []
    lines = [json.loads(line)["msg"] for line in logged.decode().splitlines() if line]
    refused = [m for m in lines if "context name has" in m]
    assert len(refused) == len(BAD), lines
    for message, bad in zip(refused, BAD, strict=True):
        assert f"(context 'prod{bad.escape}" in message
