"""Placeholder: etcd quorum, control-plane and CoreDNS rule groups (issue 5).

``fleetwatch.rules`` appends ``rule_groups()`` to the rules it renders.
"""

from __future__ import annotations

from typing import Any


def rule_groups() -> list[dict[str, Any]]:
    return []
