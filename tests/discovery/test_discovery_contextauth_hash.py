"""Contexts that differ only by their token hash apart: the credential cache stays O(1).

A fleet with one CA and a token per cluster (Argo CD's cluster Secrets, kubeadm fleets
behind one CA) once gave every ``ContextAuth`` the same hash (the token was out of it):
every look-up of the credential cache then compared a context with all the others, and
its prune after a cycle held the event loop for seconds at 5,000 clusters.
"""

from __future__ import annotations

import pytest

from fleetwatch.discovery import contextauth
from fleetwatch.discovery.contextauth import ContextAuth

CA = b"-----BEGIN CERTIFICATE-----\n" + b"A" * 2000 + b"\n-----END CERTIFICATE-----\n"


def test_one_ca_and_a_token_each_give_a_hash_each() -> None:
    auths = [ContextAuth(True, token=f"token-{i}", ca=CA) for i in range(1000)]
    assert len({hash(a) for a in auths}) == len(auths)
    basic = [ContextAuth(True, basic=("admin", f"pw-{i}"), ca=CA) for i in range(100)]
    assert len({hash(a) for a in basic}) == len(basic)


def test_equal_contexts_still_share_one_hash_and_one_entry() -> None:
    a, b = ContextAuth(True, token="t", ca=CA), ContextAuth(True, token="t", ca=bytes(CA))
    assert a == b and hash(a) == hash(b)
    assert len({a: 1, b: 2}) == 1


def test_a_token_of_a_type_that_cannot_be_hashed_is_still_a_key() -> None:
    odd = ContextAuth(True, token=["not", "a", "string"])  # as YAML may give it
    assert {odd: 1}[ContextAuth(True, token=["not", "a", "string"])] == 1
    assert odd != ContextAuth(True, token=["other"])


def test_the_hash_is_computed_once_when_the_context_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the credential cache hashes every cluster's context twice when it prunes after a
    # cycle: computed again each time, 14 fields in Python (most of 0.33 s at 20,000)
    auth = ContextAuth(True, token="t", ca=CA)
    first = hash(auth)
    monkeypatch.setattr(contextauth, "_hashable", _refused)
    assert hash(auth) == first
    assert "_hash" not in repr(auth)


def _refused(value: object) -> object:
    raise AssertionError("hashed again")
