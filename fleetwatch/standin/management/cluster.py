"""A running management cluster: its HTTPS API, its control API, its kubeconfig.

``ManagementCluster`` runs on the caller's event loop (async tests, the demo);
``ThreadedManagementCluster`` runs the same on a private loop in a thread, for code that
blocks (kubectl in a subprocess, the synchronous kubernetes client). The API serves HTTPS
with a certificate of the stand-in's own CA (``certs.py``) for ``127.0.0.1`` and
``localhost``; the control API is plain HTTP. Both listen on 127.0.0.1, on free ports
unless told otherwise.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from fleetwatch.standin.management.api import Management, create_app
from fleetwatch.standin.management.auth import RbacRule
from fleetwatch.standin.management.control import create_control_app
from fleetwatch.standin.management.faults import parse_fault
from fleetwatch.standin.management.seed import seed_objects
from fleetwatch.standin.management.store import WATCH_BUFFER, ObjectStore
from fleetwatch.standin.workload.certs import FleetCerts
from fleetwatch.standin.workload.loopthread import OnLoopThread

T = TypeVar("T")

#: The kubeconfig's names for the cluster, user and context.
CONTEXT = "management"


@dataclass(frozen=True)
class ManagementSettings:
    """How a management cluster is started."""

    #: Port of the HTTPS API on 127.0.0.1 (0: any free).
    port: int = 0
    #: Port of the control API (0: any free; None: no control API).
    control_port: int | None = 0
    #: Seconds between a watch's bookmarks (when it asked for them); kube-apiserver sends them
    #: about every minute, tests want them in well under a second.
    bookmark_seconds: float = 60.0
    #: Events kept for watches to resume from (the watch cache holds 100-1000s per kind).
    window: int = 10_000
    #: Events a watch may fall behind before it is terminated as too slow (it then ends,
    #: and its client resumes from the last resourceVersion it received).
    watch_buffer: int = WATCH_BUFFER


class ManagementCluster:
    """The stand-in management cluster on the running event loop."""

    def __init__(
        self,
        directory: Path,
        settings: ManagementSettings | None = None,
        certs: FleetCerts | None = None,
    ) -> None:
        self.directory = directory
        self.settings = settings or ManagementSettings()
        self._certs = certs
        self._state: Management | None = None
        self._runners: list[web.AppRunner] = []
        self.port = 0
        self.control_port = 0

    @property
    def state(self) -> Management:
        if self._state is None:
            raise RuntimeError("the management cluster is not started")
        return self._state

    @property
    def certs(self) -> FleetCerts:
        if self._certs is None:
            raise RuntimeError("the management cluster is not started")
        return self._certs

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    @property
    def token(self) -> str:
        """The administrator's bearer token (every verb, every namespace)."""
        return self.state.tokens.admin

    @property
    def ca_file(self) -> Path:
        return self.certs.files.ca_cert

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "management.kubeconfig"

    async def start(self) -> ManagementCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._certs is None:
            self._certs = await asyncio.to_thread(FleetCerts.create, self.directory / "pki")
        store = ObjectStore(window=self.settings.window)
        self._state = Management(
            store,
            bookmark_seconds=self.settings.bookmark_seconds,
            watch_buffer=self.settings.watch_buffer,
        )
        try:
            api = web.AppRunner(create_app(self._state), handle_signals=False, shutdown_timeout=2.0)
            self._runners.append(api)
            await api.setup()
            site = web.TCPSite(
                api, "127.0.0.1", self.settings.port, ssl_context=self._certs.server_context()
            )
            await site.start()
            self.port = api.addresses[0][1]
            self._state.address = f"127.0.0.1:{self.port}"
            if self.settings.control_port is not None:
                control = web.AppRunner(create_control_app(self._state), handle_signals=False)
                self._runners.append(control)
                await control.setup()
                await web.TCPSite(control, "127.0.0.1", self.settings.control_port).start()
                self.control_port = control.addresses[0][1]
            self.write_kubeconfig(self.kubeconfig)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        """Watches end cleanly, hung requests are let go, then the listeners close."""
        if self._state is not None:
            self._state.store.close_watches()
            self._state.faults.clear()
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()

    async def __aenter__(self) -> ManagementCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- for tests -------------------------------------------------------------------

    def write_kubeconfig(self, path: Path, token: str | None = None) -> Path:
        """A kubeconfig for the API (the CA embedded, a bearer token: the admin's by default)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CONTEXT,
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.certs.ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": CONTEXT, "user": {"token": token or self.token}}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
            "current-context": CONTEXT,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def issue_token(
        self,
        user: str,
        *,
        namespaces: list[str] | None = None,
        verbs: list[str] | None = None,
        resources: list[str] | None = None,
        rules: list[RbacRule] | None = None,
    ) -> str:
        """A token of ``user`` restricted as given (like a service account with Roles), or
        holding exactly ``rules`` (``auth.RbacRule``: RBAC's, as bound)."""
        return self.state.tokens.issue(
            user, namespaces=namespaces, verbs=verbs, resources=resources, rules=rules
        )

    def seed(self, objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create or update objects as the administrator (namespaces made as needed)."""
        return seed_objects(self.state.store, objects)

    def arm_fault(self, **fault: Any) -> None:
        """Arm a fault, with the control API's fields (``kind``, ``count``, ``verb``...)."""
        self.state.faults.arm(parse_fault(fault))

    def clear_faults(self) -> None:
        self.state.faults.clear()

    def compact(self) -> int:
        return self.state.store.compact()

    def close_watches(self) -> int:
        return self.state.store.close_watches()

    def counts(self) -> dict[str, int]:
        return dict(self.state.faults.counts)

    def audit(self) -> list[dict[str, Any]]:
        """Every write answered, oldest first (``audit.AuditEvent``'s fields)."""
        return self.state.audit.as_json()

    def open_watches(self) -> int:
        return len(self.state.store.watchers)


class ThreadedManagementCluster(OnLoopThread):
    """``ManagementCluster`` with blocking methods; its servers run on a private loop."""

    thread_name = "standin-mgmt"
    what = "the management cluster"

    def __init__(
        self,
        directory: Path,
        settings: ManagementSettings | None = None,
        *,
        call_timeout: float = 30.0,
    ) -> None:
        super().__init__(call_timeout)
        self.cluster = ManagementCluster(directory, settings)

    async def _start_servers(self) -> None:
        await self.cluster.start()

    async def _stop_servers(self) -> None:
        await self.cluster.stop()

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn`` on the server's loop: the store is only ever touched from there."""

        async def call() -> Any:
            return fn(*args, **kwargs)

        return self._call(call())

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def control_url(self) -> str:
        return self.cluster.control_url

    @property
    def token(self) -> str:
        return self.cluster.token

    @property
    def ca_file(self) -> Path:
        return self.cluster.ca_file

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    def write_kubeconfig(self, path: Path, token: str | None = None) -> Path:
        return self.cluster.write_kubeconfig(path, token)

    def issue_token(self, user: str, **restrictions: Any) -> str:
        return str(self._run(self.cluster.issue_token, user, **restrictions))

    def seed(self, objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._run(self.cluster.seed, list(objects))
        return found

    def arm_fault(self, **fault: Any) -> None:
        self._run(self.cluster.arm_fault, **fault)

    def clear_faults(self) -> None:
        self._run(self.cluster.clear_faults)

    def compact(self) -> int:
        return int(self._run(self.cluster.compact))

    def close_watches(self) -> int:
        return int(self._run(self.cluster.close_watches))

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = self._run(self.cluster.counts)
        return found

    def audit(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._run(self.cluster.audit)
        return found

    def open_watches(self) -> int:
        return int(self._run(self.cluster.open_watches))

    @property
    def revision(self) -> int:
        return int(self._run(lambda: self.cluster.state.store.revision))
