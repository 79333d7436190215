"""A Kubernetes label selector (``--discovery.kubernetes.label-selector``), parsed once.

The flag takes what ``kubectl get -l`` takes, so the user's Secrets are chosen as
Kubernetes chooses them: comma-separated requirements, all of which must hold — ``key``
(present), ``!key`` (absent), ``key=value`` or ``key==value``, ``key!=value`` (absent
counts as different), ``key in (a,b)``, ``key notin (a,b)`` (absent counts as not in).
The parse refuses what the API server would refuse (a bad key or value, an empty set)
with the place and the reason, at start-up rather than at the first list; :func:`str`
gives the selector back in the API's own spelling, for a ``labelSelector`` query, so the
server can filter as :meth:`LabelSelector.matches` does.

Pure: text in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

#: A label name (the part after an optional ``prefix/``) and a label value, as Kubernetes
#: validates them (``k8s.io/apimachinery/pkg/util/validation``): at most 63 characters.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SET = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")

Operator = Literal["exists", "absent", "=", "!=", "in", "notin"]


class SelectorError(ValueError):
    """A selector the API server would refuse; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a selector: ``key``, its operator, and its values (sorted)."""

    key: str
    op: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "absent":
            return value is None
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # != and notin

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "absent":
            return f"!{self.key}"
        if self.op in ("=", "!="):
            return f"{self.key}{self.op}{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements that must all hold; none matches every object (as the API's empty
    selector does)."""

    requirements: tuple[Requirement, ...]

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """The selector of ``text``; raises :class:`SelectorError`."""
        terms = _split(text)
        return cls(tuple(_requirement(term.strip()) for term in terms if term.strip()))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(map(str, self.requirements))


def _split(text: str) -> list[str]:
    """The comma-separated terms, a set's own commas (inside parentheses) kept."""
    terms: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    if depth != 0:
        raise SelectorError(f"label selector {text!r}: unbalanced parentheses")
    return terms


def _requirement(term: str) -> Requirement:
    set_match = _SET.match(term)
    if set_match is not None:
        key = _key(set_match["key"], term)
        values = tuple(sorted({_value(v.strip(), term) for v in set_match["values"].split(",")}))
        if values == ("",):
            raise SelectorError(f"label selector term {term!r}: an empty set of values")
        op: Operator = "in" if set_match["op"] == "in" else "notin"
        return Requirement(key, op, values)
    for spelling, equality in (("!=", "!="), ("==", "="), ("=", "=")):
        if spelling in term:
            key, _, value = term.partition(spelling)
            eq: Operator = "!=" if equality == "!=" else "="
            return Requirement(_key(key.strip(), term), eq, (_value(value.strip(), term),))
    if term.startswith("!"):
        return Requirement(_key(term[1:].strip(), term), "absent")
    return Requirement(_key(term, term), "exists")


def _key(key: str, term: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        raise SelectorError(f"label selector term {term!r}: {prefix!r} is not a DNS subdomain")
    if len(name) > 63 or not _NAME.fullmatch(name):
        raise SelectorError(
            f"label selector term {term!r}: {name!r} is not a label name (at most 63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        )
    return key


def _value(value: str, term: str) -> str:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise SelectorError(
            f"label selector term {term!r}: {value!r} is not a label value (at most 63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        )
    return value
