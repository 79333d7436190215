"""What the manifests' comments and the docs claim about them is true.

The sizing comments of the base quote the figures docs/deployment.md gives (and those the
requests and limits are meant for); no comment says a credential is written to ``/tmp``
(none is: ``tests/exporter/test_exporter_exec_plugin.py``,
``test_embedded_client_key_never_touches_the_disk``); the reactor reconciles with each
Alertmanager peer by its pod's name, as the docs advise; and the documented way to select
another kube-prometheus-stack release renders what it says.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.helpers.deploy_manifests import KUSTOMIZE, REPO, Obj, args_of, find, of_kind, render

DEPLOYMENT_DOC = REPO / "docs" / "deployment.md"
#: A figure with a unit, as the comments and the docs write them: 44 MiB, 40 KiB, 64Mi,
#: 0.24-0.26 ms, 2.3 ms, 1,000 clusters.
FIGURE = re.compile(r"\b\d[\d,.]*(?:-\d[\d,.]*)? ?(?:MiB|KiB|Mi|ms|clusters|apps)\b")


def _section(doc: Path, heading: str) -> str:
    text = doc.read_text()
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    end = text.find(f"\n{level} ", start + len(heading) + 2)
    return text[start : end if end != -1 else None]


def _sizing_comment(manifest: Path) -> str:
    """The comment paragraph of ``manifest`` that starts with "Sizing", joined."""
    lines = manifest.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Sizing"))
    paragraph = []
    for line in lines[start:]:
        if not line.startswith("#") or line.strip() == "#":
            break
        paragraph.append(line.lstrip("# "))
    return " ".join(paragraph)


def _figures(text: str) -> set[str]:
    return {m.group(0).replace(" ", "") for m in FIGURE.finditer(text)}


@pytest.mark.parametrize("manifest", ["exporter.yaml", "reactor.yaml"])
def test_the_sizing_comments_quote_the_documented_figures(manifest: str) -> None:
    """Before: the exporter's comment said 60 MiB plus 120 MiB per 1,000 clusters and
    128Mi per 1,000 more, where the docs (and the benchmarks) say 44 MiB plus 40 KiB per
    cluster and 64Mi."""
    comment = _sizing_comment(KUSTOMIZE / "base" / manifest)
    documented = _figures(_section(DEPLOYMENT_DOC, "## What to change for a bigger fleet"))
    quoted = _figures(comment)
    assert quoted, comment
    assert quoted <= documented, f"figures the docs do not give: {sorted(quoted - documented)}"


def test_the_requests_and_limits_are_the_documented_ones() -> None:
    """docs/deployment.md: "exporter: 100m CPU, 192Mi; memory limit 512Mi"."""
    section = _section(DEPLOYMENT_DOC, "## What to change for a bigger fleet")
    claim = re.search(r"exporter:\s+(\S+)\s+CPU,\s+(\S+);\s+memory\s+limit\s+(\S+),", section)
    assert claim is not None
    for overlay in ("base", "overlays/sharded"):
        for workload in of_kind(render(overlay), "Deployment") + of_kind(
            render(overlay), "StatefulSet"
        ):
            if workload["metadata"]["labels"]["app.kubernetes.io/component"] != "exporter":
                continue
            (container,) = workload["spec"]["template"]["spec"]["containers"]
            resources = container["resources"]
            got = (
                resources["requests"]["cpu"],
                resources["requests"]["memory"],
                resources["limits"]["memory"],
            )
            assert got == claim.groups(), workload["metadata"]["name"]


def test_no_comment_says_a_credential_is_written_to_disk() -> None:
    """Before: "the kubernetes client writes embedded certificates to files" on the
    exporter's /tmp, in the manifest and in the docs; embedded keys and certificates are
    loaded from memory and never written (the exporter's tests prove it)."""
    written = re.compile(
        r"writes? (?:embedded |its |the )?(?:certificates|keys|credentials|tokens)", re.I
    )
    texts = {p: p.read_text() for p in KUSTOMIZE.rglob("*.yaml")}
    texts[DEPLOYMENT_DOC] = DEPLOYMENT_DOC.read_text()
    said = [
        f"{p.relative_to(REPO)}: {m.group(0)}"
        for p, t in texts.items()
        for m in written.finditer(t)
    ]
    assert said == []
    exporter = (KUSTOMIZE / "base" / "exporter.yaml").read_text()
    assert "fleetwatch writes no\n        # credential to any file" in exporter


def _peers(workload: Obj) -> list[str]:
    return [a.split("=", 1)[1] for a in args_of(workload) if a.startswith("--alertmanager.url=")]


@pytest.mark.parametrize("overlay", ["base", "overlays/sqlite"])
def test_the_reactor_reads_each_alertmanager_peer_by_its_pods_name(overlay: str) -> None:
    """docs/reactor.md: repeat --alertmanager.url for each peer. Before: the base named
    the Service alertmanager-operated, which answers from one peer at random."""
    peers = _peers(find(render(overlay), "Deployment", "fleetwatch-reactor"))
    assert peers
    for url in peers:
        host = urlsplit(url).hostname or ""
        pod, service, namespace, svc = host.split(".")
        assert re.fullmatch(r"alertmanager-.+-\d+", pod), pod  # a StatefulSet's pod
        assert (service, namespace, svc) == ("alertmanager-operated", "monitoring", "svc")
    assert peers == _peers(find(render("base"), "Deployment", "fleetwatch-reactor"))


def _recipe(heading: str) -> str:
    """The first ```yaml block of the docs' section ``heading``."""
    section = _section(DEPLOYMENT_DOC, heading)
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match is not None, f"no yaml block under {heading!r}"
    return match.group(1)


def test_the_documented_release_knob_renders_what_it_says(tmp_path: Path) -> None:
    """Before: another release name meant editing the component; the docs now give a
    kustomization of one's own, and this renders it."""
    recipe = _recipe("#### Another release name")
    folder = tmp_path / "my-fleetwatch"
    folder.mkdir()
    overlay = os.path.relpath(KUSTOMIZE / "overlays" / "prometheus-operator", folder)
    text = recipe.replace("../deploy/kubernetes/overlays/prometheus-operator", overlay)
    assert text != recipe
    (folder / "kustomization.yaml").write_text(text)
    done = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    objects = [d for d in yaml.safe_load_all(done.stdout) if d]
    monitoring = [o for o in objects if o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {o["kind"] for o in monitoring} == {
        "ServiceMonitor",
        "ScrapeConfig",
        "PrometheusRule",
        "AlertmanagerConfig",
    }
    assert {o["metadata"]["labels"]["release"] for o in monitoring} == {"prometheus"}
    assert "kube-prometheus-stack" not in yaml.safe_dump_all(monitoring)
    (peer,) = _peers(find(objects, "Deployment", "fleetwatch-reactor"))
    host = urlsplit(peer).hostname or ""
    assert host.startswith("alertmanager-prometheus-kube-prometheus-alertmanager-0."), peer
