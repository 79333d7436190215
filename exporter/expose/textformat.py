"""The text format's pieces, and one cluster's check results encoded in it once.

:class:`EncodedChecks` is what the exposition serves of one cluster's check results, in
three objects of which one is tracked by the garbage collector: the sample lines family
after family (bytes, a separator between two families), and the ``/sd/control-plane``
groups (JSON bytes). :meth:`Families.encode` builds it once per new result (the
cluster table keeps it, ``exporter.expose.encodings``); rendering copies bytes.

The lines are those ``/metrics`` always had: ``cluster`` first, the sample's other
labels in their order (a ``cluster`` among them is dropped), values escaped (``\\``,
``"``, newline), numbers as Go's ParseFloat reads them::

    fleetwatch_etcd_member_healthy{cluster="prod",member="cp-2"} 0

and each SD group is ``{"targets":[...],"labels":{"cluster":...,...}}``, compact JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.model import CheckResult, MetricFamily

#: Between the lines of two families in :attr:`EncodedChecks.lines`: a byte valid UTF-8
#: never holds, so no line can contain it.
SEP = b"\xff"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def fmt(value: float) -> str:
    """A sample value as Go's ParseFloat reads it; integers without a decimal point."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True, slots=True)
class EncodedChecks:
    """One cluster's check results as ``/metrics`` and ``/sd/control-plane`` serve them.

    ``names`` is shared by every encoding against the same families (one tuple, not one
    per cluster). Built by :meth:`Families.encode` or :meth:`Families.merge`.
    """

    #: the families the lines follow, in this order
    names: tuple[str, ...]
    #: the sample lines (UTF-8) of each of ``names``, in that order, joined by :data:`SEP`
    #: (``lines.split(SEP)[i]`` are the lines of ``names[i]``)
    lines: bytes
    #: the HTTP SD groups as JSON objects joined by ``,`` (no brackets), ASCII
    sd: bytes

    @property
    def text(self) -> bytes:
        """Every sample line, family after family, as ``/metrics`` has them."""
        return self.lines.replace(SEP, b"")

    def segments(self) -> list[bytes]:
        """The lines of each family of ``names``, in that order."""
        return self.lines.split(SEP) if self.names else []


#: No check result at all (a cluster before its first check, or without checks).
NO_CHECKS = EncodedChecks((), b"", b"")


class Families:
    """The families check results are encoded against: their names in output order."""

    __slots__ = ("_at", "declared", "names")

    def __init__(self, families: Iterable[MetricFamily]) -> None:
        self.declared = tuple(families)
        #: a name declared twice keeps its first place, as ``declared_families`` does
        self.names = tuple(dict.fromkeys(f.name for f in self.declared))
        self._at = {name: i for i, name in enumerate(self.names)}

    def encode(self, cluster: str, result: CheckResult) -> EncodedChecks:
        """``result``'s samples and SD groups for ``cluster``, as the exposition serves them.

        Samples of an undeclared family are dropped (their HELP and TYPE are unknown).
        Raises ``UnicodeEncodeError`` for a string that is not Unicode text (a lone
        surrogate, from JSON's ``\\ud800``): nothing of it can be served.
        """
        key = f'cluster="{escape_label(cluster)}"'
        lines: list[list[str]] = [[] for _ in self.names]
        at = self._at
        for sample in result.samples:
            i = at.get(sample.name)
            if i is None:
                continue
            extra = "".join(
                f',{name}="{escape_label(value)}"'
                for name, value in sample.labels.items()
                if name != "cluster"
            )
            lines[i].append(f"{sample.name}{{{key}{extra}}} {fmt(sample.value)}\n")
        sd = b""
        if result.targets:
            groups = [
                {"targets": list(group.targets), "labels": {"cluster": cluster, **group.labels}}
                for group in result.targets
            ]
            # One list dumped is its items dumped and joined by ",", in brackets.
            sd = json.dumps(groups, separators=(",", ":"))[1:-1].encode()
        return EncodedChecks(self.names, SEP.join("".join(f).encode() for f in lines), sd)

    def merge(self, parts: Sequence[EncodedChecks]) -> EncodedChecks:
        """Several results of one cluster as one, in ``parts`` order within each family."""
        if len(parts) == 1 and parts[0].names == self.names:
            return parts[0]
        return merge(self.names, parts)


def merge(names: tuple[str, ...], parts: Sequence[EncodedChecks]) -> EncodedChecks:
    """Several results of one cluster as one, along ``names``, in ``parts`` order within
    each family."""
    if not parts:
        return NO_CHECKS
    placed = [dict(zip(p.names, p.segments(), strict=True)) for p in parts]
    lines = SEP.join(b"".join(at.get(name, b"") for at in placed) for name in names)
    return EncodedChecks(names, lines, b",".join(p.sd for p in parts if p.sd))
