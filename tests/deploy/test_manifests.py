"""The Kubernetes manifests render, validate and say what the rest of the repository says.

Every overlay renders with ``kubectl kustomize``; every object validates strictly (unknown
fields are errors) against Kubernetes' own schemas with kubernetes-validate, and every
monitoring.coreos.com object against the Prometheus Operator's CRD schemas (pydantic models
generated from them, in ``.venv-crd``); the PrometheusRule holds exactly ``fleetwatch
rules``' groups, which pass promtool's check and the repository's promtool unit tests; the
AlertmanagerConfig, as the operator turns it into Alertmanager configuration, passes amtool
and keeps the timings of alerts/alertmanager.yml; checkov finds no failed check among the
security policies docs/deployment.md claims (and fails only the checks it accepts, on the
objects it names). The RBAC of the clusters-from-* components: tests/deploy/test_discovery_rbac.py;
of the cd* components: tests/deploy/test_cd_rbac.py.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.helpers.commands import FLEETWATCH, run, run_ok
from tests.helpers.deploy_manifests import (
    KUBERNETES_VERSION,
    KUSTOMIZE,
    OVERLAYS,
    REPO,
    Obj,
    alertmanager_config,
    find,
    is_cd,
    of_kind,
    reads_api,
    render,
    rendered_text,
    watched_namespaces,
    workloads,
)

NAMESPACE = "fleetwatch"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
CRD_PYTHON = REPO / ".venv-crd" / "bin" / "python"
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"

#: checkov's Kubernetes checks the manifests claim to pass, for every workload (the list
#: docs/deployment.md gives): probes, requests and memory limits, no privilege, a
#: read-only root, no NET_RAW nor any capability, seccomp, no service-account token,
#: a high numeric user, no host namespaces, no default namespace, a fixed image tag.
CLAIMED_CHECKS = {
    "CKV_K8S_8": "liveness probe",
    "CKV_K8S_9": "readiness probe",
    "CKV_K8S_10": "CPU requests",
    "CKV_K8S_12": "memory requests",
    "CKV_K8S_13": "memory limits",
    "CKV_K8S_14": "image tag fixed",
    "CKV_K8S_16": "not privileged",
    "CKV_K8S_17": "no host PID",
    "CKV_K8S_18": "no host IPC",
    "CKV_K8S_19": "no host network",
    "CKV_K8S_20": "no privilege escalation",
    "CKV_K8S_21": "not the default namespace",
    "CKV_K8S_22": "read-only root filesystem",
    "CKV_K8S_23": "no root containers admitted",
    "CKV_K8S_25": "no added capabilities",
    "CKV_K8S_28": "no NET_RAW",
    "CKV_K8S_29": "security context on pod and containers",
    "CKV_K8S_30": "security context on containers",
    "CKV_K8S_31": "seccomp RuntimeDefault",
    "CKV_K8S_37": "all capabilities dropped",
    "CKV_K8S_38": "no service-account token mounted",
    "CKV_K8S_40": "high user id",
}
#: checkov's checks the manifests knowingly fail everywhere; docs/deployment.md says why.
ACCEPTED_CHECKS = {
    "CKV_K8S_11": "no CPU limit: throttling stretches the first cycle's TLS handshakes",
    "CKV_K8S_15": "imagePullPolicy IfNotPresent: the tag is fixed; pin a digest instead",
    "CKV_K8S_35": "the PostgreSQL URL (no password in it) comes from a Secret as env",
    "CKV_K8S_43": "image by tag: the digest is the user's registry's, set in an overlay",
}
#: Failed where the clusters-from-* components put them, and only there (docs/deployment.md):
#: the token in the pods that read the API, and reading Secrets in the bindings that grant it
#: (RBAC cannot narrow a grant to some Secrets: the informer lists them by selector).
API_TOKEN_CHECK = "CKV_K8S_38"
READ_SECRETS_CHECK = "CKV2_K8S_5"
#: checkov's RBAC checks the Roles and bindings pass: no wildcard, no bind, no escalate; no
#: escalation through bindings, no pods/exec, no impersonation, no services/status.
RBAC_CLAIMED = {
    "Role": {"CKV_K8S_49", "CKV_K8S_157", "CKV_K8S_158"},
    "ClusterRole": {"CKV_K8S_49", "CKV_K8S_155", "CKV_K8S_156", "CKV_K8S_157", "CKV_K8S_158"},
    "RoleBinding": {"CKV2_K8S_1", "CKV2_K8S_2", "CKV2_K8S_3", "CKV2_K8S_4"},
    "ClusterRoleBinding": {"CKV2_K8S_1", "CKV2_K8S_2", "CKV2_K8S_3", "CKV2_K8S_4"},
}


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (scripts/install.sh installs it)")
    return found


# --- rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_into_the_namespace(overlay: str) -> None:
    """Everything in ``fleetwatch``, but the RBAC of the namespaces the workloads watch."""
    objects = render(overlay)
    assert of_kind(objects, "Namespace")[0]["metadata"]["name"] == NAMESPACE
    watched = {ns for w in workloads(objects) for ns in watched_namespaces(w)}
    outside = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in objects
        if o["kind"] not in CLUSTER_SCOPED
        and o["metadata"].get("namespace") != NAMESPACE
        and not (o["kind"] in ("Role", "RoleBinding") and o["metadata"]["namespace"] in watched)
    ]
    assert outside == [], f"objects kubectl would create in the current namespace: {outside}"
    unlabelled = [
        o["metadata"]["name"]
        for o in objects
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") != "fleetwatch"
    ]
    assert unlabelled == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_is_hardened(overlay: str) -> None:
    for workload in workloads(render(overlay)):
        pod = workload["spec"]["template"]["spec"]
        # Its own identity; a token only where the informer needs one.
        assert pod["serviceAccountName"] == workload["metadata"]["labels"]["app.kubernetes.io/name"]
        assert pod["automountServiceAccountToken"] is reads_api(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert container["image"] == "localhost/fleetwatch:0.1.0"
            assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
            assert "memory" in container["resources"]["limits"]


def test_the_sqlite_overlay_runs_one_reactor_on_a_volume() -> None:
    objects = render("overlays/sqlite")
    reactor = find(objects, "Deployment", "fleetwatch-reactor")
    assert reactor["spec"]["replicas"] == 1
    assert reactor["spec"]["strategy"] == {"type": "Recreate"}
    args = reactor["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--db.url=sqlite:////var/lib/fleetwatch/fleetwatch.db" in args
    assert not [a for a in args if "postgresql" in a or "FLEETWATCH_DB_URL" in a]
    volumes = {v["name"]: v for v in reactor["spec"]["template"]["spec"]["volumes"]}
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    find(objects, "PersistentVolumeClaim", claim)
    assert of_kind(objects, "PodDisruptionBudget") == []


def test_the_shards_agree_with_their_statefulsets() -> None:
    """``--shard.count`` equals the replicas of each StatefulSet (every index has a pod),
    and the control-plane discovery asks every pod."""
    objects = render("overlays/sharded")
    statefulsets = of_kind(objects, "StatefulSet")
    assert {s["metadata"]["name"] for s in statefulsets} == {
        "fleetwatch-exporter-a",
        "fleetwatch-exporter-b",
    }
    pods = []
    for statefulset in statefulsets:
        args = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--shard.count={statefulset['spec']['replicas']}" in args
        assert "--shard.index-from-hostname" in args
        name, service = statefulset["metadata"]["name"], statefulset["spec"]["serviceName"]
        pods += [f"{name}-{i}.{service}" for i in range(statefulset["spec"]["replicas"])]
    assert of_kind(objects, "Deployment")[0]["metadata"]["name"] == "fleetwatch-reactor"
    config = find(objects, "ScrapeConfig", "fleetwatch-control-plane")
    hosts = [urlsplit(sd["url"]).hostname for sd in config["spec"]["httpSDConfigs"]]
    assert sorted(hosts) == sorted(f"{pod}.{NAMESPACE}.svc" for pod in pods)
    names = [c["metadata"]["name"] for c in of_kind(objects, "ConfigMap")]
    assert "fleetwatch-exporter-shards" not in names  # the count is kustomize's, never applied


def test_the_shard_count_is_written_once(tmp_path: Path) -> None:
    """Before: the count was written four times (two replicas, two flags), which a change
    had to keep equal; one left behind splits the fleet by two counts."""
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE, tree)
    overlay = tree / "overlays" / "sharded" / "kustomization.yaml"
    text = overlay.read_text()
    assert text.count("count=2") == 1, "the overlay must write the count once"
    overlay.write_text(text.replace("count=2", "count=3"))
    for folder in (tree / "components" / "exporter-shards", tree / "overlays" / "sharded"):
        for path in folder.glob("*.yaml"):  # nowhere else a 2 that means the count
            for line in path.read_text().splitlines():
                assert "--shard.count=2" not in line and "replicas: 2" not in line, line
    done = run_ok(["kubectl", "kustomize", str(overlay.parent)])
    statefulsets = of_kind([d for d in yaml.safe_load_all(done.stdout) if d], "StatefulSet")
    assert len(statefulsets) == 2
    for statefulset in statefulsets:
        assert statefulset["spec"]["replicas"] == 3
        args = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
        assert [a for a in args if a.startswith("--shard.count")] == ["--shard.count=3"]


def _without(template: Obj, *, args: bool) -> Obj:
    template = copy.deepcopy(template)
    template["metadata"].pop("labels")
    if args:
        for container in template["spec"]["containers"]:
            container.pop("args")
    return template


def test_the_statefulsets_pod_template_is_the_deployments() -> None:
    """Only the arguments (shards) and the labels (vantage point) differ."""
    deployment = find(render("base"), "Deployment", "fleetwatch-exporter")
    base_args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    for statefulset in of_kind(render("overlays/sharded"), "StatefulSet"):
        template = statefulset["spec"]["template"]
        assert _without(template, args=True) == _without(deployment["spec"]["template"], args=True)
        args = template["spec"]["containers"][0]["args"]
        assert args[: len(base_args)] == base_args
        labels = template["metadata"]["labels"]
        assert labels.items() >= deployment["spec"]["template"]["metadata"]["labels"].items()


# --- schemas --------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_validate_strictly_against_the_kubernetes_schemas(overlay: str) -> None:
    checked = 0
    for obj in render(overlay):
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked >= 8


def test_the_kubernetes_validation_is_strict() -> None:
    """The check above can fail: a misspelt field of a Deployment is refused."""
    deployment = find(render("base"), "Deployment", "fleetwatch-reactor")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


CRD_OVERLAYS = ("overlays/prometheus-operator", "overlays/sharded")


def _broken_objects() -> list[Obj]:
    """An unknown field and a bad enumeration value: the check must report both."""
    objects = render("overlays/prometheus-operator")
    monitor = copy.deepcopy(find(objects, "ServiceMonitor", "fleetwatch-exporter"))
    monitor["spec"]["endpoints"][0]["scrapeEvery"] = "30s"
    config = copy.deepcopy(find(objects, "AlertmanagerConfig", "fleetwatch-reactor"))
    config["spec"]["route"]["matchers"][0]["matchType"] = "~"
    return [monitor, config]


@pytest.fixture(scope="module")
def crd_results() -> dict[str, list[dict[str, Any]]]:
    """One run of the check (loading the models takes seconds) over every overlay's
    monitoring objects and the broken ones, its answers sorted back by origin."""
    if not CRD_PYTHON.exists():
        pytest.fail(f"{CRD_PYTHON} is missing: scripts/install.sh makes it")
    batches = {
        overlay: [o for o in render(overlay) if o["apiVersion"].startswith("monitoring.")]
        for overlay in CRD_OVERLAYS
    }
    batches["broken"] = _broken_objects()
    done = run_ok(
        [str(CRD_PYTHON), str(Path(__file__).with_name("deploy_crd_check.py"))],
        input_text=yaml.safe_dump_all([o for batch in batches.values() for o in batch]),
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    results: dict[str, list[dict[str, Any]]] = {}
    for name, batch in batches.items():
        results[name], answers = answers[: len(batch)], answers[len(batch) :]
    assert answers == []
    return results


@pytest.mark.parametrize("overlay", CRD_OVERLAYS)
def test_operator_objects_validate_against_the_crd_schemas(
    overlay: str, crd_results: dict[str, list[dict[str, Any]]]
) -> None:
    results = crd_results[overlay]
    kinds = sorted(r["kind"] for r in results)
    assert kinds == [
        "AlertmanagerConfig",
        "AlertmanagerConfig",
        "PrometheusRule",
        "ScrapeConfig",
        "ServiceMonitor",
        "ServiceMonitor",
    ]
    assert {f"{r['kind']}/{r['name']}": r["errors"] for r in results if r["errors"]} == {}
    fields = {f for r in results for f in r["fields"]}
    # The fields the operator acts on went through the typed models.
    assert {
        "spec.endpoints[].port",
        "spec.endpoints[].path",
        "spec.selector.matchLabels.app.kubernetes.io/name",
        "spec.groups[].rules[].expr",
        "spec.groups[].rules[].for",
        "spec.httpSDConfigs[].url",
        "spec.relabelings[].action",
        "spec.route.matchers[].matchType",
        "spec.receivers[].webhookConfigs[].httpConfig.authorization.credentials.key",
        "spec.inhibitRules[].equal[]",
    } <= fields


def test_the_crd_validation_finds_unknown_fields_and_bad_values(
    crd_results: dict[str, list[dict[str, Any]]],
) -> None:
    errors = {r["kind"]: r["errors"] for r in crd_results["broken"]}
    assert errors["ServiceMonitor"] == ["spec.endpoints[0].scrapeEvery: not a field of the schema"]
    assert "spec.route.matchers.0.matchType" in errors["AlertmanagerConfig"][0]


# --- the PrometheusRule ---------------------------------------------------------------------


def _fleetwatch(*args: str) -> str:
    return run_ok([*FLEETWATCH, *args], cwd=REPO).stdout


def _without_namespace_label(groups: list[Obj]) -> list[Obj]:
    groups = copy.deepcopy(groups)
    for group in groups:
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["labels"].pop("namespace") == NAMESPACE, rule["alert"]
    return groups


def _with_namespace_label(unit_tests: Obj) -> Obj:
    """The repository's promtool unit tests, expecting the label the PrometheusRule adds."""
    for test in unit_tests["tests"]:
        for case in test.get("alert_rule_test", []):
            for alert in case.get("exp_alerts") or []:
                alert["exp_labels"]["namespace"] = NAMESPACE
    return unit_tests


