"""The safety net of the ``live`` mark (tests/conftest.py): a test that is not marked live
is refused servers, fleets and fleetwatch processes, and keeps its tools."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from exporter.net.execplugin import _GUARD
from fleetwatch.standin import StandinFleet

CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.fixture
def net(request: pytest.FixtureRequest) -> ModuleType:
    """tests/conftest.py as pytest loaded it."""
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == str(CONFTEST):
            assert isinstance(plugin, ModuleType)
            return plugin
    raise AssertionError("tests/conftest.py is not loaded")


class Unmarked:
    """A test item without the mark."""

    def get_closest_marker(self, name: str) -> None:
        return None


@pytest.mark.parametrize(
    "argv",
    [
        ["/srv/checkout/.venv/bin/ruff", "check", "."],
        ["promtool", "test", "rules", "t.yml"],
        [sys.executable, "-c", "print(1)"],
        [sys.executable, "/tmp/x/plugin.py", "token"],
        [sys.executable, "-m", "dashboards", "--out", "/tmp/x"],
        ["/bin/sh", "-c", _GUARD, "11.000", sys.executable, "plugin.py"],
    ],
)
def test_tools_snippets_and_exec_plugins_are_allowed(net: ModuleType, argv: list[str]) -> None:
    assert net._allowed(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["prometheus", "--config.file=p.yml"],
        ["/usr/bin/etcd"],
        ["runuser", "-u", "postgres", "--", "initdb"],
        ["podman", "run", "image"],
        [sys.executable, "-m", "fleetwatch.cli", "rules"],
        [str(Path(sys.executable).parent / "fleetwatch"), "--help"],
        ["/bin/sh", "-c", "prometheus"],
        [],
    ],
)
def test_servers_and_fleetwatch_are_refused(net: ModuleType, argv: list[str]) -> None:
    assert not net._allowed(argv)


def test_an_unmarked_test_is_refused_a_server_and_a_fleet(net: ModuleType, tmp_path: Path) -> None:
    popen_init, fleet_start = subprocess.Popen.__init__, StandinFleet.start
    with net._unless_live(Unmarked()) as started:
        with pytest.raises(net.NotMarkedLive, match="mark the test live"):
            subprocess.run(["prometheus", "--version"], check=False)
        with pytest.raises(net.NotMarkedLive, match="stand-in fleet"):
            asyncio.run(StandinFleet(tmp_path / "fleet").start())
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # a tool: allowed
    assert len(started) == 2
    assert (subprocess.Popen.__init__, StandinFleet.start) == (popen_init, fleet_start)
