"""The files fleetwatch ships beside its code, read the same way from a checkout or a wheel.

The example Alertmanager configuration, the rules rendered for the defaults and the
Grafana dashboards live in the repository's ``alerts/`` and ``dashboards/``, where people
look for them. ``fleetwatch/data/`` holds relative symlinks to them: the package sees them
as its own data (``importlib.resources``), and building a wheel copies their contents into
it, so an installed ``fleetwatch demo`` reads the shipped route without a checkout, and
no copy can drift.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

import yaml


def data() -> Traversable:
    """The folder of shipped files inside the installed (or checked-out) package."""
    return files("fleetwatch") / "data"


def alertmanager_config() -> dict[str, Any]:
    """``alerts/alertmanager.yml``: the route that sends the status alerts to the reactor."""
    loaded: dict[str, Any] = yaml.safe_load((data() / "alertmanager.yml").read_text("utf-8"))
    return loaded