@pytest.mark.live
def test_the_prometheusrule_holds_fleetwatch_rules_groups(tmp_path: Path) -> None:
    """``fleetwatch rules``' groups plus the namespace label on every alert (the operator's
    AlertmanagerConfig routes match on it); promtool checks them and runs the repository's
    unit tests on them."""
    rule = find(render("overlays/prometheus-operator"), "PrometheusRule", "fleetwatch")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    groups = rule["spec"]["groups"]
    assert _without_namespace_label(groups) == yaml.safe_load(_fleetwatch("rules"))["groups"]

    # The unit tests name ../fleetwatch.rules.yml: give them the PrometheusRule's groups.
    (tmp_path / "fleetwatch.rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "tests").mkdir()
    for test_file in sorted((REPO / "alerts" / "tests").glob("*.test.yml")):
        loaded = yaml.safe_load(test_file.read_text())
        if loaded.get("rule_files") != ["../fleetwatch.rules.yml"]:
            continue  # an example's tests (alerts/examples/), not the shipped rules'
        unit_tests = _with_namespace_label(loaded)
        (tmp_path / "tests" / test_file.name).write_text(yaml.safe_dump(unit_tests))
    promtool = _tool("promtool")
    run_ok([promtool, "check", "rules", "fleetwatch.rules.yml"], cwd=tmp_path)
    tests = sorted(p.name for p in (tmp_path / "tests").iterdir())
    assert len(tests) >= 2
    unit = run([promtool, "test", "rules", *tests], cwd=tmp_path / "tests", timeout=180)
    assert unit.returncode == 0, unit.stdout[-3000:] + unit.stderr
    assert unit.stdout.count("SUCCESS") == len(tests)


# --- the AlertmanagerConfig -----------------------------------------------------------------


def test_the_alertmanagerconfig_as_alertmanager_sees_it_passes_amtool(tmp_path: Path) -> None:
    config = find(
        render("overlays/prometheus-operator"), "AlertmanagerConfig", "fleetwatch-reactor"
    )
    secrets = tmp_path / "secrets"
    (secrets / "fleetwatch-reactor-token").mkdir(parents=True)
    (secrets / "fleetwatch-reactor-token" / "token").write_text("t0ken\n")
    translated = alertmanager_config(config, secrets)
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(translated, sort_keys=False))
    done = run_ok([_tool("amtool"), "check-config", str(tmp_path / "alertmanager.yml")])
    assert "2 inhibit rules" in done.stdout
    # Both status alerts reach the reactor through the operator's route.
    route = translated["route"]["routes"][0]
    assert route["receiver"] == "fleetwatch/fleetwatch-reactor/fleetwatch-reactor"
    for alertname in ("FleetClusterOnline", "FleetClusterOffline"):
        done = run(
            [
                _tool("amtool"),
                "config",
                "routes",
                "test",
                f"--config.file={tmp_path / 'alertmanager.yml'}",
                f"alertname={alertname}",
                "namespace=fleetwatch",
                "cluster=a",
            ]
        )
        assert done.stdout.strip() == route["receiver"], done.stdout + done.stderr


