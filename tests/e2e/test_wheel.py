"""`pip install .` (not editable) gives a `fleetwatch demo` that works away from any checkout.

The wheel is built from a copy of the sources, so a stale ``build/`` folder of the checkout
cannot leak into it, and installed into a fresh venv outside the checkout. That venv sees
the running environment's packages through one ``.pth`` line (no download; a folder added
that way has its own ``.pth`` files ignored, so the checkout's editable install stays out).
Then ``fleetwatch demo`` runs from an empty folder, with Prometheus and Alertmanager, until
the stand-in cluster the test takes down is OFFLINE.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetwatch.cli.wiring import JsonClient
from fleetwatch.procs import wait_until
from tests.helpers.commands import run, run_ok
from tests.helpers.e2e_demo import running_demo

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the packages, the shipped files they link to, the metadata.
SOURCES = ("fleetwatch", "exporter", "reactor", "alerts", "dashboards")
#: The import names an install adds, and no other: generic ones (``common``) would clash
#: with other distributions' packages in site-packages (docs/development.md, "Layout").
TOP_LEVEL = {"fleetwatch", "exporter", "reactor", "alerts", "dashboards"}
#: Two clusters probed every second: OFFLINE two seconds after `down`.
DEMO_ARGS = ("--web.free-ports", "--clusters=2", "--probe.interval=1")


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    return run_ok(argv, timeout=180, cwd=cwd, env=env).stdout


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        # symlinks=True: the wheel must be built from fleetwatch/data's links, as a release is.
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=ignore)
    out = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)])
    (wheel,) = out.glob("fleetwatch-*.whl")
    return wheel


def install_in_fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "fleetwatch-test-deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)])
    return venv


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}


def test_installed_wheel_runs_the_demo_to_an_offline_cluster(
    tmp_path: Path, record_timing: Callable[[str, float, float | None], None]
) -> None:
    started = time.monotonic()
    venv = install_in_fresh_venv(tmp_path, build_wheel(tmp_path))
    work = tmp_path / "work"  # outside the checkout, and empty
    work.mkdir()
    fleetwatch = str(venv / "bin" / "fleetwatch")

    where = json.loads(
        _run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import json, alerts, dashboards, exporter, fleetwatch, reactor; print(json.dumps("
                "{m.__name__: m.__file__ for m in (alerts, dashboards, exporter, fleetwatch, "
                "reactor)}))",
            ],
            cwd=work,
            env=clean_env(),
        )
    )
    for name, path in where.items():
        assert Path(path).is_relative_to(venv), f"{name} imported from {path}, not the wheel"
    # One namespace: the top-level names the installed distribution's files sit under.
    files = json.loads(
        _run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import json, importlib.metadata as m; "
                "print(json.dumps([str(f) for f in m.distribution('fleetwatch').files]))",
            ],
            cwd=work,
            env=clean_env(),
        )
    )
    top = {
        Path(f).parts[0]
        for f in files
        if not Path(f).parts[0].endswith(".dist-info") and not f.startswith("..")
    }
    assert top == TOP_LEVEL, sorted(top)
    # A package people can vet: the declared license, its text, and classifiers.
    meta = json.loads(
        _run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import json, importlib.metadata as m; d = m.distribution('fleetwatch'); "
                "print(json.dumps({'license': d.metadata['License-Expression'], "
                "'files': d.metadata.get_all('License-File'), "
                "'classifiers': d.metadata.get_all('Classifier'), "
                "'text': (d.read_text('licenses/LICENSE') or '')[:200]}))",
            ],
            cwd=work,
            env=clean_env(),
        )
    )
    assert meta["license"] == "Apache-2.0" and meta["files"] == ["LICENSE"], meta
    assert "Apache License" in meta["text"] and "Version 2.0" in meta["text"], meta["text"]
    assert "Topic :: System :: Monitoring" in meta["classifiers"], meta["classifiers"]
    # The installed data are copies of the repository's files, byte for byte.
    data = Path(where["fleetwatch"]).parent / "data"
    installed = {p.relative_to(data): p.read_bytes() for p in data.rglob("*") if p.is_file()}
    repo_data = ROOT / "fleetwatch" / "data"
    expected = {
        p.relative_to(repo_data): p.read_bytes() for p in repo_data.rglob("*") if p.is_file()
    }
    assert installed == expected

    state_file = tmp_path / "demo.json"
    out = tmp_path / "demo.out"
    argv = [fleetwatch, "demo", *DEMO_ARGS, f"--state.file={state_file}"]
    with running_demo(argv, out, state_file, within=60, cwd=work, env=clean_env()) as demo:
        assert demo.poll() is None, out.read_text()
        assert "alertmanager" in out.read_text(), "the demo ran without Alertmanager"
        state = json.loads(state_file.read_text())
        reactor = JsonClient(state["reactor_url"])

        down = run(
            [fleetwatch, "demo", "down", "demo-001", f"--state.file={state_file}"],
            timeout=30,
            cwd=work,
            env=clean_env(),
        )
        assert down.returncode == 0, down.stderr + out.read_text()

        def status() -> str:
            found: str = {c["name"]: c["status"] for c in reactor.get("/clusters")}["demo-001"]
            return found

        wait_until(lambda: status() == "OFFLINE", 30, what="demo-001 OFFLINE")
        wait_until(
            lambda: re.search(r"cluster demo-001 +OFFLINE", out.read_text()) is not None,
            10,
            what="the demo printing demo-001 OFFLINE",
        )

        demo.send_signal(signal.SIGINT)
        assert demo.wait(30) == 0, out.read_text()
        assert not Path(state["folder"]).exists()
    record_timing("wheel built and installed, demo to OFFLINE", time.monotonic() - started, None)
