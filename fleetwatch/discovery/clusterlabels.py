"""A cluster's labels, for routing pages: which ones are kept, and where they come from.

Platform teams route pages by the labels they keep on their clusters (``team``, ``env``,
``region``). fleetwatch carries the labels of

- the cluster's Secret (``metadata.labels``): an Argo CD cluster Secret's (where Argo CD
  users keep them for the ApplicationSet cluster generator's selector), a Cluster API
  ``<cluster>-kubeconfig`` Secret's (Cluster API sets only ``cluster.x-k8s.io/cluster-name``
  there; the user labels the Secret, and Cluster API's rotation keeps those labels), a
  Secret the user labels for fleetwatch;
- a kubeconfig context, where the user names them in the context's extension
  :data:`EXTENSION` (a map of strings), in a file or in a Secret's kubeconfig::

      contexts:
      - name: prod-eu
        context:
          cluster: prod-eu
          user: prod-eu
          extensions:
          - name: fleetwatch.io/labels
            extension: {team: payments, env: prod}

  kubectl and client-go keep unknown extensions as they are. For the same key a context's
  label wins over its Secret's: the context is the more specific of the two.

**Only the allowlisted ones** (:class:`Allowlist`, the exporter's
``--metric-labels-allowlist``, read as kube-state-metrics reads its flag of that name):
empty by default, so no label is kept and no series is published; label cardinality is
the user's choice. A cluster keeps its labels as one flat tuple ``(key, value, key,
value, ...)`` sorted by key (:data:`Labels`), keys and values interned (``sys.intern``:
``env=prod`` of 20,000 clusters is one string), so 20,000 clusters with three labels
cost one small tuple each, and nothing of a Secret but these strings is kept.

**A label that cannot be shown is skipped and counted**: a key or a value that breaks
``fleetwatch.common.names``' rule (a control or bidi character; a value may be empty, as in
Kubernetes) or a value that is not a string is left out, and a problem says which key
(never the value), counted once when it appears as every discovery problem is.

A Secret version that cannot be read keeps its last good clusters
(``fleetwatch.discovery.secrets.with_last_good``), their labels with them.

Pure: mappings in, tuples out.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleetwatch.common.names import name_flaw

#: The kubeconfig context extension that holds a context's labels.
EXTENSION: Final = "fleetwatch.io/labels"

#: A cluster's kept labels: ``(key, value, key, value, ...)``, sorted by key, interned.
Labels = tuple[str, ...]

#: Characters that end or split an allowlist entry, and never belong in one.
_SYNTAX = set(",[]=")


class AllowlistError(ValueError):
    """``--metric-labels-allowlist`` has a value we refuse; the message says why."""


@dataclass(frozen=True)
class Allowlist:
    """Which label keys are kept (``--metric-labels-allowlist``).

    ``keys``: exact keys; ``patterns``: entries with one ``*`` (a prefix, a suffix or
    both, as kube-state-metrics' partial wildcards); ``every``: a lone ``*``.
    """

    keys: frozenset[str] = frozenset()
    patterns: tuple[re.Pattern[str], ...] = ()
    every: bool = False

    @property
    def empty(self) -> bool:
        return not (self.keys or self.patterns or self.every)

    @classmethod
    def parse(cls, text: str) -> Allowlist:
        """``team,env,region``, ``*``, ``example.org/*``, or kube-state-metrics' own form
        for one resource, ``clusters=[team,env]`` (``*=[...]`` alike); "" is none."""
        text = text.strip()
        if not text:
            return NO_LABELS
        resource, eq, rest = text.partition("=")
        if eq:
            if resource.strip() not in ("clusters", "*"):
                raise AllowlistError(
                    f"resource {resource.strip()!r}: fleetwatch has one, 'clusters' "
                    "(write 'team,env' or 'clusters=[team,env]')"
                )
            if not (rest.startswith("[") and rest.endswith("]")):
                raise AllowlistError("expected clusters=[label1,label2,...]")
            text = rest[1:-1].strip()
            if not text:
                return NO_LABELS
        entries = [e.strip() for e in text.split(",")]
        keys: set[str] = set()
        patterns: list[re.Pattern[str]] = []
        for entry in entries:
            if not entry:
                raise AllowlistError(f"{text!r}: an empty entry (a comma too many)")
            flaw = name_flaw(entry)
            if flaw is not None or _SYNTAX & set(entry) or " " in entry:
                raise AllowlistError(f"entry {entry!r} is not a label key")
            stars = entry.count("*")
            if entry == "*":
                if len(entries) > 1:
                    raise AllowlistError("'*' allows every label: give it alone")
                return cls(every=True)
            if stars > 1:
                raise AllowlistError(f"entry {entry!r}: only one '*' per entry")
            if stars:
                head, _, tail = entry.partition("*")
                patterns.append(re.compile(f"{re.escape(head)}.*{re.escape(tail)}", re.DOTALL))
            else:
                keys.add(entry)
        return cls(frozenset(keys), tuple(patterns))

    def allows(self, key: str) -> bool:
        return self.every or key in self.keys or any(p.fullmatch(key) for p in self.patterns)

    def pick(self, labels: object, what: str = "label") -> tuple[Labels, list[str]]:
        """The allowlisted labels of ``labels`` (a mapping; anything else is none), and
        why any of them was skipped (``what`` names where they were read)."""
        if self.empty or not isinstance(labels, Mapping) or not labels:
            return (), []
        kept: list[tuple[str, str]] = []
        problems: list[str] = []
        for key, value in labels.items():
            if not isinstance(key, str) or not self.allows(key):
                continue
            why = _label_flaw(key, value)
            if why is not None:
                problems.append(f"{what} {key[:80]!r} skipped: {why}")
                continue
            kept.append((sys.intern(key), sys.intern(value)))
        return _flat(kept), problems


#: No label kept: the default.
NO_LABELS: Final = Allowlist()


def _label_flaw(key: str, value: object) -> str | None:
    """Why a label cannot be shown (never quoting the value); None when it can."""
    key_flaw = name_flaw(key)
    if key_flaw is not None:
        return f"its key {key_flaw}"
    if not isinstance(value, str):
        return "its value is not a string (quote it)"
    if value and (value_flaw := name_flaw(value)) is not None:
        return f"its value {value_flaw}"
    return None


def _flat(pairs: list[tuple[str, str]]) -> Labels:
    pairs.sort()
    return tuple(item for pair in pairs for item in pair)


def pairs(labels: Labels) -> list[tuple[str, str]]:
    """``labels`` as ``(key, value)`` pairs, in key order."""
    return list(zip(labels[0::2], labels[1::2], strict=True))


def combined(base: Labels, over: Labels) -> Labels:
    """``base`` with ``over``'s labels added, ``over`` winning for a key both have."""
    if not base:
        return over
    if not over:
        return base
    merged = dict(pairs(base))
    merged.update(pairs(over))
    return _flat(list(merged.items()))


def context_labels(entry: Mapping[str, Any], allowlist: Allowlist) -> tuple[Labels, list[str]]:
    """The allowlisted labels a kubeconfig context entry names in its :data:`EXTENSION`
    (``context.extensions``: a list of ``{name, extension}``), and why any was skipped.

    No extension, or none of that name: no labels and no problem (it is optional).
    """
    if allowlist.empty:
        return (), []
    context = entry.get("context")
    extensions = context.get("extensions") if isinstance(context, Mapping) else None
    if not isinstance(extensions, list):
        return (), []
    for item in extensions:
        if isinstance(item, Mapping) and item.get("name") == EXTENSION:
            found = item.get("extension")
            if not isinstance(found, Mapping):
                return (), [f"extension {EXTENSION!r} is not a map of labels"]
            return allowlist.pick(found, f"extension {EXTENSION!r} label")
    return (), []
