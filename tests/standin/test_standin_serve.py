"""``python -m fleetwatch.standin serve`` in its own process, driven by its control API."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin.__main__ import main


def _http(method: str, url: str, body: object = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _readyz(url: str, ca_file: str, token: str) -> int:
    ctx = ssl.create_default_context(cafile=ca_file)
    request = urllib.request.Request(url + "/readyz", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5, context=ctx) as resp:
        return int(resp.status)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One served fleet for the module; stopping it with SIGTERM must exit 0."""
    tmp_path = tmp_path_factory.mktemp("served")
    port = free_port()
    argv = [sys.executable, "-m", "fleetwatch.standin", "serve", "--clusters", "3",
            "--dir", str(tmp_path / "kube"), "--prefix", "demo", "--control-port", str(port),
            "--credential", "token"]  # fmt: skip
    proc = ManagedProcess(
        argv, tmp_path / "standin.log", ready_url=f"http://127.0.0.1:{port}/healthz"
    )
    proc.start()
    try:
        line = wait_until(
            lambda: next((ln for ln in proc.log_tail().splitlines() if ln.startswith("{")), None),
            10,
            what="summary line",
        )
        yield proc, json.loads(line), port
    finally:
        assert proc.stop() == 0, proc.log_tail()


@pytest.mark.live
def test_serve_prints_clusters_and_writes_kubeconfigs(served: Any) -> None:
    _, summary, port = served
    assert summary["control_url"] == f"http://127.0.0.1:{port}"
    names = [c["name"] for c in summary["clusters"]]
    assert names == ["demo-001", "demo-002", "demo-003"]
    first = summary["clusters"][0]
    assert "token" not in json.dumps(summary).replace("tokens", "")
    document = yaml.safe_load(Path(first["kubeconfig"]).read_text())
    assert document["contexts"][0]["name"] == "demo-001"
    assert document["clusters"][0]["cluster"]["server"] == first["url"]
    token = document["users"][0]["user"]["token"]
    assert _readyz(first["url"], summary["ca_file"], token) == 200


@pytest.mark.live
def test_control_api_switches_modes(served: Any) -> None:
    _, summary, _ = served
    control = summary["control_url"]
    first = summary["clusters"][0]
    token = yaml.safe_load(Path(first["kubeconfig"]).read_text())["users"][0]["user"]["token"]

    status, clusters = _http("GET", control + "/clusters")
    assert status == 200
    assert {c["name"]: c["mode"] for c in clusters} == dict.fromkeys(
        ["demo-001", "demo-002", "demo-003"], "ok"
    )
    assert all(set(c) == {"name", "url", "mode", "requests"} for c in clusters)

    before = next(c["requests"] for c in clusters if c["name"] == "demo-001")
    assert _http("PUT", control + "/clusters/demo-001/mode", {"mode": "down"}) == (
        200,
        {"name": "demo-001", "url": first["url"], "mode": "down", "requests": before},
    )
    with pytest.raises(urllib.error.URLError):
        _readyz(first["url"], summary["ca_file"], token)
    status, _ = _http("PUT", control + "/clusters/demo-001/mode", {"mode": "ok"})
    assert status == 200 and _readyz(first["url"], summary["ca_file"], token) == 200
    assert _http("GET", control + "/clusters/demo-001")[1]["requests"] == before + 1

    assert _http("PUT", control + "/clusters/demo-001/mode", {"mode": "sideways"})[0] == 400
    assert _http("PUT", control + "/clusters/demo-001/mode", {"state": "down"})[0] == 400
    assert _http("PUT", control + "/clusters/nope/mode", {"mode": "down"})[0] == 404
    assert _http("GET", control + "/clusters/demo-001")[1]["mode"] == "ok"


def test_exec_credential_prints_an_exec_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("secret-value\n")
    assert main(["exec-credential", "--token-file", str(token_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "secret-value"},
    }
    assert main(["exec-credential"]) == 2


@pytest.mark.live
def test_control_api_changes_the_topology(served: Any) -> None:
    _, summary, _ = served
    url = summary["control_url"] + "/clusters/demo-003/control-plane"
    status, plane = _http("GET", url)
    assert status == 200
    assert plane["localhost_bound"] == ["etcd", "kube-controller-manager", "kube-scheduler"]
    assert plane["coredns_nodes"] == ["cp-1", "cp-1"]

    change = {"etcd_not_ready": ["cp-2"], "coredns_nodes": ["cp-1", "cp-3"]}
    status, plane = _http("PUT", url, change)
    assert status == 200 and plane["etcd_not_ready"] == ["cp-2"]
    assert plane["nodes"] == 3  # fields not given are kept
    assert _http("GET", url)[1]["coredns_nodes"] == ["cp-1", "cp-3"]

    for bad in ({"etcd_not_ready": ["cp-9"]}, {"colour": "blue"}, {"nodes": "three"}, [1]):
        status, error = _http("PUT", url, bad)
        assert status == 400 and error["error"]
    assert _http("GET", url)[1]["etcd_not_ready"] == ["cp-2"]
    assert _http("GET", summary["control_url"] + "/clusters/nope/control-plane")[0] == 404