def test_the_alertmanagerconfig_keeps_the_example_routes_timings() -> None:
    """Same grouping and timings as alerts/alertmanager.yml's routes to the reactor."""
    config = find(
        render("overlays/prometheus-operator"), "AlertmanagerConfig", "fleetwatch-reactor"
    )
    route = config["spec"]["route"]
    example = yaml.safe_load((REPO / "alerts" / "alertmanager.yml").read_text())
    reactor_routes = [
        r for r in example["route"]["routes"] if r["receiver"] == "fleetwatch-reactor"
    ]
    assert len(reactor_routes) == 2
    for example_route in reactor_routes:
        assert route["groupBy"] == example_route["group_by"]
        assert route["groupWait"] == example_route["group_wait"]
        assert route["groupInterval"] == example_route["group_interval"]
        assert route["repeatInterval"] == example_route["repeat_interval"]
    example_names = sorted(
        r["matchers"][0].split('"')[1] for r in reactor_routes
    )  # alertname = "X"
    matcher = route["matchers"][0]
    assert (matcher["name"], matcher["matchType"]) == ("alertname", "=~")
    assert sorted(matcher["value"].split("|")) == example_names
    webhook = config["spec"]["receivers"][0]["webhookConfigs"][0]
    assert webhook["sendResolved"] is True
    assert webhook["url"].endswith(":9714/alerts")
    # The example's rules among fleetwatch's own alerts (storm guard); the ones that mute
    # other tools' alerts are the object fleetwatch-one-page (tests/deploy/test_one_page.py).
    example_inhibit = [r for r in example["inhibit_rules"] if "Fleet" in r["target_matchers"][0]]
    assert len(config["spec"]["inhibitRules"]) == len(example_inhibit) == 2


