"""Smoke runs of the benchmarks: tiny sizes, asserting only that they run and give numbers.

The benchmarks live in ``bench/`` at the repository root, which is not an installed
package: put the root on ``sys.path`` so ``import bench`` finds it.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
