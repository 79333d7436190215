"""The management cluster's API server and identity, found as client-go finds them.

The list+watch of Secrets (``fleetwatch.kube.informer`` over ``fleetwatch.kube.kubeapi``)
and the CD integration need one API server and one identity (:func:`load_credentials`):

1. ``--discovery.kubernetes.kubeconfig`` when given: that file's current context;
2. in a pod (``KUBERNETES_SERVICE_HOST`` and ``_PORT`` set, the token file present): the
   service account (``fleetwatch.kube.kubeauth.in_cluster``);
3. otherwise ``KUBECONFIG`` (kubectl's list, merged as kubectl merges it) or
   ``~/.kube/config``.

The kubeconfig goes through discovery's own parse (``fleetwatch.discovery.kubeconfig``),
so it is read as the fleet's files are; what it names is handed to
``fleetwatch.kube.kubeauth.credentials``, which builds the TLS context the exporter's
network stack builds too. Here, in discovery, because reading kubeconfigs is discovery's:
the Kubernetes client below takes credentials and reads no kubeconfig.

Supported: ``token``, ``tokenFile``, ``username``/``password``, the CA, client
certificate and key (data or files), ``insecure-skip-tls-verify``, ``tls-server-name``.
An exec plugin or auth provider is refused with a clear reason: the exporter's plugin
runner lives in ``exporter.net``, which discovery may not import, and a management cluster
is usually reached with a service account. Errors name files and keys, never values.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fleetwatch.discovery.contextauth import Fault
from fleetwatch.discovery.files import ReadError, absolute, main_kubeconfig, read_file
from fleetwatch.discovery.kubeconfig import Document, parse_document, resolve_contexts
from fleetwatch.kube.kubeauth import (
    ApiCredentials,
    BearerToken,
    InClusterPaths,
    KubeAuthError,
    credentials,
    in_cluster,
)

__all__ = ["KubeAuthError", "from_kubeconfig", "load_credentials"]

#: a pod's service account where the kubelet mounts it
_POD = InClusterPaths()


def load_credentials(
    kubeconfig: str | None,
    env: Mapping[str, str],
    paths: InClusterPaths = _POD,
) -> ApiCredentials:
    """The management cluster's credentials, in client-go's order (module docstring)."""
    if kubeconfig:
        return from_kubeconfig([absolute(kubeconfig)], "--discovery.kubernetes.kubeconfig")
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if host and port and paths.token.exists():
        return in_cluster(host, port, paths)
    main = main_kubeconfig(None, {k: v for k, v in env.items() if k != "KUBECONFIG_PATH"})
    if main is None:
        raise KubeAuthError("no in-cluster service account, and KUBECONFIG is empty")
    files = [main] if isinstance(main, Path) else [f for f in main.files if f.exists()]
    if not files:
        raise KubeAuthError(f"no in-cluster service account, and no kubeconfig in {main}")
    return from_kubeconfig(files, "KUBECONFIG")


def from_kubeconfig(files: list[Path], origin: str) -> ApiCredentials:
    """The current context of ``files`` (merged as kubectl does)."""
    docs: list[tuple[str, Document]] = []
    for path in files:
        try:
            version, data = read_file(path)
        except ReadError as exc:
            raise KubeAuthError(f"{origin} {path}: {exc.reason}") from None
        doc = parse_document(data, version)
        docs.append((str(path), doc))
    current = next((d.current_context for _, d in docs if d.current_context), None)
    if not isinstance(current, str) or not current:
        raise KubeAuthError(f"{origin} {files[0]}: no current-context")
    resolved, problems = resolve_contexts(docs)
    if current not in resolved:
        why = "; ".join(p.reason for p in problems if p.context == current) or "not found"
        raise KubeAuthError(f"{origin} {files[0]}: context {current!r}: {why}")
    context = resolved[current]
    where = f"{context.config.source} (context {current})"
    auth = context.config.auth
    if auth.exec is not None or auth.client is not None:
        raise KubeAuthError(
            f"{where}: exec plugins and auth providers are not supported for the management "
            "cluster; use a token, a token file or a client certificate"
        )
    for fault in (auth.first, auth.late):
        if fault is not None:
            raise KubeAuthError(f"{where}: {fault.text}")
    token = None
    if isinstance(auth.token, str) and auth.token:
        token = BearerToken(token=auth.token)
    elif isinstance(auth.token_file, str):
        token = BearerToken(path=auth.token_file)
    elif isinstance(auth.token_file, Fault):
        raise KubeAuthError(f"{where}: {auth.token_file.text}")
    server = context.endpoint
    https = server.rstrip("/").startswith("https://")
    name = auth.tls_server_name if isinstance(auth.tls_server_name, str) else None
    return credentials(
        server,
        where,
        verify=auth.verify,
        ca=_material(auth.ca, "certificate-authority", where) if https else None,
        cert=_material(auth.cert, "client-certificate", where) if https else None,
        key=_material(auth.key, "client-key", where) if https else None,
        token=token,
        basic=auth.basic if isinstance(auth.basic, tuple) else None,
        server_hostname=name,
    )


def _material(value: object, what: str, where: str) -> bytes | None:
    if isinstance(value, Fault):
        raise KubeAuthError(f"{where}: {value.text}")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return Path(value).read_bytes()
        except OSError as exc:
            raise KubeAuthError(f"{where}: {what} {value}: {exc.strerror}") from None
    return None
