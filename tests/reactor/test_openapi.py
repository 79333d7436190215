"""The OpenAPI document: valid OpenAPI 3.1, every route in it and nothing else, auth per
operation, and the rules it states are the ones the server applies (the same models)."""

from __future__ import annotations

import base64
import re
import sys
from typing import Any

import bcrypt
import pytest
from openapi_spec_validator import validate
from pydantic import TypeAdapter

from fleetwatch.common.webconfig import WebConfig
from reactor import fields, models
from reactor.api.openapi import OPERATIONS, openapi_document
from reactor.app import create_app
from reactor.context import ReactorSettings

MUTATING = {"post", "patch", "put", "delete"}


@pytest.mark.parametrize("basic", [False, True])
def test_the_document_is_valid_openapi(basic: bool) -> None:
    validate(openapi_document(basic=basic))


def test_every_route_is_documented_and_nothing_else(tmp_path: Any) -> None:
    app = create_app(ReactorSettings(db_path=tmp_path / "x.db"))
    routes = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", route.resource.canonical)  # type: ignore[union-attr]
        routes.add((route.method.lower(), path))
    doc = openapi_document()
    assert {(m, p) for p, ops in doc["paths"].items() for m in ops} == routes


@pytest.mark.parametrize("basic", [False, True])
def test_auth_is_declared_per_operation(basic: bool) -> None:
    doc = openapi_document(basic=basic)
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert ("basic" in schemes) is basic
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert "security" in op, (method, path)
            if method in MUTATING:
                assert op["security"] == [{"bearer": []}], (method, path)
                assert "401" in op["responses"], (method, path)
            elif basic:
                assert op["security"] == [{"basic": []}, {"bearer": []}], (method, path)
                assert "401" in op["responses"], (method, path)
            else:
                assert op["security"] == [], (method, path)


def test_every_error_answer_has_a_body_schema() -> None:
    for path, ops in openapi_document()["paths"].items():
        for method, op in ops.items():
            for code, answer in op["responses"].items():
                if int(code) >= 400 and path not in ("/-/ready",):
                    schema = answer["content"]["application/json"]["schema"]["$ref"]
                    named = schema.rsplit("/", 1)[1]
                    assert named in ("Error", "Refusal", "Conflict"), (method, path, code)
    # A 409 of a deployment is the gate's Refusal, or an Error (an app Flux or Argo CD deploy).
    conflict = openapi_document()["components"]["schemas"]["Conflict"]
    assert [c["$ref"].rsplit("/", 1)[1] for c in conflict["anyOf"]] == ["Refusal", "Error"]


def test_the_name_pattern_is_exactly_the_server_rule() -> None:
    """Every code point, inside a name and at its ends: the pattern the document carries
    says yes exactly when ``is_name`` does (the same Unicode database as the server's)."""
    schema = openapi_document()["components"]["schemas"]["Name"]
    pattern = re.compile(schema["pattern"])
    assert schema["maxLength"] == fields.MAX_NAME and schema["minLength"] == 1
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue  # no JSON string holds a lone surrogate the server could receive
        for name in (f"a{c}b", f"{c}b", f"a{c}"):
            assert (pattern.fullmatch(name) is not None) == fields.is_name(name), hex(code)
    assert fields.is_name("prod east") and not fields.is_name("x" * 254)


def test_shared_rules_are_named_once() -> None:
    doc = openapi_document()
    text = str(doc)
    assert text.count(fields.NAME_PATTERN) == 1
    new_cluster = doc["components"]["schemas"]["NewCluster"]["properties"]
    assert new_cluster["name"] == {"$ref": "#/components/schemas/Name"}
    assert new_cluster["endpoint"] == {"$ref": "#/components/schemas/Endpoint"}
    assert new_cluster["kubeconfig_secret_ref"] == {"$ref": "#/components/schemas/Text"}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("https://127.0.0.1:6443", True),
        ("http://h", True),
        ("HTTPS://h:0/p?q#f", True),
        ("https://[::1]:6443", True),
        ("https://[::1", False),
        ("https://[::1]:99999", False),
        ("https://h:port", False),
        ("ftp://h", False),
        ("https://:1", False),
    ],
)
def test_the_endpoint_rule_is_the_pattern(value: str, ok: bool) -> None:
    pattern = re.compile(openapi_document()["components"]["schemas"]["Endpoint"]["pattern"])
    assert (pattern.fullmatch(value) is not None) is ok
    doc = {"name": "c", "endpoint": value, "kubeconfig_secret_ref": "r"}
    if ok:
        models.validate(models.NewCluster, doc)
    else:
        with pytest.raises(fields.Problem, match='"endpoint" must be an http'):
            models.validate(models.NewCluster, doc)


@pytest.mark.parametrize(
    ("alert", "message"),
    [
        ({"fingerprint": {}}, "alerts[0].fingerprint must be a string"),
        ({"annotations": {"a": 1}}, "alerts[0].annotations.a must be a string"),
        ({"startsAt": "2026-01-01 00:00:00Z"}, "is not an RFC 3339 timestamp"),
        ({"startsAt": "0001-01-01T00:00:00Z"}, "Go's zero time"),
        ({"endsAt": "2026-02-30T00:00:00Z"}, "alerts[0].endsAt is not a valid time"),
    ],
)
def test_the_webhook_shape_is_checked_where_documented(alert: dict[str, Any], message: str) -> None:
    base = {"status": "firing", "labels": {}, "startsAt": "2026-01-01T00:00:00Z"}
    with pytest.raises(fields.Problem, match=re.escape(message)):
        models.validate(models.WebhookBody, {"alerts": [{**base, **alert}]})


def test_unknown_webhook_fields_are_ignored_and_documented_ones_typed() -> None:
    alert = {"status": "firing", "labels": {}, "startsAt": "2026-01-01T00:00:00Z", "x": [1]}
    models.validate(models.WebhookBody, {"alerts": [alert], "someNewField": {"y": 1}})
    with pytest.raises(fields.Problem, match='"truncatedAlerts" must be an integer'):
        models.validate(models.WebhookBody, {"alerts": [], "truncatedAlerts": True})
    webhook = openapi_document()["components"]["schemas"]["Webhook"]
    assert webhook["required"] == ["alerts"]
    assert set(webhook["properties"]) >= {"version", "alerts", "truncatedAlerts", "groupKey"}


def test_answers_are_written_by_the_documented_models() -> None:
    app: models.App = {
        "name": "a",
        "cluster": "c",
        "status": "DEPLOYED",
        "reason": None,
        "source": "api",
        "paused": None,
    }
    assert models.encode("App", app) == TypeAdapter(models.App).dump_json(app)
    assert models.encode("App", [app, app]).startswith(b"[{")
    codes = {code for op in OPERATIONS for code in op.answers}
    assert codes == {200, 201, 400, 401, 404, 409, 413, 503}


async def test_the_served_document_declares_basic_auth_when_the_web_config_has_users(
    aiohttp_client: Any, tmp_path: Any
) -> None:
    users = {"ops": bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4))}
    for config, basic in ((None, False), (WebConfig(users=users), True)):
        app = create_app(ReactorSettings(db_path=tmp_path / f"{basic}.db"), web_config=config)
        client = await aiohttp_client(app)
        auth = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
        resp = await client.get("/openapi.json", headers=auth if basic else {})
        assert resp.status == 200
        assert await resp.json() == openapi_document(basic=basic)
        if basic:  # and the guard answers 401 without it, as the document says
            assert (await client.get("/clusters")).status == 401
