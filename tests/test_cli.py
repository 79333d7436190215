"""The `fleetwatch` command gathers every subcommand."""

from __future__ import annotations

import pytest

from common.version import __version__
from fleetwatch.cli import build_parser


@pytest.mark.parametrize("command", ["exporter", "discover", "reactor", "status", "rules", "demo"])
def test_every_subcommand_is_registered(command: str) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([command, "--help"])
    assert exc.value.code == 0


def test_version_is_the_one_common_defines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("fleetwatch") and __version__ in first.split(), first
