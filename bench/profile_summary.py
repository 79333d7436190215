"""Summarise a ``py-spy record -f raw`` profile: where the busy samples are.

Idle executor threads (waiting for work) are left out, so percentages are of the time a
thread was doing something. Prints the functions with the largest inclusive share and
the leaves (where the time is spent itself).

Run: ``.venv/bin/python -m bench.profile_summary bench/out/profiles/first-cycle-1k.raw``
(record with ``.venv/bin/py-spy record -r 200 -f raw -o FILE -- <command>``).
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

_FRAME = re.compile(r"(.+?) \((.+?)(?::\d+)?\)$")


def _name(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group(2).split("site-packages/")[-1].split("/lib/python3.11/")[-1]
    return f"{m.group(1)} ({path})"


def summarise(path: Path, top: int) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if "_worker (concurrent/futures/thread.py" in stack and "_WorkItem.run" not in stack:
            continue  # an idle executor thread
        n = int(count)
        frames = [_name(f) for f in stack.split(";")]
        total += n
        leaves[frames[-1]] += n
        for name in set(frames):
            inclusive[name] += n
    out = [f"{path.name}: {total} busy samples", "-- inclusive --"]
    out += [f"{100 * v / total:5.1f}%  {k}" for k, v in inclusive.most_common(top)]
    out += ["-- leaves --"]
    out += [f"{100 * v / total:5.1f}%  {k}" for k, v in leaves.most_common(top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(summarise(args.raw, args.top))


if __name__ == "__main__":
    main()
