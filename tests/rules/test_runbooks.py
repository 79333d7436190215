"""Every shipped alert links to its own section of docs/runbooks.md, and no section is stray.

The link is ``runbook_url`` in the rendered rules (``alerts/fleetwatch.rules.yml`` and any
base URL ``fleetwatch rules --runbook.base-url`` is given); the anchors are read from the
page as GitHub makes them (``test_docs.anchors``: lower case, punctuation dropped, ``-1``
suffixes for repeated headings), so a heading renamed or removed breaks the link here.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from test_docs import anchors, prose

from alerts.rules import RuleSettings, render_rules

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks.md"
SHIPPED_RULES = ROOT / "alerts" / "fleetwatch.rules.yml"


def _alerts(rules_text: str) -> list[dict[str, object]]:
    return [r for g in yaml.safe_load(rules_text)["groups"] for r in g["rules"] if "alert" in r]


def _sections() -> list[str]:
    """The alert each third-level heading names (``### FleetClusterOffline``)."""
    return [m.group(1) for line in prose(RUNBOOKS) if (m := re.fullmatch(r"### (\w+)", line))]


def test_every_shipped_alert_links_to_an_existing_section() -> None:
    found = anchors(RUNBOOKS)
    alerts = _alerts(SHIPPED_RULES.read_text())
    assert len(alerts) >= 30
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]  # type: ignore[index]
        base, _, anchor = url.partition("#")
        assert base == RuleSettings().runbook_base_url, url
        assert base == "docs/runbooks.md"  # no address we do not control
        assert anchor in found, f"{rule['alert']}: no heading of docs/runbooks.md makes #{anchor}"


def test_every_section_names_an_alert_that_is_shipped() -> None:
    shipped = {str(r["alert"]) for r in _alerts(SHIPPED_RULES.read_text())}
    sections = _sections()
    assert len(sections) == len(set(sections)), "a section is written twice"
    assert set(sections) == shipped


def test_each_section_says_what_it_means_what_to_check_and_how_it_ends() -> None:
    text = "\n".join(prose(RUNBOOKS))
    bodies = re.split(r"^### \w+$", text, flags=re.M)[1:]
    assert len(bodies) == len(_sections())
    for name, body in zip(_sections(), bodies, strict=True):
        for part in ("**Means.**", "**Check first.**", "**Ends**"):
            assert part in body, f"{name}: no {part}"


def test_another_base_url_moves_every_link_and_keeps_the_anchor() -> None:
    ours = _alerts(render_rules(RuleSettings()))
    theirs = _alerts(render_rules(RuleSettings(runbook_base_url="https://wiki.example/ops/rb")))
    assert [r["alert"] for r in ours] == [r["alert"] for r in theirs]
    for mine, other in zip(ours, theirs, strict=True):
        anchor = mine["annotations"]["runbook_url"].partition("#")[2]  # type: ignore[index]
        assert other["annotations"]["runbook_url"] == f"https://wiki.example/ops/rb#{anchor}"  # type: ignore[index]
