"""Exec credential plugins, run by us: a deadline, a process group, killed with their children.

The kubernetes client runs a kubeconfig's ``exec`` plugin and waits for it without a
timeout. A plugin that never answers (a login prompt nobody sees, a cloud API that does
not answer, a child that keeps its stdout open) then holds a thread for ever, and a few of
them would stall the exporter. So the exporter speaks the plugin protocol itself
(``client.authentication.k8s.io`` ``ExecCredential``, as the client and kubectl do):

- the plugin runs in a session of its own (``start_new_session``): its process group holds
  the children it starts, and killing the group kills them too;
- its output is read with a deadline (the probe timeout) and a size bound; at the
  deadline the group is killed with SIGKILL;
- a guard in the group (``sh``: ``(sleep T; kill -9 0) & exec plugin``) kills the whole
  group one second after our deadline, whatever happened meanwhile: if the exporter itself
  is killed with SIGKILL (no code of ours runs then), the plugin and its children still end
  then instead of living on as orphans;
- once the plugin has answered (or failed), its group is killed: a child it left behind
  (one that still holds its stdout, or any other) ends with it;
- :meth:`PluginRunner.kill_all` kills every plugin in flight: the exporter calls it on
  shutdown (and at interpreter exit), after which no plugin starts;
- stderr is discarded: a plugin may print a secret there, and nothing of ours quotes it.

Nothing here is asynchronous: :meth:`PluginRunner.run` blocks, in a credential worker
thread (``exporter.net.workers``), never on the event loop.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Bytes of plugin output read at most (a real ExecCredential is a few kilobytes).
MAX_OUTPUT = 1 << 20

#: Extra seconds the guard gives a plugin's group beyond our own deadline.
GUARD_GRACE = 1.0

#: ``sh -c`` script: a sleeper that kills the group at the deadline, then the plugin
#: itself in the shell's place (so the process we wait for is the plugin).
_GUARD = '(sleep "$0"; kill -9 0) </dev/null >/dev/null 2>&1 & exec "$@"'

_EXIT_MEANINGS = {126: "command not executable", 127: "command not found"}


class ExecPluginError(Exception):
    """The plugin gave no usable credential; the message never holds its output."""


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin answered: a token, or a client certificate and key (PEM)."""

    token: str | None = field(default=None, repr=False)
    client_certificate: bytes | None = None
    client_key: bytes | None = field(default=None, repr=False)
    #: epoch seconds of ``expirationTimestamp``, if given
    expires_at: float | None = None


class PluginRunner:
    """Runs exec plugins with a deadline and keeps track of those in flight.

    One per exporter (owned by ``exporter.net.connections.Connections``); thread-safe.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._live: dict[int, subprocess.Popen[bytes]] = {}  #: process group -> its leader
        self._closed = False
        self._shell = "/bin/sh" if os.access("/bin/sh", os.X_OK) else None
        self.started = 0  #: plugins started (tests check sharing and caching)
        atexit.register(self.kill_all)

    def run(
        self,
        exec_config: Mapping[str, Any],
        cwd: str | None,
        cluster: Mapping[str, Any] | None = None,
    ) -> ExecCredential:
        """Run the plugin of a kubeconfig user's ``exec`` entry and parse its answer.

        ``cluster`` is the kubeconfig cluster entry, handed to the plugin when it asks for
        it (``provideClusterInfo``). Blocking: call it from a worker thread.
        """
        api_version = exec_config.get("apiVersion")
        command = exec_config.get("command")
        if not isinstance(command, str) or not command or not isinstance(api_version, str):
            raise ExecPluginError("exec: malformed entry: it needs a command and an apiVersion")
        if exec_config.get("interactiveMode") == "Always":
            raise ExecPluginError("exec: the plugin needs a terminal (interactiveMode Always)")
        args = [command, *(str(a) for a in exec_config.get("args") or ())]
        env = dict(os.environ)
        for item in exec_config.get("env") or ():
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        env["KUBERNETES_EXEC_INFO"] = json.dumps(_exec_info(exec_config, api_version, cluster))
        output = self._run(args, cwd or None, env)
        return parse_exec_credential(output, api_version)

    def _run(self, args: list[str], cwd: str | None, env: dict[str, str]) -> bytes:
        deadline = time.monotonic() + self.timeout
        if self._shell is not None:
            args = [self._shell, "-c", _GUARD, f"{self.timeout + GUARD_GRACE:.3f}", *args]
        with self._lock:
            if self._closed:
                raise ExecPluginError("exec: the exporter is stopping")
            try:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                reason = (exc.strerror or type(exc).__name__).lower()
                raise ExecPluginError(f"exec: cannot start the plugin: {reason}") from None
            self._live[proc.pid] = proc
            self.started += 1
        try:
            output = _read_until(proc, deadline)
            # stdout closed: it is exiting (a moment's grace even at the deadline)
            code = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise ExecPluginError(
                f"exec: the plugin gave no answer within {self.timeout:g}s "
                "(killed with its children)"
            ) from None
        finally:
            self._kill(proc)
        if code != 0:
            meaning = _EXIT_MEANINGS.get(code, "")
            raise ExecPluginError(
                f"exec: process returned {code}" + (f" ({meaning})" if meaning else "")
            )
        return output

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the plugin's group (what is left of it: children, the guard), reap it."""
        with self._lock:
            self._live.pop(proc.pid, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5.0)
        if proc.stdout is not None:
            proc.stdout.close()

    def kill_all(self) -> None:
        """Kill every plugin in flight, with its children; start none from now on."""
        with self._lock:
            self._closed = True
            groups = list(self._live)
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def close(self) -> None:
        """:meth:`kill_all`, and forget the interpreter-exit hook (the exporter stopped)."""
        self.kill_all()
        atexit.unregister(self.kill_all)

    def live(self) -> int:
        with self._lock:
            return len(self._live)


