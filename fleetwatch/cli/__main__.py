"""``python -m fleetwatch.cli``: the ``fleetwatch`` command."""

import sys

from fleetwatch.cli import main

sys.exit(main())
