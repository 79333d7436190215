"""The reactor-through-its-lists benchmark: what it builds, then its quick mode.

The smoke run asserts that every phase ran, timed requests of both kinds, and counted
every answer; the 2x goal belongs in bench/RESULTS.md, not here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import reactor_lists
from bench.common import is_number

PLAN = reactor_lists.Plan(
    secrets=50, objects=40, clusters=5, rate=10, quiet=1, after=1, change_every=5
)


def test_the_argocd_secrets_number_secrets_and_the_objects_spare_the_cluster_taken_down() -> None:
    found = reactor_lists.secrets_of(PLAN)
    kinds = Counter(s["metadata"]["labels"].get("argocd.argoproj.io/secret-type") for s in found)
    assert kinds == {"cluster": 50, None: 5}  # and a Cluster API Secret per cluster
    assert (
        len({s["metadata"]["name"] for s in found if s["metadata"]["namespace"] == "argocd"}) == 50
    )
    objects = reactor_lists.objects_of(PLAN)
    assert len(objects) == 40
    targets = {
        o["spec"]["destination"]["name"]
        if "destination" in o["spec"]
        else o["metadata"]["namespace"]
        for o in objects
    }
    assert targets == {"c0001", "c0002", "c0003", "c0004"}  # none on c0000, which goes down


def test_the_load_mixes_no_op_and_changing_requests_as_documented() -> None:
    subs = Counter(reactor_lists.request_of("webhook", i, PLAN)[0] for i in range(100))
    assert subs == {"noop": 80, "change": 20}
    subs = Counter(reactor_lists.request_of("deployment", i, PLAN)[0] for i in range(100))
    assert subs == {"settled": 80, "move": 20}


@pytest.mark.live
def test_the_quick_mode_times_both_kinds_through_every_phase(tmp_path: Path) -> None:
    out = reactor_lists.main(["--quick", "--out", str(tmp_path / "lists.json")])
    assert is_number(out["listed_s"]) and is_number(out["relisted_s"])
    assert out["watches_broken"] >= 6  # three Secret kinds, three CD kinds
    for phase in reactor_lists.PHASES:
        for kind in reactor_lists.KINDS:
            got = out["phases"][phase][kind]
            assert got["requests"] > 0, (phase, kind)
            assert is_number(got["p99_ms"]), (phase, kind)
            assert got["non_2xx"] == {}, (phase, kind, got["non_2xx"])
    assert out["phases"]["quiet"]["webhook"]["p99_of_quiet"] == 1.0
    assert "| relist" in reactor_lists.markdown(out)
    assert "| quick | " in reactor_lists.compare({"quick": out})
