"""The promtool unit-test files shipped in alerts/tests/ are their generators' output, and
pass against the shipped rules: what a user runs, ``promtool test rules alerts/tests/X``.

One table for every generator in tests/helpers/ (``*_promtool.py``): a shipped file edited
by hand, or a generator changed without regenerating its file, fails here with the command
that regenerates it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from alerts.rules import RuleSettings
from tests.helpers import (
    controlplane_promtool,
    credentials_promtool,
    rules_promtool,
    sharding_promtool,
)
from tests.helpers.alerting_tools import promtool
from tests.helpers.promtool_build import Generator

SHIPPED = Path(__file__).resolve().parents[2] / "alerts" / "tests"
GENERATORS = [
    rules_promtool.GENERATOR,
    credentials_promtool.GENERATOR,
    sharding_promtool.GENERATOR,
    controlplane_promtool.GENERATOR,
]


def _shipped(generator: Generator) -> str:
    return generator.shipped


@pytest.mark.parametrize("generator", GENERATORS, ids=_shipped)
def test_the_shipped_file_is_its_generators_output(generator: Generator) -> None:
    shipped = SHIPPED / generator.shipped
    assert shipped.read_text() == generator.render(RuleSettings()), (
        f"alerts/tests/{generator.shipped} is stale: run `.venv/bin/python -m "
        f"tests.helpers.{generator.module} > alerts/tests/{generator.shipped}`"
    )


@pytest.mark.parametrize("generator", GENERATORS, ids=_shipped)
def test_the_shipped_file_passes_on_the_shipped_rules(generator: Generator) -> None:
    result = promtool("test", "rules", generator.shipped, cwd=SHIPPED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
