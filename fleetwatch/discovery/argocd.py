"""An Argo CD cluster Secret's ``config`` -> the kubeconfig that says the same, in memory.

Argo CD keeps each cluster it deploys to as a Secret labelled
``argocd.argoproj.io/secret-type: cluster``: ``name``, ``server`` and ``config``, a JSON
``ClusterConfig`` (``pkg/apis/application/v1alpha1/types.go``, read by
``util/db/cluster.go SecretToCluster`` and ``Cluster.RawRestConfig``, Argo CD 2.x-3.x).
Rather than a second credential path, the config becomes the kubeconfig entries that mean
the same to client-go, and goes through the kubeconfig parse like any file
(``fleetwatch.discovery.kubeconfig.document_of``): the same ``ContextAuth`` comes out, and the
exporter builds its credentials unchanged. The kubeconfig is a dict, never text on disk.

How each key maps, as ``RawRestConfig`` builds its ``rest.Config``:

- ``bearerToken`` -> ``token``; ``username``/``password`` -> both (one alone is basic
  auth with the other empty, as client-go's ``HasBasicAuth``);
- ``tlsClientConfig``: ``caData``/``certData``/``keyData`` (Go ``[]byte``, so base64 of
  the PEM in JSON: the very encoding of ``*-data``) -> ``certificate-authority-data``,
  ``client-certificate-data``, ``client-key-data``; ``insecure`` ->
  ``insecure-skip-tls-verify``; ``serverName`` -> ``tls-server-name``;
- ``execProviderConfig`` -> ``exec`` (``env``'s map as a list sorted by name,
  ``interactiveMode: Never`` as Argo CD sets it, its ``config`` as the cluster extension
  ``client.authentication.k8s.io/exec`` a plugin given the cluster's information reads);
  it wins over the token and basic auth, which Argo CD then drops;
- ``proxyUrl`` -> ``proxy-url``; ``disableCompression`` does not matter to a probe.

JSON ``null`` and empty values are absent (Go's zero values); a value of the wrong type, or
``*Data`` that is not base64, makes Argo CD refuse the whole Secret, and so does this
(:class:`ArgoConfigError`, naming the key, never its value). What fleetwatch cannot honour
lists the cluster as not probeable (:class:`NotProbeable`): ``awsAuthConfig`` (Argo CD
runs ``argocd-k8s-auth aws`` with its pod's AWS identity), the in-cluster server
``https://kubernetes.default.svc`` (Argo CD reaches it with its own pod's service account,
which the Secret does not hold), and ``execProviderConfig`` when plugins from Secrets are
refused.

Pure: JSON text in, a dict out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

#: Argo CD's address of the cluster it runs in (``KubernetesInternalAPIServerAddr``).
IN_CLUSTER_SERVER = "https://kubernetes.default.svc"

#: Where client-go hands an exec plugin per-cluster data (``ExecCredential.spec.cluster.config``).
EXEC_EXTENSION = "client.authentication.k8s.io/exec"

_TLS_DATA = (
    ("caData", "cluster", "certificate-authority-data"),
    ("certData", "user", "client-certificate-data"),
    ("keyData", "user", "client-key-data"),
)


class ArgoConfigError(ValueError):
    """A ``config`` Argo CD itself would refuse; the message names the key, not the value."""


class NotProbeable(Exception):
    """An auth form fleetwatch does not run; the message says which key and why."""


def parse_config(text: bytes) -> Mapping[str, Any]:
    """The ``config`` key's JSON object (empty when the key is absent or empty)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except UnicodeDecodeError:
        raise ArgoConfigError("'config' is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        # The position and the parser's words, never the text around it.
        raise ArgoConfigError(
            f"'config' is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ArgoConfigError("'config' is nested too deeply") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ArgoConfigError(f"'config' is {_kind(value)}, not a JSON object")
    return value


def kubeconfig(
    name: str, server: str, config: Mapping[str, Any], *, exec_plugins: bool = True
) -> dict[str, Any]:
    """The kubeconfig of one context ``name`` that reaches ``server`` as ``config`` says.

    Raises :class:`ArgoConfigError` for a config Argo CD would refuse, :class:`NotProbeable`
    for one fleetwatch cannot honour (the former first: a broken Secret is a problem
    even when its auth form is one we would not run).
    """
    tls = _object(config, "tlsClientConfig")
    aws = _object(config, "awsAuthConfig")
    exec_config = _object(config, "execProviderConfig")
    token = _string(config, "bearerToken")
    username = _string(config, "username")
    password = _string(config, "password")
    proxy_url = _string(config, "proxyUrl")
    _boolean(config, "disableCompression")
    cluster: dict[str, Any] = {"server": server}
    user: dict[str, Any] = {}
    for key, entry, data_key in _TLS_DATA:
        data = _base64(tls, key)
        if data:
            (cluster if entry == "cluster" else user)[data_key] = data
    if _boolean(tls, "insecure", "tlsClientConfig"):
        cluster["insecure-skip-tls-verify"] = True
    server_name = _string(tls, "serverName", "tlsClientConfig")
    if server_name:
        cluster["tls-server-name"] = server_name
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    exec_ = _exec(exec_config, cluster) if exec_config is not None else None
    if aws is not None:
        raise NotProbeable(
            "its config has awsAuthConfig: Argo CD signs in with argocd-k8s-auth and its "
            "pod's AWS identity, which fleetwatch does not run"
        )
    if server == IN_CLUSTER_SERVER:
        raise NotProbeable(
            f"its server is Argo CD's in-cluster address {IN_CLUSTER_SERVER}, reached with "
            "Argo CD's own service account, which the Secret does not hold"
        )
    if exec_ is not None:
        if not exec_plugins:
            raise NotProbeable(
                "its config has execProviderConfig, and exec plugins from Secrets are refused"
            )
        user["exec"] = exec_
    else:
        if token:
            user["token"] = token
        if username or password:
            user["username"], user["password"] = username or "", password or ""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def _exec(config: Mapping[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """``execProviderConfig`` as a kubeconfig ``exec`` (its ``config`` into ``cluster``)."""
    where = "execProviderConfig"
    exec_: dict[str, Any] = {"interactiveMode": "Never"}
    for key in ("apiVersion", "command", "installHint"):
        value = _string(config, key, where)
        if value:
            exec_[key] = value
    args = config.get("args")
    if args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ArgoConfigError(f"'{where}.args' is not a list of strings")
        exec_["args"] = list(args)
    env = config.get("env")
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ArgoConfigError(f"'{where}.env' is not an object of strings")
        exec_["env"] = [{"name": k, "value": env[k]} for k in sorted(env)]
    if _boolean(config, "provideClusterInfo", where):
        exec_["provideClusterInfo"] = True
    extension = config.get("config")
    if extension is not None:
        cluster["extensions"] = [{"name": EXEC_EXTENSION, "extension": extension}]
    return exec_


def _object(config: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = config.get(key)
    if value is not None and not isinstance(value, dict):
        raise ArgoConfigError(f"'{key}' is {_kind(value)}, not an object")
    return value


def _string(config: Mapping[str, Any] | None, key: str, where: str = "") -> str | None:
    value = None if config is None else config.get(key)
    if value is not None and not isinstance(value, str):
        raise ArgoConfigError(f"'{_path(where, key)}' is {_kind(value)}, not a string")
    return value


def _boolean(config: Mapping[str, Any] | None, key: str, where: str = "") -> bool:
    value = None if config is None else config.get(key)
    if value is not None and not isinstance(value, bool):
        raise ArgoConfigError(f"'{_path(where, key)}' is {_kind(value)}, not a boolean")
    return bool(value)


def _base64(tls: Mapping[str, Any] | None, key: str) -> str | None:
    """A ``[]byte`` value as Go's JSON decodes it: standard base64, line breaks ignored."""
    text = _string(tls, key, "tlsClientConfig")
    if not text:
        return None
    compact = text.replace("\r", "").replace("\n", "")
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ArgoConfigError(f"'tlsClientConfig.{key}' is not base64") from None
    return compact


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: object) -> str:
    """The JSON type of ``value`` in a few words (never the value itself)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
