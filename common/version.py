"""The version of fleetwatch and the build information ``fleetwatch_build_info`` carries."""

from __future__ import annotations

import platform
from typing import Final

__version__: Final = "0.1.0"


def build_labels(revision: str = "unknown") -> dict[str, str]:
    """Labels of ``fleetwatch_build_info``, as Prometheus' own ``*_build_info`` series."""
    return {
        "version": __version__,
        "revision": revision,
        "python_version": platform.python_version(),
    }
