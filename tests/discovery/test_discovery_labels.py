"""The user's label selector, parsed and matched as the API server does
(fleetwatch.discovery.labels)."""

from __future__ import annotations

import pytest

from fleetwatch.discovery import DEFAULT_SELECTOR, LabelSelector, SelectorError

MATCHES = [
    # (selector, labels, matches)
    ("fleetwatch.io/kubeconfig", {"fleetwatch.io/kubeconfig": ""}, True),
    ("fleetwatch.io/kubeconfig", {"other": "x"}, False),
    ("!skip", {}, True),
    ("!skip", {"skip": "yes"}, False),
    ("env=prod", {"env": "prod"}, True),
    ("env==prod", {"env": "prod"}, True),
    ("env=prod", {"env": "dev"}, False),
    ("env!=prod", {}, True),  # absent counts as different
    ("env!=prod", {"env": "prod"}, False),
    ("env in (prod, staging)", {"env": "staging"}, True),
    ("env in (prod,staging)", {}, False),
    ("env notin (prod)", {}, True),
    ("env notin (prod)", {"env": "prod"}, False),
    ("a, b=1 ,!c", {"a": "", "b": "1"}, True),
    ("a,b=1,!c", {"a": "", "b": "1", "c": ""}, False),
    ("", {"anything": "x"}, True),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_selector_matches_as_the_api_server(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert LabelSelector.parse(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("fleetwatch.io/kubeconfig", "fleetwatch.io/kubeconfig"),
        (" env == prod , ! skip ", "env=prod,!skip"),
        ("env in (b, a, b)", "env in (a,b)"),
        ("", ""),
    ],
)
def test_selector_is_spelled_back_for_the_api(text: str, spelled: str) -> None:
    assert str(LabelSelector.parse(text)) == spelled


INVALID = [
    (
        "env=prod!",
        "label selector term 'env=prod!': 'prod!' is not a label value (at most 63 "
        "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
    ),
    (
        "-env",
        "label selector term '-env': '-env' is not a label name (at most 63 letters, "
        "digits, '-', '_' or '.', starting and ending with a letter or digit)",
    ),
    (
        "Bad_Prefix/name",
        "label selector term 'Bad_Prefix/name': 'Bad_Prefix' is not a DNS subdomain",
    ),
    ("env in ()", "label selector term 'env in ()': an empty set of values"),
    ("env in (a", "label selector 'env in (a': unbalanced parentheses"),
    (
        "x" * 64,
        f"label selector term {'x' * 64!r}: {'x' * 64!r} is not a label name (at most "
        "63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_selector_is_refused_with_its_place_and_reason(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        LabelSelector.parse(text)
    assert str(caught.value) == message


def test_default_selector_is_the_fleetwatch_label() -> None:
    assert str(DEFAULT_SELECTOR) == "fleetwatch.io/kubeconfig"
    assert DEFAULT_SELECTOR.matches({"fleetwatch.io/kubeconfig": "true"})
    assert not DEFAULT_SELECTOR.matches(None)
