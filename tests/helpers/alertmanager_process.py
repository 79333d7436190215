"""A real Alertmanager process for a test, on loopback, with no gossip unless asked for.

The reactor's, the deploy page's and the dashboards' tests each started one with the same
flags; the flags that keep it inside the test (a loopback listener, an empty
``--cluster.listen-address`` so it does not bind 0.0.0.0:9094, storage in the test's folder)
are written once here.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from fleetwatch.procs import ManagedProcess

ALERTMANAGER = shutil.which("prometheus-alertmanager")
NO_GOSSIP = ("--cluster.listen-address=",)


def alertmanager_process(
    folder: Path,
    config_file: Path,
    port: int,
    *,
    cluster: Sequence[str] = NO_GOSSIP,
    extra: Sequence[str] = (),
    binary: str | None = None,
) -> ManagedProcess:
    """Alertmanager on 127.0.0.1:``port`` reading ``config_file``, its data and log in
    ``folder``, not started; ``cluster`` holds the gossip flags (none by default)."""
    return ManagedProcess(
        [
            str(binary or ALERTMANAGER),
            f"--config.file={config_file}",
            f"--storage.path={folder / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            *cluster,
            *extra,
        ],
        folder / "alertmanager.log",
        ready_url=f"http://127.0.0.1:{port}/-/ready",
    )
