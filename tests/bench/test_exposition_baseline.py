"""bench/exposition_baseline.py: 8a3e263's own exposition, run again, against the recording.

The smoke run exports 8a3e263, renders every recorded case and a small fleet with its code
and with this tree's, each in a process of its own: both comparisons must come out
empty (the recording is that commit's output; this tree's is that output plus what was
added since). The comparison itself is checked on a body with one line changed.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from bench import exposition_baseline
from bench.common import REPO, is_number
from tests.helpers.exposition_cases import probe_states, tables, with_additions


def _has_commit(commit: str) -> bool:
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"],
        cwd=REPO, capture_output=True, timeout=30, check=False,
    )  # fmt: skip
    return found.returncode == 0


@pytest.mark.live
@pytest.mark.skipif(not _has_commit("8a3e263"), reason="a clone without 8a3e263 (shallow)")
def test_the_old_commit_renders_the_recording_and_this_tree_renders_the_same(
    tmp_path: Path,
) -> None:
    out = exposition_baseline.main(
        ["--clusters", "20", "--runs", "1", "--rounds", "1", "--out", str(tmp_path / "e.json")]
    )
    assert out["recording_keys"] > 0
    assert out["baseline_is_the_recording"] == []
    assert out["this_tree_is_the_baseline"] == []
    [before], [after] = out["runs"]["before"], out["runs"]["after"]
    assert after["exporter"] == str(REPO / "exporter")
    assert not Path(before["exporter"]).is_relative_to(REPO)  # the export's, not ours
    for phase in ("fresh", "steady"):
        assert is_number(out[f"{phase}_ratio"])


def test_a_changed_line_is_named_with_both_versions(tmp_path: Path) -> None:
    recording = json.loads(gzip.decompress(exposition_baseline.RECORDING.read_bytes()))
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    (before / "recorded.json").write_text(json.dumps(recording))
    case = probe_states()
    good = with_additions(recording["probe states/metrics"], tables(case)).decode()
    line = 'fleetwatch_cluster_probe_success{cluster="ok"} '
    assert good.count(line + "1\n") == 1
    bodies = {
        "probe states/metrics": good.replace(line + "1\n", line + "0\n"),
        "probe states/sd": recording["probe states/sd"],
    }
    (after / "recorded.json").write_text(json.dumps(bodies))
    out = exposition_baseline.compare({"probe states": case}, None, before, after)
    assert out["baseline_is_the_recording"] == []
    [diff] = out["this_tree_is_the_baseline"]
    assert diff["what"] == "probe states/metrics"
    assert (diff["got"], diff["want"]) == (line + "0", line + "1")
    assert good.splitlines()[diff["line"] - 1] == line + "1"
