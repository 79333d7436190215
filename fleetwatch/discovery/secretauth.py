"""What a context read from a Secret may use of its credentials (``fleetwatch.discovery.secrets``).

A kubeconfig in a Secret has no folder, and must embed its credentials: a file it names
would be a file of the exporter's pod (and a way to send its own service account token to
any server), an auth provider would make the kubernetes client read and write files, and
an exec plugin runs only when the user turned them on. Pure.
"""

from __future__ import annotations

import dataclasses

from fleetwatch.discovery.clusters import ContextConfig
from fleetwatch.discovery.contextauth import ContextAuth


def without_folder(config: ContextConfig) -> ContextConfig:
    """``config`` with no folder: the parse took the reference's "folder" for one."""
    auth = dataclasses.replace(config.auth, exec_cwd="", client_base="")
    return dataclasses.replace(config, base_path="", auth=auth)


#: The file keys of a kubeconfig, by the part of :class:`ContextAuth` they end in.
_FILE_KEYS = (
    ("ca", "certificate-authority"),
    ("cert", "client-certificate"),
    ("key", "client-key"),
    ("token_file", "tokenFile"),
)


def refused(auth: ContextAuth, exec_plugins: bool) -> str | None:
    """Why a Secret's context is not probed though it resolved (None: it is probed)."""
    for attribute, key in _FILE_KEYS:
        if isinstance(getattr(auth, attribute), str):  # a path (data is bytes)
            return (
                f"its kubeconfig names a file ({key}): a kubeconfig read from a Secret "
                "must embed its credentials"
            )
    if auth.client is not None:
        return (
            "its user has an auth-provider: only kubeconfig files may use one (the "
            "kubernetes client reads and writes files for it)"
        )
    if auth.exec is not None and not exec_plugins:
        return "its user has an exec plugin, and exec plugins from Secrets are refused"
    return None
