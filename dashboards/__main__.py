"""``python -m dashboards``: rewrite the dashboards' JSON (``--check`` to only compare)."""

import sys

from dashboards.cli import main

sys.exit(main())
