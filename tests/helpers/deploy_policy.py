"""The cd-admission-policy component's ValidatingAdmissionPolicy, evaluated with cel-python
as kube-apiserver evaluates it (tests/deploy/test_cd_policy.py, test_cd_rbac_live.py).

The resource rules, then the match conditions (not matched: admitted), then the
validations in order, the first false one refusing with its message (kube-apiserver
answers the first); an expression that fails to evaluate refuses too (``failurePolicy:
Fail``). Variables are bound as ``variables.NAME``, each evaluated once in order, an error
kept as the value: kube-apiserver evaluates them lazily, so an unused one cannot fail a
request, and here a CEL error only surfaces where it is used, to the same effect.

cel-python implements standard CEL, not Kubernetes' libraries (no ``quantity``, ``url``,
``lists``, regex extensions) nor heterogeneous equality (``map != null``, which cel-go
has): the policy keeps to the subset both evaluate, and reads ``object``/``oldObject``
only under ``request.operation == 'UPDATE'``, where both are set.
"""

from __future__ import annotations

from typing import Any

import celpy  # type: ignore[import-untyped]
from celpy import celtypes

from tests.helpers.deploy_manifests import Obj, find

#: The user the policy's match condition names: the reactor's ServiceAccount.
REACTOR = "system:serviceaccount:fleetwatch:fleetwatch-reactor"
NAME = "fleetwatch-cd-writes"

_ENV = celpy.Environment()


class Policy:
    """A ValidatingAdmissionPolicy and its binding, evaluated as kube-apiserver would."""

    @classmethod
    def of(cls, objects: list[Obj]) -> Policy:
        """The rendered policy and binding among ``objects``."""
        return cls(
            find(objects, "ValidatingAdmissionPolicy", NAME),
            find(objects, "ValidatingAdmissionPolicyBinding", NAME),
        )

    def __init__(self, policy: Obj, binding: Obj) -> None:
        assert binding["spec"]["policyName"] == policy["metadata"]["name"]
        assert "Deny" in binding["spec"]["validationActions"]
        spec = policy["spec"]
        self.failure_policy = spec["failurePolicy"]
        self.rules = spec["matchConstraints"]["resourceRules"]
        compile_ = _ENV.compile
        self.conditions = [_ENV.program(compile_(c["expression"])) for c in spec["matchConditions"]]
        self.variables = [
            (v["name"], _ENV.program(compile_(v["expression"]))) for v in spec["variables"]
        ]
        self.validations = [
            (_ENV.program(compile_(v["expression"])), v["message"], v.get("reason", "Invalid"))
            for v in spec["validations"]
        ]

    def matches(self, request: Obj) -> bool:
        resource, operation = request["resource"], request["operation"]
        return any(
            resource["group"] in rule["apiGroups"]
            and resource["resource"] in rule["resources"]
            and operation in rule["operations"]
            for rule in self.rules
        )

    def admit(self, request: Obj, obj: Obj | None, old: Obj | None) -> str | None:
        """None when admitted, else the refusal's message."""
        if not self.matches(request):
            return None
        activation: dict[str, Any] = {
            "request": celpy.json_to_cel(request),
            "object": celpy.json_to_cel(obj),
            "oldObject": celpy.json_to_cel(old),
        }
        for condition in self.conditions:
            result = condition.evaluate(activation)
            if isinstance(result, celpy.CELEvalError):
                return None if self.failure_policy == "Ignore" else f"error: {result.args[0]}"
            if not result:
                return None
        bound: dict[celtypes.StringType, Any] = {}
        for name, program in self.variables:
            bound[celtypes.StringType(name)] = program.evaluate(
                {**activation, "variables": celtypes.MapType(bound)}
            )
        activation["variables"] = celtypes.MapType(bound)
        for program, message, _reason in self.validations:
            result = program.evaluate(activation)
            if isinstance(result, celpy.CELEvalError):
                return f"error: {result.args[0]}"  # failurePolicy Fail: refused
            assert isinstance(result, celtypes.BoolType), result
            if not result:
                return str(message)
        return None