# --- checkov --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkov_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One checkov run over every overlay (one file each): about 10 s instead of 4 x 8 s."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: scripts/install.sh makes it")
    folder = tmp_path_factory.mktemp("checkov")
    for overlay in OVERLAYS:
        (folder / f"{overlay.replace('/', '-')}.yaml").write_text(rendered_text(overlay))
    done = run(
        [
            str(CHECKOV),
            "--directory",
            str(folder),
            "--framework",
            "kubernetes",
            "--skip-download",  # no network: the guidelines' links are not needed
            "--compact",
            "--output",
            "json",
            "--skip-check",
            ",".join(sorted(ACCEPTED_CHECKS)),
        ],
        timeout=300,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _checkov_name(obj: Obj) -> str:
    """An object as checkov names it (``default`` where it has no namespace)."""
    namespace = obj["metadata"].get("namespace", "default")
    return f"{obj['kind']}.{namespace}.{obj['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_checkov_fails_only_the_accepted_checks_where_accepted(
    overlay: str, checkov_report: dict[str, Any]
) -> None:
    file_name = f"/{overlay.replace('/', '-')}.yaml"
    results = checkov_report["results"]
    objects = render(overlay)
    failed = sorted(
        f"{c['check_id']} {c['resource']}"
        for c in results["failed_checks"]
        if c["file_path"] == file_name
    )
    bindings = of_kind(objects, "RoleBinding") + of_kind(objects, "ClusterRoleBinding")
    accepted = [f"{API_TOKEN_CHECK} {_checkov_name(w)}" for w in workloads(objects) if reads_api(w)]
    # The CD components' bindings read no Secret (cd-argocd-cluster-secret may only patch).
    accepted += [f"{READ_SECRETS_CHECK} {_checkov_name(b)}" for b in bindings if not is_cd(b)]
    assert failed == sorted(accepted)
    passed: dict[str, set[str]] = {}
    for check in results["passed_checks"]:
        if check["file_path"] == file_name:
            passed.setdefault(check["resource"], set()).add(check["check_id"])
    assert workloads(objects)
    for workload in workloads(objects):
        name = _checkov_name(workload)
        claimed = set(CLAIMED_CHECKS) - ({API_TOKEN_CHECK} if reads_api(workload) else set())
        missing = sorted(claimed - passed.get(name, set()))
        assert missing == [], f"{name}: claimed but not passed: {missing}"
    for kind, claimed in RBAC_CLAIMED.items():
        for obj in of_kind(objects, kind):
            missing = sorted(claimed - passed.get(_checkov_name(obj), set()))
            assert missing == [], f"{_checkov_name(obj)}: claimed but not passed: {missing}"
