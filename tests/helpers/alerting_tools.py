"""promtool and amtool as the alerting tests run them, and promtool's unit tests of a rules
text in a folder of the test's own.

Each test module of tests/rules/ and tests/controlplane/ had its own copy of these: the tool
run with its output captured and a bound (a tool that hangs fails its test, well before the
test's deadline), the rules and the unit tests written side by side and checked in turn.
The tools are allowed to tests not marked ``live`` (tests/conftest.py): they start no server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_tool(
    *argv: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end, its output captured as text; the exit status is the caller's."""
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False
    )


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_tool("promtool", *args, cwd=cwd)


def amtool_check(config: Path) -> subprocess.CompletedProcess[str]:
    """``amtool check-config`` of one Alertmanager configuration file."""
    return run_tool("amtool", "check-config", str(config))


def unit_tests(
    folder: Path, rules_text: str, tests_text: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of ``tests_text`` (as test.yml, naming ``rules.yml``) against
    ``rules_text`` (as rules.yml), both written into ``folder``. With ``check`` the rules
    must first pass ``promtool check rules``; a test of broken rules says ``check=False``."""
    (folder / "rules.yml").write_text(rules_text)
    (folder / "test.yml").write_text(tests_text)
    if check:
        checked = promtool("check", "rules", "rules.yml", cwd=folder)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    return promtool("test", "rules", "test.yml", cwd=folder)
