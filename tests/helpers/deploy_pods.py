"""A rendered workload's pod, run with podman as the kubelet would run it.

From the pod template: the container's args (``$(VAR)`` expanded from its env, as the
kubelet does), its env (values and ``secretKeyRef``s), its volumes (Secrets written to a
folder, owned by root and the pod's fsGroup with the Secret's mode; emptyDirs and
PersistentVolumeClaims as writable folders), its security context (user, read-only root
without podman's extra tmpfs, no capabilities, no new privileges) and, for a StatefulSet
pod, its hostname; and, given the management cluster's address, what the kubelet gives
every pod (``KUBERNETES_SERVICE_HOST`` and ``_PORT``) and a pod whose template mounts its
service account's token (the token, ``ca.crt`` and ``namespace`` under
``/var/run/secrets/kubernetes.io/serviceaccount``). Only the listen addresses change:
``--web.listen-address=:PORT`` moves to 127.0.0.1 on a free port, and every containerPort
must be one of them, or the manifest names a port nothing listens on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwatch.procs import free_port
from tests.helpers.deploy_image import Container

Obj = dict[str, Any]
LISTEN = re.compile(r"^--web\.listen-address=(?P<host>[^:]*):(?P<port>\d+)$")
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class ApiServer:
    """The Kubernetes API as a pod sees it: the ``kubernetes`` Service's address, the CA
    of its certificate, and the token of the pod's service account."""

    host: str
    port: int
    ca_pem: bytes
    token: str = field(repr=False)


@dataclass
class Pod:
    """What podman needs, and where each named container port ended up on the host."""

    name: str
    args: list[str]
    env: dict[str, str]
    mounts: dict[Path, str] = field(default_factory=dict)
    writable: dict[Path, str] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)
    #: container port name -> host port
    ports: dict[str, int] = field(default_factory=dict)
    #: every file path a Secret provides inside the container
    secret_files: list[str] = field(default_factory=list)
    #: the service account's token is mounted (automountServiceAccountToken)
    token_mounted: bool = False

    def container(self, image: str, log: Path, ready_path: str | None = None) -> Container:
        ready = None
        if ready_path is not None:
            port = next(iter(self.ports.values()))
            ready = f"http://127.0.0.1:{port}{ready_path}"
        return Container(
            image,
            self.name,
            self.args,
            log,
            mounts=self.mounts,
            writable=self.writable,
            env=self.env,
            options=self.options,
            ready_url=ready,
        )


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def _env(container: Obj, secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = _expand(item["value"], env)
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        secret = secrets.get(ref["name"])
        assert secret is not None, f"env {item['name']}: Secret {ref['name']} not created"
        env[item["name"]] = secret[ref["key"]]
    return env


def _secret_folder(
    volume: Obj, secrets: dict[str, dict[str, str]], folder: Path, group: int
) -> list[str]:
    spec = volume["secret"]
    data = secrets.get(spec["secretName"])
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    if data is None:
        assert spec.get("optional"), f"Secret {spec['secretName']} not created"
        return []
    items = spec.get("items") or [{"key": key, "path": key} for key in data]
    written = []
    for item in items:
        path = folder / item["path"]
        path.write_text(data[item["key"]])
        os.chown(path, 0, group)
        path.chmod(item.get("mode", spec.get("defaultMode", 0o644)))
        written.append(item["path"])
    return written


def pod_of(
    workload: Obj,
    secrets: dict[str, dict[str, str]],
    root: Path,
    *,
    ordinal: int | None = None,
    api: ApiServer | None = None,
) -> Pod:
    """The pod of ``workload`` (StatefulSet: the one of ``ordinal``), files under ``root``;
    ``api``: the cluster's API server, for the environment and the token the kubelet gives."""
    name = workload["metadata"]["name"]
    if ordinal is not None:
        name = f"{name}-{ordinal}"
    spec = workload["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "command" not in container, "the image's ENTRYPOINT (fleetwatch) is the command"
    pod_context = spec.get("securityContext", {})
    user, group = pod_context["runAsUser"], pod_context.get("runAsGroup", 0)
    fs_group = pod_context.get("fsGroup", group)
    env = _env(container, secrets)
    args = [_expand(arg, env) for arg in container["args"]]

    pod = Pod(name=f"fw-smoke-{root.name}-{os.getpid()}", args=[], env=env)
    by_number: dict[int, int] = {}
    for port in container.get("ports", []):
        by_number[port["containerPort"]] = free_port()
        pod.ports[port["name"]] = by_number[port["containerPort"]]
    for arg in args:
        listen = LISTEN.match(arg)
        if listen:
            number = int(listen["port"])
            assert number in by_number, f"{name} listens on {number}, no containerPort says so"
            arg = f"--web.listen-address=127.0.0.1:{by_number.pop(number)}"
        pod.args.append(arg)
    assert by_number == {}, f"{name}: nothing listens on containerPort(s) {sorted(by_number)}"

    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        folder = root / name / mount["name"]
        inside = mount["mountPath"]
        if "secret" in volume:
            files = _secret_folder(volume, secrets, folder, fs_group)
            pod.secret_files += [f"{inside}/{file}" for file in files]
        else:
            assert "emptyDir" in volume or "persistentVolumeClaim" in volume, volume
            folder.mkdir(parents=True)
            os.chown(folder, user, fs_group)
            folder.chmod(0o770)
        if mount.get("readOnly") or "secret" in volume:
            pod.mounts[folder] = inside
        else:
            pod.writable[folder] = inside

    if api is not None:
        pod.env["KUBERNETES_SERVICE_HOST"] = api.host
        pod.env["KUBERNETES_SERVICE_PORT"] = str(api.port)
    # The manifests say it on every pod (their ServiceAccounts mount none by default).
    if spec["automountServiceAccountToken"]:
        assert api is not None, f"{name} mounts its service account's token: give api="
        folder = root / name / "serviceaccount"
        folder.mkdir(parents=True)
        folder.chmod(0o755)
        namespace = workload["metadata"].get("namespace", "default")
        for file, data in (("token", api.token), ("ca.crt", api.ca_pem), ("namespace", namespace)):
            path = folder / file
            path.write_bytes(data if isinstance(data, bytes) else data.encode())
            os.chown(path, 0, fs_group)
            path.chmod(0o440)
        pod.mounts[folder] = SERVICE_ACCOUNT_DIR
        pod.token_mounted = True

    context = container.get("securityContext", {})
    pod.options += ["--user", f"{user}:{group}", "--group-add", str(fs_group)]
    if context.get("readOnlyRootFilesystem"):
        pod.options += ["--read-only", "--read-only-tmpfs=false"]
    if context.get("capabilities", {}).get("drop") == ["ALL"]:
        pod.options.append("--cap-drop=all")
    if context.get("allowPrivilegeEscalation") is False:
        pod.options.append("--security-opt=no-new-privileges")
    if ordinal is not None:
        pod.options += ["--hostname", name]
    return pod
