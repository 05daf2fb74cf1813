"""The CrossGuard shell: one Pulumi policy per registered rule, plus an advisory policy for "cannot check".

Built here and instantiated into a PolicyPack only in ``__main__.py`` (a PolicyPack starts a gRPC server), so tests
call each policy's ``validate`` with hand-built ``ResourceValidationArgs`` / ``StackValidationArgs``.

``args.props`` carries the same camelCase dicts the builders produce; pulumi-kubernetes fills apiVersion and kind
(for a custom resource too), and the type token (``kubernetes:apps/v1:Deployment``) is the fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from vllm_pulumi.policies.aws_objects import managed_node_group_manifest
from vllm_pulumi.policies.engine import check_resource, check_stack
from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.rule_types import CANNOT_CHECK_POLICY, Rule, Violation
from vllm_pulumi.policies.workload import Resource

_LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY,
           "disabled": EnforcementLevel.DISABLED}
_SEVERITIES = {"low": Severity.LOW, "medium": Severity.MEDIUM, "high": Severity.HIGH, "critical": Severity.CRITICAL}


def plain(value: Any) -> Any:
    """Deep copy of policy props into plain dicts and lists (reading an unknown preview value raises, and
    pulumi_policy then reports the policy as not checkable during preview)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


def manifest_from_props(resource_type: str, props: Mapping[str, Any], name: str = "") -> dict[str, Any] | None:
    """The Kubernetes object a pulumi-kubernetes resource describes, or None for any other resource."""
    parts = resource_type.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes":
        return None
    group_version, kind = parts[1], parts[2]
    obj = plain(props)
    if not isinstance(obj, dict):
        return None
    obj.setdefault("apiVersion", group_version.removeprefix("core/"))
    obj.setdefault("kind", kind)
    raw_metadata = obj.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    if name and not metadata.get("name"):
        metadata = {**metadata, "name": name}  # auto-named: the physical name is not known before create
    obj["metadata"] = metadata
    return obj


def _settings(rule: Rule, config: Mapping[str, Any]) -> dict[str, Any]:
    return {**rule.defaults(), **{k: v for k, v in config.items() if k in rule.settings}}


def _text(violation: Violation) -> str:
    return f"{violation.message}. Fix: {violation.fix}"


def _resource_validation(rule: Rule) -> Any:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = manifest_from_props(args.resource_type, args.props, args.name)
        if obj is None:
            return
        for violation in check_resource(rule, Resource(obj, args.urn), _settings(rule, args.get_config())):
            if not violation.cannot_check:  # those go to the advisory cannot-check policy
                report_violation(_text(violation), None)

    return validate


def _stack_validation(rule: Rule) -> Any:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = []
        for item in args.resources:
            obj = (manifest_from_props(item.resource_type, item.props, item.name)
                   or managed_node_group_manifest(item.resource_type, plain(item.props), item.name))
            if obj is not None:
                resources.append(Resource(obj, item.urn))
        if not resources:
            return
        for violation in check_stack(rule, resources, _settings(rule, args.get_config())):
            if not violation.cannot_check:
                report_violation(_text(violation), violation.resource.source if violation.resource else None)

    return validate


def _cannot_check_validation(rules: Sequence[Rule]) -> Any:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = manifest_from_props(args.resource_type, args.props, args.name)
        if obj is None:
            return
        resource = Resource(obj, args.urn)
        for rule in rules:
            for violation in check_resource(rule, resource, rule.defaults()):
                if violation.cannot_check:
                    report_violation(f"[{rule.name}] {_text(violation)}", None)

    return validate


def _schema(rule: Rule) -> PolicyConfigSchema | None:
    if not rule.settings:
        return None
    return PolicyConfigSchema(properties={
        key: {"type": setting.json_type, "default": setting.default, "description": setting.description}
        for key, setting in rule.settings.items()
    })


def build_policies() -> list[Policy]:
    """One CrossGuard policy per rule (its enforcement and severity from the registry), plus cannot-check."""
    policies: list[Policy] = []
    rules = list(all_rules().values())
    for rule in rules:
        common: dict[str, Any] = {
            "enforcement_level": _LEVELS[rule.enforcement], "config_schema": _schema(rule),
            "severity": _SEVERITIES[rule.severity], "remediation_steps": rule.fix, "tags": [rule.group],
        }
        description = f"{rule.description} Why: {rule.why}"
        if rule.scope == "stack":
            policies.append(StackValidationPolicy(rule.name, description, _stack_validation(rule), **common))
        else:
            policies.append(ResourceValidationPolicy(rule.name, description, _resource_validation(rule), **common))
    policies.append(ResourceValidationPolicy(
        CANNOT_CHECK_POLICY,
        "Rules that need the model or the GPU and could not resolve them (model outside the catalog without the "
        "vllm-pulumi.dev/model-config annotation, no GPU-naming node selector), and vLLM workloads whose engine flags "
        "or kind the rules cannot read: reported here instead of passing silently.",
        _cannot_check_validation([r for r in rules if r.scope == "resource"]),
        enforcement_level=EnforcementLevel.ADVISORY, severity=Severity.LOW,
        remediation_steps="Add the vllm-pulumi.dev/model (or model-config) and vllm-pulumi.dev/gpu annotations.",
    ))
    return policies
