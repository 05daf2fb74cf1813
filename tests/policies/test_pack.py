"""The CrossGuard shell, without a PolicyPack (which would start a server): each policy's ``validate`` is called with
hand-built ``ResourceValidationArgs`` / ``StackValidationArgs``, the way the Pulumi engine calls it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from vllm_pulumi.policies.pack import build_policies, manifest_from_props
from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.rule_types import CANNOT_CHECK_POLICY

from .cases import fixture_tree

FIXTURES = fixture_tree()
POLICIES: dict[str, Policy] = {p.name: p for p in build_policies()}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _type_token(obj: dict[str, Any]) -> str:
    api_version = obj["apiVersion"]
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{obj['kind']}"


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def _urn(obj: dict[str, Any]) -> str:
    return f"urn:pulumi:dev::vllm-pulumi::{_type_token(obj)}::{obj['metadata']['name']}"


def _resource_args(obj: dict[str, Any], config: dict[str, Any] | None = None,
                   drop_type_fields: bool = False) -> ResourceValidationArgs:
    props = {k: v for k, v in obj.items() if not (drop_type_fields and k in ("apiVersion", "kind"))}
    return ResourceValidationArgs(_type_token(obj), props, _urn(obj), obj["metadata"]["name"], _opts(), None, config)


def _validate_resource(name: str, obj: dict[str, Any], **kwargs: Any) -> list[tuple[str, str | None]]:
    policy = POLICIES[name]
    assert isinstance(policy, ResourceValidationPolicy)
    reported: list[tuple[str, str | None]] = []
    policy.validate(_resource_args(obj, **kwargs), lambda message, urn=None: reported.append((message, urn)))
    return reported


def _validate_stack(name: str, objects: list[dict[str, Any]],
                    config: dict[str, Any] | None = None) -> list[tuple[str, str | None]]:
    policy = POLICIES[name]
    assert isinstance(policy, StackValidationPolicy)
    resources = [PolicyResource(_type_token(o), o, _urn(o), o["metadata"]["name"], _opts(), None, None, [], {})
                 for o in objects]
    reported: list[tuple[str, str | None]] = []
    policy.validate(StackValidationArgs(resources, config),
                    lambda message, urn=None: reported.append((message, urn)))
    return reported


def test_one_policy_per_rule_with_registry_levels_plus_cannot_check() -> None:
    rules = all_rules()
    assert set(POLICIES) == set(rules) | {CANNOT_CHECK_POLICY}
    for name, rule in rules.items():
        policy = POLICIES[name]
        assert policy.enforcement_level == EnforcementLevel(rule.enforcement)
        assert policy.severity == Severity(rule.severity)
        assert isinstance(policy, StackValidationPolicy if rule.scope == "stack" else ResourceValidationPolicy)
        if rule.settings:
            assert policy.config_schema is not None
            assert set(policy.config_schema.properties) == set(rule.settings)
    assert POLICIES[CANNOT_CHECK_POLICY].enforcement_level == EnforcementLevel.ADVISORY


def test_resource_policy_reports_violation_with_fix() -> None:
    deployment = _docs(FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml")[0]
    reported = _validate_resource("shutdown-timeout", deployment)
    assert len(reported) == 1
    message, urn = reported[0]
    assert "--shutdown-timeout is missing" in message and "Fix: add --shutdown-timeout=90" in message
    assert urn is None


def test_resource_policy_passes_clean_resource() -> None:
    deployment = _docs(FIXTURES / "reference" / "single-node.yaml")[0]
    for name, policy in POLICIES.items():
        if isinstance(policy, ResourceValidationPolicy):
            assert _validate_resource(name, deployment) == [], name


def test_type_token_supplies_api_version_and_kind() -> None:
    deployment = _docs(FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml")[0]
    assert _validate_resource("shutdown-timeout", deployment, drop_type_fields=True)
    lws = _docs(FIXTURES / "lws-restart-policy" / "fires" / "none.yaml")[0]
    assert _validate_resource("lws-restart-policy", lws, drop_type_fields=True)
    assert manifest_from_props("kubernetes:core/v1:Service", {"spec": {}}, "svc") == {
        "spec": {}, "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    assert manifest_from_props("aws:eks/nodeGroup:NodeGroup", {}, "ng") is None


def test_policy_config_settings_reach_the_rule() -> None:
    deployment = _docs(FIXTURES / "reference" / "single-node.yaml")[0]
    assert _validate_resource("grace-covers-drain", deployment, config={"margin_seconds": 10}) == []
    reported = _validate_resource("grace-covers-drain", deployment,
                                  config={"margin_seconds": 40, "enforcementLevel": "mandatory"})
    assert reported and "margin 40 s" in reported[0][0]


def test_exemption_annotation_applies_in_the_pack() -> None:
    deployment = _docs(FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml")[0]
    deployment["metadata"]["annotations"] = {"vllm-pulumi.dev/policy-exempt": "shutdown-timeout"}
    assert _validate_resource("shutdown-timeout", deployment) == []


def test_cannot_check_goes_to_the_advisory_policy() -> None:
    deployment = _docs(FIXTURES / "kv-cache-fits" / "fires" / "cannot-check-unknown-gpu.yaml")[0]
    assert _validate_resource("kv-cache-fits", deployment) == []
    reported = _validate_resource(CANNOT_CHECK_POLICY, deployment)
    assert any(message.startswith("[kv-cache-fits] cannot check") for message, _ in reported)


def test_stack_policy_reports_against_the_urn_at_fault() -> None:
    objects = _docs(FIXTURES / "autoscaler-cooldown" / "fires" / "short-cooldown.yaml")
    reported = _validate_stack("autoscaler-cooldown", objects)
    scaled = next(o for o in objects if o["kind"] == "ScaledObject")
    assert reported and all(urn == _urn(scaled) for _, urn in reported)
    assert "cooldownPeriod 60 s" in reported[0][0]
    assert _validate_stack("autoscaler-cooldown", objects, config={"min_cooldown_seconds": 30}) != []


@pytest.mark.parametrize("rule", sorted(n for n, r in all_rules().items() if r.scope == "stack"))
def test_stack_policies_pass_the_reference(rule: str) -> None:
    objects = _docs(FIXTURES / "reference" / "single-node.yaml") + _docs(FIXTURES / "reference" / "multi-node.yaml")
    assert _validate_stack(rule, objects) == []


def test_stack_policy_ignores_non_kubernetes_resources() -> None:
    resource = PolicyResource("aws:eks/nodeGroup:NodeGroup", {"scalingConfig": {}}, "urn:x", "ng", _opts(), None,
                              None, [], {})
    reported: list[str] = []
    POLICIES["metrics-scraped"].validate(  # type: ignore[attr-defined]
        StackValidationArgs([resource]), lambda message, urn=None: reported.append(message))
    assert reported == []


def test_pack_layout() -> None:
    """PulumiPolicy.yaml runs the pack in the project venv; only __main__.py instantiates the PolicyPack."""
    root = Path(__file__).resolve().parents[2] / "policies"
    project = yaml.safe_load((root / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == "../.venv"
    assert (root / "requirements.txt").read_text().count("pulumi-policy==1.21.0") == 1
    constructing = [p.name for p in root.glob("*.py") if "PolicyPack(" in p.read_text()]
    assert constructing == ["__main__.py"]
