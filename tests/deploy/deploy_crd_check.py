"""Check monitoring.coreos.com objects against the Prometheus Operator's CRD schemas.

Run by tests/deploy/test_manifests.py with the interpreter of ``.venv-crd`` (made by
scripts/install.sh), which holds ``cloudcoil-models-prometheus-operator``: pydantic models
generated from the operator's CRD OpenAPI schemas. It lives in a virtualenv of its own
because its ``cloudcoil`` dependency registers a pytest plugin that would load (and fail)
in every test run of the main one.

    .venv-crd/bin/python tests/deploy/deploy_crd_check.py < objects.yaml

Reads YAML documents on stdin, prints one JSON line per monitoring.coreos.com object:
``{"kind", "name", "errors", "fields"}``. Each object is validated by the model of its kind
(types, enums, required fields), then dumped back: a field the model does not know is
dropped by the dump, so any difference between the dump and the input is reported as an
unknown field. ``fields`` lists every leaf path that went through the typed model.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml
from cloudcoil.models.prometheus_operator import v1, v1alpha1  # type: ignore[import-not-found,import-untyped,unused-ignore]
from pydantic import BaseModel, ValidationError

MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): v1.ServiceMonitor,
    ("monitoring.coreos.com/v1", "PodMonitor"): v1.PodMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): v1.PrometheusRule,
    ("monitoring.coreos.com/v1alpha1", "ScrapeConfig"): v1alpha1.ScrapeConfig,
    ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"): v1alpha1.AlertmanagerConfig,
}


def leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in leaves(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item, f"{path}[]")]
    return [path.lstrip(".")]


def differences(given: Any, dumped: Any, path: str = "") -> list[str]:
    if isinstance(given, dict) and isinstance(dumped, dict):
        found = []
        for key, item in given.items():
            where = f"{path}.{key}".lstrip(".")
            if key not in dumped:
                found.append(f"{where}: not a field of the schema")
            else:
                found += differences(item, dumped[key], where)
        return found
    if isinstance(given, list) and isinstance(dumped, list) and len(given) == len(dumped):
        return [
            e
            for i, (a, b) in enumerate(zip(given, dumped, strict=True))
            for e in differences(a, b, f"{path}[{i}]")
        ]
    if given != dumped:
        return [f"{path}: {given!r} read as {dumped!r}"]
    return []


def check(obj: dict[str, Any]) -> dict[str, Any]:
    model = MODELS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    name = obj.get("metadata", {}).get("name")
    if model is None:
        return {"kind": obj.get("kind"), "name": name, "errors": ["no schema for this kind"]}
    try:
        parsed = model.model_validate(obj)
    except ValidationError as exc:
        errors = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        return {"kind": obj["kind"], "name": name, "errors": errors, "fields": []}
    dumped = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return {
        "kind": obj["kind"],
        "name": name,
        "errors": differences(obj, dumped),
        "fields": sorted(set(leaves(obj))),
    }


def main() -> int:
    for obj in yaml.safe_load_all(sys.stdin):
        if obj and str(obj.get("apiVersion", "")).startswith("monitoring.coreos.com/"):
            print(json.dumps(check(obj)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
