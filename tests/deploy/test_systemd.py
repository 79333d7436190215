"""The systemd units: systemd accepts them, they are hardened, and their command lines serve.

``systemd-analyze verify`` reads each unit as systemd would (it needs the ExecStart binary
to exist, so a copy names this checkout's ``fleetwatch``); it exits 0 on a misspelt or
unparsable option and only says so, so any output at all fails the test. Where the tool is
missing, only that test is skipped. The command lines are then run as the units would run
them: the example environment files expanded as systemd does (``$VAR`` split into words),
paths moved into a temporary folder, listen addresses to 127.0.0.1.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fleetwatch.procs import ManagedProcess, free_port
from tests.helpers.deploy_manifests import REPO

UNITS = REPO / "deploy" / "systemd"
INSTALLED_BINARY = "/opt/fleetwatch/bin/fleetwatch"
FLEETWATCH = REPO / ".venv" / "bin" / "fleetwatch"
SERVICES = ("fleetwatch-exporter", "fleetwatch-reactor")
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "SystemCallFilter": "@system-service",
    "User": "fleetwatch",
}


def options(unit: str) -> dict[str, list[str]]:
    """``Key -> values`` of the [Service] section (a key may repeat, as SystemCallFilter)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in (UNITS / f"{unit}.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service":
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def environment(path: Path) -> dict[str, str]:
    env = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def command_line(unit: str, env: dict[str, str]) -> list[str]:
    """ExecStart as systemd expands it: ``$VAR`` splits into words, ``${VAR}`` does not."""
    words: list[str] = []
    for word in options(unit)["ExecStart"][0].split():
        whole = re.fullmatch(r"\$(\w+)", word)
        if whole:
            words += env.get(whole.group(1), "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here (Debian package systemd)")
    paths = []
    for unit in SERVICES:
        text = (UNITS / f"{unit}.service").read_text()
        assert INSTALLED_BINARY in text
        copy = tmp_path / f"{unit}.service"
        copy.write_text(text.replace(INSTALLED_BINARY, str(FLEETWATCH)))
        paths.append(str(copy))
    done = subprocess.run(
        [analyze, "verify", *paths], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_verify_reports_a_misspelt_option(tmp_path: Path) -> None:
    """What the test above relies on: a bad option is reported (though with exit code 0)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here (Debian package systemd)")
    text = (UNITS / "fleetwatch-exporter.service").read_text()
    copy = tmp_path / "fleetwatch-exporter.service"
    copy.write_text(
        text.replace(INSTALLED_BINARY, str(FLEETWATCH)).replace("ProtectHome=", "ProtectHomes=")
    )
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert "Unknown key 'ProtectHomes'" in done.stdout + done.stderr


@pytest.mark.parametrize("unit", SERVICES)
def test_the_units_are_hardened(unit: str) -> None:
    found = options(unit)
    for key, value in HARDENING.items():
        assert value in found.get(key, []), f"{unit}: {key}={value} missing"
    assert found["EnvironmentFile"] == [f"/etc/fleetwatch/{unit.split('-')[1]}.env"]
    assert found["ExecStart"][0].startswith(INSTALLED_BINARY)


def test_the_open_files_limits_fit_the_fleet() -> None:
    """The exporter keeps one connection per cluster plus 256 descriptors for the rest:
    enough for the largest fleet docs/deployment.md sizes (20,000, issue 34's)."""
    exporter = int(options("fleetwatch-exporter")["LimitNOFILE"][0])
    assert exporter >= 20_000 + 256
    assert int(options("fleetwatch-reactor")["LimitNOFILE"][0]) >= 1024


def test_the_reactor_keeps_its_state_in_its_state_directory() -> None:
    found = options("fleetwatch-reactor")
    assert found["StateDirectory"] == ["fleetwatch"]
    assert "--db.url=sqlite:////var/lib/fleetwatch/fleetwatch.db" in found["ExecStart"][0]
    assert found["WorkingDirectory"] == ["/var/lib/fleetwatch"]


def _local(words: list[str], tmp_path: Path, port: int) -> list[str]:
    out = [str(FLEETWATCH) if words[0] == INSTALLED_BINARY else words[0]]
    for word in words[1:]:
        word = re.sub(r"^--web\.listen-address=.*", f"--web.listen-address=127.0.0.1:{port}", word)
        word = word.replace("/var/lib/fleetwatch", str(tmp_path / "state"))
        word = word.replace("/etc/fleetwatch", str(tmp_path / "etc"))
        out.append(word)
    return out


@pytest.mark.live
@pytest.mark.parametrize(
    ("unit", "ready_path"),
    [("fleetwatch-exporter", "/-/ready"), ("fleetwatch-reactor", "/-/ready")],
)
def test_the_units_command_lines_serve(unit: str, ready_path: str, tmp_path: Path) -> None:
    """The flags in the unit and its example environment file are ones fleetwatch takes."""
    env = environment(UNITS / f"{unit.split('-')[1]}.env")
    etc = tmp_path / "etc"
    (etc / "kubeconfigs").mkdir(parents=True)
    (etc / "token").write_text("s3cret-token\n")
    (etc / "token").chmod(0o600)
    (tmp_path / "state").mkdir()
    env = {k: v.replace("/etc/fleetwatch", str(etc)) for k, v in env.items()}
    port = free_port()
    argv = _local(command_line(unit, env), tmp_path, port)
    with ManagedProcess(
        argv,
        tmp_path / f"{unit}.log",
        ready_url=f"http://127.0.0.1:{port}{ready_path}",
        env=env,
        cwd=tmp_path / "state",
    ):
        pass
    if unit == "fleetwatch-reactor":
        assert (tmp_path / "state" / "fleetwatch.db").exists()
    assert "s3cret-token" not in (tmp_path / f"{unit}.log").read_text()