def _read_until(proc: subprocess.Popen[bytes], deadline: float) -> bytes:
    """Stdout until EOF, or raise ``TimeoutExpired`` at the deadline or past the bound."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            if not selector.select(remaining):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise ExecPluginError(f"exec: the plugin wrote more than {MAX_OUTPUT} bytes")
            chunks.append(chunk)


def _exec_info(
    exec_config: Mapping[str, Any], api_version: str, cluster: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``KUBERNETES_EXEC_INFO``: never interactive; the cluster when the plugin asks."""
    spec: dict[str, Any] = {"interactive": False}
    if exec_config.get("provideClusterInfo") and cluster is not None:
        info = {k: v for k, v in cluster.items() if k != "extensions"}
        for extension in cluster.get("extensions") or ():
            if isinstance(extension, Mapping) and (
                extension.get("name") == "client.authentication.k8s.io/exec"
            ):
                info["config"] = extension.get("extension")
        spec["cluster"] = info
    return {"apiVersion": api_version, "kind": "ExecCredential", "spec": spec}


def parse_exec_credential(output: bytes, api_version: str) -> ExecCredential:
    """A plugin's stdout -> :class:`ExecCredential`, or :class:`ExecPluginError`."""
    try:
        data = json.loads(output)
    except (ValueError, UnicodeDecodeError):
        raise ExecPluginError("exec: the plugin's output is not JSON") from None
    if not isinstance(data, dict):
        raise ExecPluginError("exec: malformed response: not a JSON object")
    for name in ("apiVersion", "kind", "status"):
        if name not in data:
            raise ExecPluginError(f"exec: malformed response: missing key {name!r}")
    if data["apiVersion"] != api_version:
        raise ExecPluginError(
            f"exec: plugin api version {str(data['apiVersion'])[:80]} does not match {api_version}"
        )
    status = data["status"]
    if not isinstance(status, dict):
        raise ExecPluginError("exec: malformed response: status is not an object")
    expires_at = _expiry(status.get("expirationTimestamp"))
    token = status.get("token")
    if isinstance(token, str) and token:
        return ExecCredential(token=token, expires_at=expires_at)
    cert, key_pem = status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(cert, str) and cert and isinstance(key_pem, str) and key_pem:
        return ExecCredential(
            client_certificate=cert.encode(), client_key=key_pem.encode(), expires_at=expires_at
        )
    raise ExecPluginError("exec plugin gave no token and no client certificate")


def _expiry(value: object) -> float | None:
    if value is None:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        raise ExecPluginError("exec: expirationTimestamp is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()
