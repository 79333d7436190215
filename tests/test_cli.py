"""The `fleetwatch` command gathers every subcommand, and a process imports only its own."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from fleetwatch.cli import COMMANDS, build_parser
from fleetwatch.common.logs import DEFAULT_LEVEL
from fleetwatch.common.version import __version__
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import ThreadedFleet

#: What the exporter's process never needs: the reactor's stack and the kubernetes client.
NOT_IN_THE_EXPORTER = ("reactor", "pydantic", "psycopg", "kubernetes", "sqlite3")


@pytest.mark.parametrize("command", ["exporter", "discover", "reactor", "status", "rules", "demo"])
def test_every_subcommand_is_registered(command: str) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([command, "--help"])
    assert exc.value.code == 0


def test_every_subcommand_with_log_flags_defaults_to_the_one_level() -> None:
    """One ``--log.level`` default, stated once: discover and demo once differed (error,
    and a ``warning`` that was not among the choices)."""
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    seen = {}
    for name, sub in action.choices.items():
        for flag in sub._actions:
            if "--log.level" in flag.option_strings:
                assert flag.default in (flag.choices or ()), (name, flag.default)
                seen[name] = flag.default
    assert {"exporter", "discover", "reactor", "demo"} <= set(seen)
    assert set(seen.values()) == {DEFAULT_LEVEL}, seen


def test_version_is_the_one_common_defines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("fleetwatch") and __version__ in first.split(), first


def subcommands(parser: argparse.ArgumentParser) -> set[str]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_the_table_names_exactly_the_subcommands_the_modules_add() -> None:
    assert subcommands(build_parser()) == set(COMMANDS)
    for command in COMMANDS:  # each one's own module adds it
        assert command in subcommands(build_parser(command))


def _imported(code: str) -> list[str]:
    """Top-level packages a fresh interpreter has imported after ``code``."""
    tops = "sorted({m.split('.')[0] for m in sys.modules})"
    probe = f"import sys, json\n{code}\nprint(json.dumps({tops}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    found: list[str] = json.loads(done.stdout)
    return found


def test_a_subcommand_imports_only_the_module_that_defines_it() -> None:
    exporter = _imported("from fleetwatch.cli import build_parser; build_parser('exporter')")
    assert "exporter" in exporter
    assert [m for m in NOT_IN_THE_EXPORTER if m in exporter] == []
    reactor = _imported("from fleetwatch.cli import build_parser; build_parser('reactor')")
    assert "reactor" in reactor and "aiohttp" in reactor
    everything = _imported("from fleetwatch.cli import build_parser; build_parser()")
    assert {"reactor", "exporter"} <= set(everything)


@pytest.mark.live
def test_the_exporter_process_never_imports_the_reactor_or_the_kubernetes_client(
    tmp_path: Path,
) -> None:
    """A real ``fleetwatch exporter`` probing a cluster with embedded client certificates,
    traced by ``python -X importtime``: every import of its life is in its log."""
    with ThreadedFleet(tmp_path / "fleet") as fleet:
        fleet.add_cluster("good")
        fleet.add_cluster("by-token")
        folder = tmp_path / "kube"
        fleet.write_kubeconfig_dir(folder, ["good"])
        fleet.write_kubeconfig_dir(folder / "tokens", ["by-token"], credential="token_file")
        port = free_port()
        log = tmp_path / "exporter.log"
        argv = [sys.executable, "-X", "importtime", "-m", "fleetwatch.cli", "exporter",
                f"--web.listen-address=127.0.0.1:{port}", "--kubeconfig=",
                f"--kubeconfig.dir={folder}", "--probe.interval=1"]  # fmt: skip
        with ManagedProcess(argv, log, ready_url=f"http://127.0.0.1:{port}/healthz") as proc:

            def probed() -> bool:
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=2) as resp:
                    text = resp.read().decode()
                return all(
                    f'fleetwatch_cluster_probe_success{{cluster="{name}"}} 1' in text
                    for name in ("good", "by-token")
                )

            wait_until(probed, 30, what="both clusters probed")
            assert proc.stop() == 0, proc.log_tail()
    imported = {
        m.group(1).split(".")[0]
        for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", log.read_text(), re.M)
    }
    assert {"exporter", "aiohttp", "ssl"} <= imported  # the trace is there
    assert [m for m in NOT_IN_THE_EXPORTER if m in imported] == []


def test_a_client_command_says_the_reactors_own_error_not_only_the_http_reason() -> None:
    """``fleetwatch status``/``cluster``/``gate`` print the JSON ``error`` of an answer
    ("database unavailable", "cluster 'x' not found"), else the HTTP reason."""
    import io
    import urllib.error
    from email.message import Message

    from fleetwatch.cli.status import error_message

    def answer(body: bytes) -> urllib.error.HTTPError:
        return urllib.error.HTTPError(
            "http://r/clusters", 503, "Service Unavailable", Message(), io.BytesIO(body)
        )

    said = b'{"error": "the database is unavailable; retry"}'
    assert error_message(answer(said)) == "the database is unavailable; retry"
    assert error_message(answer(b"<html>proxy error</html>")) == "Service Unavailable"
    assert error_message(answer(b'{"error": ""}')) == "Service Unavailable"
