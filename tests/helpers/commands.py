"""Running a command to its end for a test: output captured as text, a deadline, no exception.

Tests run tools (kubectl, amtool, systemd-analyze, ruff, the ``fleetwatch`` command) and then
look at the exit code and the output. The ``subprocess.run`` call for that was written out in
each test; here it is once, so a test states only what it runs and what it expects, and a
failure always shows both streams.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from subprocess import CompletedProcess

from typing_extensions import TypedDict, Unpack

FLEETWATCH = (sys.executable, "-m", "fleetwatch.cli")
"""The ``fleetwatch`` command as this interpreter runs it (the tests' PYTHONPATH applies)."""


class Options(TypedDict, total=False):
    """How :func:`run` runs a command: at most ``timeout`` seconds (60 unless given), in
    ``cwd``, with ``env`` as its whole environment, ``input_text`` on its stdin."""

    timeout: float
    cwd: Path | None
    env: Mapping[str, str] | None
    input_text: str | None


def run(argv: list[str] | tuple[str, ...], **options: Unpack[Options]) -> CompletedProcess[str]:
    """``argv`` run to its end, both streams kept, never raising on its exit code."""
    env = options.get("env")
    return subprocess.run(
        list(argv),
        input=options.get("input_text"),
        capture_output=True,
        text=True,
        timeout=options.get("timeout", 60),
        cwd=options.get("cwd"),
        env=None if env is None else dict(env),
        check=False,
    )


def run_ok(argv: list[str] | tuple[str, ...], **options: Unpack[Options]) -> CompletedProcess[str]:
    """:func:`run`, failing the test with both streams unless the exit code is 0."""
    done = run(argv, **options)
    said = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{said}"
    return done


def fleetwatch(*args: str, **options: Unpack[Options]) -> CompletedProcess[str]:
    """``fleetwatch ARGS`` run to its end (see :func:`run`)."""
    return run([*FLEETWATCH, *args], **options)
