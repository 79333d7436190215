"""The documentation stays short at the front, self-contained and free of broken links.

The README is what a newcomer reads first: it must start with the two set-up commands and
stay a five-minute read, the rest living in docs/. No file may send a reader to a document
the repository does not hold (the team's notes outside it), and every relative link of the
README and of docs/ must reach a file, and a heading when it names one.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 260
SETUP_COMMANDS = ["bash scripts/demo.sh", "bash scripts/test.sh"]

#: Documents that live outside the repository; written so that this file does not match.
OUTSIDE_DOCUMENTS = re.compile(r"\b(?:DESIGN|FACTS|STYLE)\.md\b|\.readme[-]parts")
LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
FENCE = "```"


def prose(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    kept: list[str] = []
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith(FENCE):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return kept


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose(path):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_file_cites_a_document_the_repository_does_not_hold() -> None:
    offenders = []
    for path in tracked_files():
        if not path.is_file():
            continue  # deleted in the working tree, not yet committed
        for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), 1):
            if OUTSIDE_DOCUMENTS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == [], "say it in our own words (in docs/) instead:\n" + "\n".join(offenders)


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move details to docs/"


def test_the_readme_starts_with_the_two_setup_commands() -> None:
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(FENCE))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(FENCE))
    commands = [line.split("#", 1)[0].strip() for line in lines[start + 1 : end]]
    assert commands == SETUP_COMMANDS


def link_targets(path: Path) -> list[str]:
    return [target for line in prose(path) for target in LINK.findall(line)]


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in link_targets(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: and the like
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading with that anchor in {destination.name}")
    assert broken == []


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in link_targets(README)}
    assert [page.name for page in PAGES if page not in linked] == []


def test_the_checks_above_can_fail(tmp_path: Path) -> None:
    """The helpers see a broken anchor, a cited outside document and GitHub's slugs."""
    page = tmp_path / "page.md"
    page.write_text("# Try it: `fleetwatch demo`\n\n## Try it: `fleetwatch demo`\n[x](#nope)\n")
    assert anchors(page) == {"try-it-fleetwatch-demo", "try-it-fleetwatch-demo-1"}
    assert link_targets(page) == ["#nope"]
    assert OUTSIDE_DOCUMENTS.search("see " + "DESIGN" + ".md")
    assert not OUTSIDE_DOCUMENTS.search("see docs/development.md")
