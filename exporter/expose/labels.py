"""``fleetwatch_cluster_labels``: each cluster's allowlisted labels, as kube-state-metrics
publishes an object's (``kube_namespace_labels`` and the like). Sample::

    # TYPE fleetwatch_cluster_labels gauge
    fleetwatch_cluster_labels{cluster="prod-eu",label_env="prod",label_team="payments"} 1
    fleetwatch_cluster_labels{cluster="lab"} 1

One series per cluster while ``--metric-labels-allowlist`` is not empty, a cluster with
none of the labels included: a rule that joins on it (``* on (cluster) group_left
(label_team) fleetwatch_cluster_labels``) must not lose that cluster's alerts. None at all
with an empty allowlist (the default): label cardinality is the user's choice.

**Names** (:func:`label_names`), kube-state-metrics' rule written anew: ``label_`` and the
key with every character outside ``[a-zA-Z0-9_]`` made ``_``, then snake case (an
``_`` between a lowercase letter or digit and the uppercase letter after it, all
lowercased): ``app.kubernetes.io/team`` is ``label_app_kubernetes_io_team``, ``teamName``
``label_team_name``. Two keys of one cluster that give one name (``team`` and ``Team``)
are both renamed, in key order, ``label_team_conflict1`` and ``label_team_conflict2`` (a
third, ``_conflict3``), skipping a name another key already has: Prometheus refuses a
sample with a label twice. The names of a set of keys are worked out once per rendering.

Pure: clusters in, text lines out; only ``exporter.expose.render`` calls it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

from exporter.expose.textformat import escape_help, escape_label
from exporter.state import ClusterState
from fleetwatch.common.metricnames import CLUSTER_LABELS

HELP = (
    "Always 1: one series per cluster, with the labels of its Secret or kubeconfig context "
    "that --metric-labels-allowlist keeps, as label_<key>."
)

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_BATCH = 256


def sanitised(key: str) -> str:
    """``label_`` and ``key`` as a Prometheus label name (module docstring)."""
    return "label_" + _CAMEL.sub(r"\1_\2", _INVALID.sub("_", key)).lower()


def label_names(keys: Sequence[str]) -> tuple[str, ...]:
    """The label name of each of ``keys`` (sorted, as a cluster keeps them), conflicts
    renamed as the module docstring says."""
    names: list[str] = []
    at: dict[str, int] = {}  # a name given -> its place in names
    suffixes: dict[str, int] = {}  # a name that collided -> the last suffix given

    def next_free(base: str) -> str:
        count = suffixes.get(base, 0)
        while True:
            count += 1
            candidate = f"{base}_conflict{count}"
            if candidate not in at:
                suffixes[base] = count
                return candidate

    for key in keys:
        base = sanitised(key)
        name = base
        if base in suffixes:
            name = next_free(base)
        elif base in at:  # first collision: the one already given becomes _conflict1
            first = at.pop(base)
            renamed = next_free(base)
            names[first] = renamed
            at[renamed] = first
            name = next_free(base)
        at[name] = len(names)
        names.append(name)
    return tuple(names)


def labels_text(pairs: Sequence[tuple[str, ClusterState]]) -> Iterator[bytes]:
    """The family's header and lines; ``pairs``: each cluster's escaped ``cluster="..."``
    and its state. Clusters of one label set (most of a fleet shares a few: the same
    team, env and region) share its text, made once per rendering."""
    name = CLUSTER_LABELS
    yield f"# HELP {name} {escape_help(HELP)}\n# TYPE {name} gauge\n".encode()
    names: dict[tuple[str, ...], tuple[str, ...]] = {}
    texts: dict[tuple[str, ...], str] = {(): "} 1\n"}
    lines = (
        f"{name}{{{k}{texts.get(v.cluster.labels) or _text(v.cluster.labels, names, texts)}"
        for k, v in pairs
    )
    while batch := list(itertools.islice(lines, _BATCH)):
        yield "".join(batch).encode()


def _text(
    labels: tuple[str, ...],
    names: dict[tuple[str, ...], tuple[str, ...]],
    texts: dict[tuple[str, ...], str],
) -> str:
    """``,label_a="x",label_b="y"} 1`` and a newline, for a cluster's ``labels``."""
    keys = labels[0::2]
    given = names.get(keys)
    if given is None:
        given = names[keys] = label_names(keys)
    sorted_pairs = sorted(zip(given, labels[1::2], strict=True))
    text = "".join(f',{n}="{escape_label(v)}"' for n, v in sorted_pairs) + "} 1\n"
    texts[labels] = text
    return text
