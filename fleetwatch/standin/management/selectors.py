"""Label and field selectors, parsed once at the edge into predicates over objects.

Label selectors have the full grammar of ``k8s.io/apimachinery/pkg/labels``: ``k=v``,
``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not
exist), ``k>n``, ``k<n``; ``!=`` and ``notin`` also match objects without the label, as
there. Field selectors take ``=``, ``==``, ``!=`` on the fields the real server indexes
for these resources: ``metadata.name``, ``metadata.namespace``, a Secret's ``type``, an
Event's ``involvedObject.*`` (``regarding.*``), ``reason``, ``type`` and the like;
any other field is refused as kube-apiserver refuses it (``field label not supported``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwatch.standin.management.status import ApiError, bad_request

Predicate = Callable[[dict[str, Any]], bool]

_KEY = r"(?:[a-z0-9A-Z.\-]+/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*")
_CMP = re.compile(rf"\s*(?P<key>{_KEY})\s*(?P<op>==|!=|=|>|<)\s*(?P<value>\S*?)\s*")
_EXISTS = re.compile(rf"\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*")


@dataclass(frozen=True)
class SelectorTerm:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == ">" else number < bound


def _split(selector: str) -> list[str]:
    """Comma-separated requirements; commas inside ``(...)`` belong to a set."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(selector):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return parts


def _parse_requirement(text: str) -> SelectorTerm:
    if match := _SET.fullmatch(text):
        values = tuple(v.strip() for v in match["values"].split(","))
        for value in values:
            if not re.fullmatch(_VALUE, value) or len(value) > 63:
                raise bad_request(f"unable to parse requirement: invalid label value: {value!r}")
        return SelectorTerm(match["key"], match["op"], values)
    if match := _CMP.fullmatch(text):
        op = "=" if match["op"] == "==" else match["op"]
        value = match["value"]
        if op in (">", "<"):
            if not value.isdigit():
                raise bad_request(
                    f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                    f"an integer: {value!r}"
                )
        elif not re.fullmatch(_VALUE, value) or len(value) > 63:
            raise bad_request(f"unable to parse requirement: invalid label value: {value!r}")
        return SelectorTerm(match["key"], op, (value,))
    if match := _EXISTS.fullmatch(text):
        return SelectorTerm(match["key"], "!" if match["neg"] else "exists")
    raise bad_request(
        f"unable to parse requirement: found '{text.strip()}', expected: a requirement"
    )


def label_selector(selector: str | None) -> Predicate:
    """A predicate over objects for ``?labelSelector=`` (empty: everything)."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements = [_parse_requirement(part) for part in _split(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return matches


def _field_value(obj: dict[str, Any], field: str) -> str:
    if field == "metadata.name":
        return str(obj.get("metadata", {}).get("name", ""))
    if field == "metadata.namespace":
        return str(obj.get("metadata", {}).get("namespace", ""))
    value: Any = obj
    for part in field.split("."):  # an Event's ``involvedObject.name``, a Secret's ``type``
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_selector(selector: str | None, extra_fields: frozenset[str] = frozenset()) -> Predicate:
    """A predicate for ``?fieldSelector=``; ``extra_fields`` are the kind's own (a Secret's
    ``type``)."""
    if not selector or not selector.strip():
        return lambda obj: True
    allowed = {"metadata.name", "metadata.namespace", *extra_fields}
    terms: list[tuple[str, bool, str]] = []
    for part in selector.split(","):
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|!=|=)\s*(.*?)\s*", part)
        if match is None:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        field, op, value = match.groups()
        if field not in allowed:
            raise bad_request(f"field label not supported: {field}")
        terms.append((field, op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, f) == v) != negated for f, negated, v in terms)

    return matches


def selectors(query: dict[str, str], extra_fields: frozenset[str] = frozenset()) -> Predicate:
    """Both selectors of a request's query as one predicate (raises :class:`ApiError` 400)."""
    labels = label_selector(query.get("labelSelector"))
    fields = field_selector(query.get("fieldSelector"), extra_fields)
    return lambda obj: labels(obj) and fields(obj)


__all__ = ["ApiError", "Predicate", "field_selector", "label_selector", "selectors"]
